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
	"strings"
	"testing"
)

// TestInstallNamesTheVersionsTested keeps docs/install.md's table of the
// versions the tests run on true: each is the version the cluster's
// nested module pins, as the table writes it.
func TestInstallNamesTheVersionsTested(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join(repoRoot, "docs/install.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, table, ok := strings.Cut(string(doc), "| part | version |\n|---|---|\n")
	if !ok {
		t.Fatal("docs/install.md has no table of the versions tested (| part | version |)")
	}
	table, _, _ = strings.Cut(table, "\n\n")
	for _, m := range []struct {
		gomod, module string
		row           string // the start of the table's row
		trimV         bool   // written without the leading v
	}{
		{"test/tools/go.mod", "k8s.io/kubernetes", "| Kubernetes", true},
		{"test/cluster/serving/go.mod", "knative.dev/serving", "| Knative Serving", false},
		{"test/cluster/eventing/go.mod", "knative.dev/eventing", "| Knative Eventing", false},
		{"test/cluster/eventing-prev/go.mod", "knative.dev/eventing", "| Knative Eventing", false},
		{"test/cluster/operator/go.mod", "knative.dev/operator", "| Knative Operator", false},
		{"test/cluster/traefik/go.mod", "github.com/traefik/traefik/v3", "| Ingress", true},
		{"test/cluster/prometheus-adapter/go.mod", "sigs.k8s.io/prometheus-adapter", "| Prometheus", true},
	} {
		b, err := os.ReadFile(filepath.Join(repoRoot, m.gomod))
		if err != nil {
			t.Fatal(err)
		}
		v := regexp.MustCompile(`(?m)^\s*` + regexp.QuoteMeta(m.module) + ` (v[0-9][^\s]*)`).FindSubmatch(b)
		if v == nil {
			t.Errorf("%s requires no %s", m.gomod, m.module)
			continue
		}
		want := string(v[1])
		if m.trimV {
			want = strings.TrimPrefix(want, "v")
		}
		var row string
		for line := range strings.Lines(table) {
			if strings.HasPrefix(line, m.row) {
				row = line
			}
		}
		if !strings.Contains(row, want) {
			t.Errorf("docs/install.md's row %q does not name %s %s (%s): %q", m.row, m.module, want, m.gomod, row)
		}
	}
}
