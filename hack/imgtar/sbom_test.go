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
	"encoding/base64"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"

	cdx "github.com/CycloneDX/cyclonedx-go"
)

const testIndex = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

// TestSBOMListsWhatTheProgramLinks describes this test's own binary: every
// module its build info names, at its version and go.sum hash, the
// standard library, and the build settings, under the image by digest.
func TestSBOMListsWhatTheProgramLinks(t *testing.T) {
	bins := goBinaries("linux/amd64", []string{os.Args[0] + "=/x"})
	if len(bins) != 1 {
		t.Fatalf("the test binary's build info: %d programs read", len(bins))
	}
	out, err := sbom("reg.example/x:v1.2.3", testIndex, bins)
	if err != nil {
		t.Fatal(err)
	}
	var bom cdx.BOM
	if err := cdx.NewBOMDecoder(bytes.NewReader(out), cdx.BOMFileFormatJSON).Decode(&bom); err != nil {
		t.Fatal(err)
	}
	if bom.SpecVersion != cdx.SpecVersion1_6 || !strings.HasPrefix(bom.SerialNumber, "urn:uuid:") {
		t.Errorf("spec %v, serial number %q", bom.SpecVersion, bom.SerialNumber)
	}
	image := bom.Metadata.Component
	wantImage := "pkg:oci/x@sha256%3A" + strings.TrimPrefix(testIndex, "sha256:") + "?repository_url=reg.example%2Fx&tag=v1.2.3"
	if image.Type != cdx.ComponentTypeContainer || image.PackageURL != wantImage || image.Version != "v1.2.3" {
		t.Errorf("image component %+v, want purl %s", image, wantImage)
	}
	if props := *image.Properties; len(props) != 1 || props[0].Name != "golang:build:linux/amd64" || !strings.Contains(props[0].Value, "GOARCH=") {
		t.Errorf("build settings %+v", props)
	}
	byRef := map[string]cdx.Component{}
	for _, c := range *bom.Components {
		byRef[c.BOMRef] = c
	}
	info := bins[0].info
	want := []string{"pkg:golang/stdlib@v" + strings.TrimPrefix(info.GoVersion, "go"), goPURL(info.Main.Path, info.Main.Version)}
	for _, m := range info.Deps {
		if m.Replace != nil {
			m = m.Replace
		}
		ref := goPURL(m.Path, m.Version)
		want = append(want, ref)
		raw, _ := base64.StdEncoding.DecodeString(strings.TrimPrefix(m.Sum, "h1:"))
		if c, ok := byRef[ref]; !ok || c.Hashes == nil || (*c.Hashes)[0].Value != hex.EncodeToString(raw) {
			t.Errorf("module %s %s (sum %s): component %+v", m.Path, m.Version, m.Sum, c)
		}
	}
	if len(info.Deps) == 0 || len(byRef) != len(want) {
		t.Errorf("%d components, want %d (the main module, %d dependencies, the standard library)", len(byRef), len(want), len(info.Deps))
	}
	linked := map[string]bool{}
	for _, ref := range *(*bom.Dependencies)[0].Dependencies {
		linked[ref] = true
	}
	for _, ref := range want {
		if !linked[ref] {
			t.Errorf("the image does not depend on %s", ref)
		}
	}
	again, err := sbom("reg.example/x:v1.2.3", testIndex, bins)
	if err != nil || !bytes.Equal(again, out) {
		t.Errorf("the same inputs gave another bill of materials (%v)", err)
	}
}

// TestSBOMNeedsAGoProgram: a file without build info (a script, a shared
// library) is left out, and an image with no Go program has no bill.
func TestSBOMNeedsAGoProgram(t *testing.T) {
	script := filepath.Join(t.TempDir(), "run.sh")
	if err := os.WriteFile(script, []byte("#!/bin/sh\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	bins := goBinaries("linux/amd64", []string{script + "=/run.sh"})
	if len(bins) != 0 {
		t.Fatalf("a shell script read as %d Go programs", len(bins))
	}
	if _, err := sbom("reg.example/x:v1", testIndex, bins); err == nil {
		t.Error("a bill of materials of no Go program")
	}
}
