//go:build integration

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

package manifests

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	cdx "github.com/CycloneDX/cyclonedx-go"
)

// checkSBOMs checks each image's bill of materials in the release (out):
// CycloneDX 1.6, about the image by the digest the YAML names, listing
// every module go list says the image's command links on each platform,
// each with its go.sum hash, and each platform's build settings.
func checkSBOMs(t *testing.T, out string, digests map[string]string) {
	t.Helper()
	for name, digest := range digests {
		t.Run(name, func(t *testing.T) {
			bom := readSBOM(t, filepath.Join(out, "images", name+".sbom.cdx.json"))
			if bom.SpecVersion != cdx.SpecVersion1_6 {
				t.Errorf("spec version %v, want 1.6", bom.SpecVersion)
			}
			image := bom.Metadata.Component
			if image.Type != cdx.ComponentTypeContainer || !strings.Contains(image.PackageURL, strings.ReplaceAll(digest, ":", "%3A")) ||
				image.Name != releaseRegistry+"/"+name {
				t.Errorf("the bill is about %s %s (%s), not %s@%s", image.Type, image.Name, image.PackageURL, name, digest)
			}
			platforms := map[string]bool{}
			for _, p := range *image.Properties {
				platforms[strings.TrimPrefix(p.Name, "golang:build:")] = strings.Contains(p.Value, "CGO_ENABLED=0") && strings.Contains(p.Value, "-trimpath=true")
			}
			components := map[string]cdx.Component{}
			for _, c := range *bom.Components {
				components[c.Name+"@"+c.Version] = c
			}
			cmd := strings.TrimPrefix(name, "event-forwarding-")
			for _, platform := range []string{"linux/amd64", "linux/arm64"} {
				if !platforms[platform] {
					t.Errorf("no static, -trimpath build settings for %s: %v", platform, *image.Properties)
				}
				for _, m := range linkedModules(t, cmd, platform) {
					c, ok := components[m]
					switch {
					case !ok:
						t.Errorf("%s links %s, which the bill does not list", platform, m)
					case c.Type == cdx.ComponentTypeLibrary && (c.Hashes == nil || len((*c.Hashes)[0].Value) != 64):
						t.Errorf("%s has no SHA-256 of its go.sum hash", m)
					}
				}
			}
		})
	}
}

// readSBOM decodes a CycloneDX JSON file.
func readSBOM(t *testing.T, path string) *cdx.BOM {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var bom cdx.BOM
	if err := cdx.NewBOMDecoder(f, cdx.BOMFileFormatJSON).Decode(&bom); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return &bom
}

// linkedModules are the modules (path@version, replacements applied)
// whose packages ./cmd/<cmd> links on platform, as go list resolves them
// for a static build; the main module's version is left out, as the
// build stamps it from git.
func linkedModules(t *testing.T, cmd, platform string) []string {
	t.Helper()
	goos, goarch, _ := strings.Cut(platform, "/")
	list := exec.Command("go", "list", "-deps", "-f", "{{with .Module}}{{if .Replace}}{{.Replace.Path}}@{{.Replace.Version}}{{else if not .Main}}{{.Path}}@{{.Version}}{{end}}{{end}}", "./cmd/"+cmd)
	list.Dir = repoRoot
	list.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+goos, "GOARCH="+goarch)
	b, err := list.Output()
	if err != nil {
		t.Fatalf("go list ./cmd/%s for %s: %v", cmd, platform, err)
	}
	seen := map[string]bool{}
	var out []string
	for _, m := range strings.Fields(string(b)) {
		if !seen[m] {
			seen[m] = true
			out = append(out, m)
		}
	}
	if len(out) == 0 {
		t.Fatalf("go list names no module ./cmd/%s links", cmd)
	}
	return out
}
