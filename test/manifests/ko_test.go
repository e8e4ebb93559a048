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
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// koConfig is the part of .ko.yaml the project uses.
type koConfig struct {
	DefaultBaseImage string    `json:"defaultBaseImage"`
	DefaultPlatforms []string  `json:"defaultPlatforms"`
	Builds           []koBuild `json:"builds"`
}

type koBuild struct {
	ID      string   `json:"id"`
	Main    string   `json:"main"`
	Env     []string `json:"env"`
	Flags   []string `json:"flags"`
	Ldflags []string `json:"ldflags"`
}

const module = "knative.dev/event-forwarding-proxy"

var koImage = regexp.MustCompile(`ko://[^\s"']+`)

// TestKoBuildsEveryImage checks that ko builds each ko:// image of config/
// and of the adapter's patch as a static, reproducible binary.
func TestKoBuildsEveryImage(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(repoRoot, ".ko.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var ko koConfig
	if err := yaml.UnmarshalStrict(b, &ko); err != nil {
		t.Fatalf(".ko.yaml: %v", err)
	}
	if !strings.Contains(ko.DefaultBaseImage, "static") {
		t.Errorf("defaultBaseImage = %q, want a static (distroless) image", ko.DefaultBaseImage)
	}

	images := map[string]bool{}
	for _, d := range loadConfig(t) {
		for _, img := range koImage.FindAllString(string(d.YAML), -1) {
			images[img] = true
		}
	}
	// The adapter's image goes in with a patch (ko resolve, docs/install.md).
	patches, err := filepath.Glob(filepath.Join(repoRoot, "config/patches/*.yaml"))
	if err != nil || len(patches) == 0 {
		t.Fatalf("config/patches: %v %v", patches, err)
	}
	for _, f := range patches {
		patch, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, img := range koImage.FindAllString(string(patch), -1) {
			images[img] = true
		}
	}
	if len(images) < 2 {
		t.Fatalf("ko:// images %v, want the proxy's and the adapter's", images)
	}
	for img := range images {
		t.Run(img, func(t *testing.T) {
			pkg, ok := strings.CutPrefix(strings.TrimPrefix(img, "ko://"), module+"/")
			if !ok {
				t.Fatalf("not a package of %s", module)
			}
			if _, err := os.Stat(filepath.Join(repoRoot, pkg, "main.go")); err != nil {
				t.Errorf("no main package: %v", err)
			}
			i := slices.IndexFunc(ko.Builds, func(b koBuild) bool { return filepath.Clean(b.Main) == filepath.Clean(pkg) })
			if i < 0 {
				t.Fatalf("no build in .ko.yaml with main ./%s", pkg)
			}
			build := ko.Builds[i]
			if !slices.Contains(build.Env, "CGO_ENABLED=0") {
				t.Errorf("env = %v, want CGO_ENABLED=0", build.Env)
			}
			if !slices.Contains(build.Flags, "-trimpath") {
				t.Errorf("flags = %v, want -trimpath", build.Flags)
			}
		})
	}
}
