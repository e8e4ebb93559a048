/*
Copyright 2026 The Knative Authors

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

package main

import (
	"bytes"
	"crypto/sha256"
	"debug/buildinfo"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path"
	"runtime/debug"
	"slices"
	"strings"

	cdx "github.com/CycloneDX/cyclonedx-go"
)

// binary is one platform's Go program in an image, and how it was built.
type binary struct {
	platform string // os/arch
	info     *debug.BuildInfo
}

// goBinaries reads the build info of every source of pairs (src=dst, after
// {arch} is replaced) that is a Go program. Other files (a shared
// library, say) have none and are left out.
func goBinaries(platform string, pairs []string) []binary {
	var out []binary
	for _, p := range pairs {
		src, _, _ := strings.Cut(p, "=")
		if info, err := buildinfo.ReadFile(src); err == nil {
			out = append(out, binary{platform: platform, info: info})
		}
	}
	return out
}

// sbom is the CycloneDX bill of materials of the image name (a
// <repository>:<tag>) whose index has digest index: the Go modules its
// programs link, each at the version and go.sum hash its build used (as
// the build info records them), the Go standard library, and each
// platform's build settings. The same inputs give the same bytes: the
// serial number derives from the digest, and there is no timestamp.
func sbom(name, index string, binaries []binary) ([]byte, error) {
	if len(binaries) == 0 {
		return nil, errors.New("sbom: the image holds no Go program to describe")
	}
	repo, tag, _ := strings.Cut(name, ":")
	image := cdx.Component{
		BOMRef:     imagePURL(repo, tag, index),
		Type:       cdx.ComponentTypeContainer,
		Name:       repo,
		Version:    tag,
		PackageURL: imagePURL(repo, tag, index),
		Hashes:     &[]cdx.Hash{{Algorithm: cdx.HashAlgoSHA256, Value: strings.TrimPrefix(index, "sha256:")}},
	}
	var (
		components []cdx.Component
		seen       = map[string]bool{}
		linked     []string // every component's bom-ref but the image's
		properties []cdx.Property
	)
	add := func(c cdx.Component) {
		if !seen[c.BOMRef] {
			seen[c.BOMRef] = true
			components = append(components, c)
			linked = append(linked, c.BOMRef)
		}
	}
	for _, b := range binaries {
		add(moduleComponent(cdx.ComponentTypeApplication, &b.info.Main))
		for _, m := range b.info.Deps {
			if m.Replace != nil {
				m = m.Replace
			}
			add(moduleComponent(cdx.ComponentTypeLibrary, m))
		}
		std := "v" + strings.TrimPrefix(b.info.GoVersion, "go")
		add(cdx.Component{BOMRef: "pkg:golang/stdlib@" + std, Type: cdx.ComponentTypeLibrary, Name: "stdlib",
			Version: std, PackageURL: "pkg:golang/stdlib@" + std})
		settings := make([]string, 0, len(b.info.Settings))
		for _, s := range b.info.Settings {
			settings = append(settings, s.Key+"="+s.Value)
		}
		properties = append(properties, cdx.Property{Name: "golang:build:" + b.platform,
			Value: b.info.GoVersion + " " + strings.Join(settings, " ")})
	}
	image.Properties = &properties
	slices.SortFunc(components, func(a, b cdx.Component) int { return strings.Compare(a.BOMRef, b.BOMRef) })
	slices.Sort(linked)

	bom := cdx.NewBOM()
	bom.SerialNumber = serialNumber(index)
	bom.Metadata = &cdx.Metadata{Component: &image}
	bom.Components = &components
	bom.Dependencies = &[]cdx.Dependency{{Ref: image.BOMRef, Dependencies: &linked}}
	var out bytes.Buffer
	enc := cdx.NewBOMEncoder(&out, cdx.BOMFileFormatJSON)
	enc.SetPretty(true)
	if err := enc.EncodeVersion(bom, cdx.SpecVersion1_6); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}

// moduleComponent is one Go module as a component, its go.sum hash (h1,
// a SHA-256) given as hex.
func moduleComponent(kind cdx.ComponentType, m *debug.Module) cdx.Component {
	purl := goPURL(m.Path, m.Version)
	c := cdx.Component{BOMRef: purl, Type: kind, Name: m.Path, Version: m.Version, PackageURL: purl}
	if sum, ok := strings.CutPrefix(m.Sum, "h1:"); ok {
		if raw, err := base64.StdEncoding.DecodeString(sum); err == nil && len(raw) == sha256.Size {
			c.Hashes = &[]cdx.Hash{{Algorithm: cdx.HashAlgoSHA256, Value: hex.EncodeToString(raw)}}
		}
	}
	return c
}

// goPURL is the package URL of a Go module: pkg:golang/<path>@<version>.
func goPURL(modulePath, version string) string {
	parts := strings.Split(modulePath, "/")
	for i, p := range parts {
		parts[i] = url.PathEscape(p)
	}
	return "pkg:golang/" + strings.Join(parts, "/") + "@" + url.PathEscape(version)
}

// imagePURL is the package URL of an OCI image by digest:
// pkg:oci/<name>@<digest>?repository_url=<repository>&tag=<tag>.
func imagePURL(repo, tag, digest string) string {
	q := url.Values{"repository_url": {repo}}
	if tag != "" {
		q.Set("tag", tag)
	}
	// The package URL spec encodes the digest's colon, which a path keeps.
	version := strings.ReplaceAll(url.PathEscape(digest), ":", "%3A")
	return "pkg:oci/" + url.PathEscape(path.Base(repo)) + "@" + version + "?" + q.Encode()
}

// serialNumber is a UUID (version 5 bits, RFC 9562's layout) derived from
// the image's digest, so that one image has one serial number.
func serialNumber(digest string) string {
	h := sha256.Sum256([]byte("event-forwarding-proxy sbom " + digest))
	u := h[:16]
	u[6] = (u[6] & 0x0f) | 0x50
	u[8] = (u[8] & 0x3f) | 0x80
	return fmt.Sprintf("urn:uuid:%x-%x-%x-%x-%x", u[0:4], u[4:6], u[6:8], u[8:10], u[10:16])
}

// writeSBOM writes the image's bill of materials to file.
func writeSBOM(file, name, index string, binaries []binary) error {
	b, err := sbom(name, index, binaries)
	if err != nil {
		return err
	}
	return os.WriteFile(file, b, 0o644) //nolint:gosec // a bill of materials is for others to read
}
