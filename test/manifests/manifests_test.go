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
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestLoad(t *testing.T) {
	tests := []struct {
		name    string
		files   map[string]string
		dirs    []string
		want    []string // Document.String()
		wantErr string
	}{{
		name: "folders in the order given, files in lexical order, no recursion",
		files: map[string]string{
			"config/async/a.yaml":    "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: async\n",
			"config/z.yml":           "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: z\n",
			"config/b.yaml":          "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: b\n",
			"config/notes.txt":       "not yaml",
			"config/other/x.yaml":    "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: other\n",
			"config/other/rules.yml": "groups: []\n",
		},
		dirs: []string{"config", "config/async"},
		want: []string{"config/b.yaml#0 ConfigMap b", "config/z.yml#0 ConfigMap z", "config/async/a.yaml#0 ConfigMap async"},
	}, {
		name: "several documents, comments-only ones left out",
		files: map[string]string{
			"config/m.yaml": "# header\n---\napiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: one\n---\n# nothing\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: two\n",
		},
		dirs: []string{"config"},
		want: []string{"config/m.yaml#1 ServiceAccount one", "config/m.yaml#3 ConfigMap two"},
	}, {
		name:    "not a Kubernetes object",
		files:   map[string]string{"config/rules.yaml": "groups: []\n"},
		dirs:    []string{"config"},
		wantErr: "not a Kubernetes object",
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			for name, content := range tc.files {
				path := filepath.Join(root, name)
				if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			docs, err := Load(root, tc.dirs...)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error = %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, d := range docs {
				got = append(got, d.String())
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("documents (-want +got):\n%s", diff)
			}
		})
	}
}

// checkedElsewhere are folders under config/ that operators do not apply
// with the proxy (files for Prometheus and Grafana; the adapter's patches,
// which test/manifests checks against Eventing's Deployment in
// TestAdapterIsUpstreamsButTheImage and the release's checks), each with
// the test package that checks them.
var checkedElsewhere = map[string]string{
	"config/monitoring": "test/monitoring",
	"config/patches":    "test/manifests",
}

// TestEveryConfigFolderIsChecked makes a new folder under config/ choose:
// an apply set checked here, or its own tests.
func TestEveryConfigFolderIsChecked(t *testing.T) {
	checked := map[string]bool{}
	for _, d := range applySets {
		checked[d] = true
	}
	err := filepath.WalkDir(filepath.Join(repoRoot, "config"), func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(repoRoot, path)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if checked[rel] {
			return nil
		}
		if pkg, ok := checkedElsewhere[rel]; ok {
			if _, err := os.Stat(filepath.Join(repoRoot, pkg)); err != nil {
				t.Errorf("%s: its tests %s are missing", rel, pkg)
			}
			return filepath.SkipDir
		}
		files, _ := filepath.Glob(filepath.Join(path, "*.y*ml"))
		if len(files) > 0 {
			t.Errorf("%s holds YAML that no test checks: add it to applySets or checkedElsewhere", rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
