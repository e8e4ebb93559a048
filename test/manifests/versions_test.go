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
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
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

// TestPreflightKnowsTheVersionsTested keeps the Knative minors
// config/preflight.sh accepts those of the Eventing modules the cluster
// tests: v0.X.Y of knative.dev/eventing is Knative 1.(X-27).Y.
func TestPreflightKnowsTheVersionsTested(t *testing.T) {
	var want []string
	for _, gomod := range []string{"test/cluster/eventing-prev/go.mod", "test/cluster/eventing/go.mod"} {
		b, err := os.ReadFile(filepath.Join(repoRoot, gomod))
		if err != nil {
			t.Fatal(err)
		}
		m := regexp.MustCompile(`(?m)^\s*knative\.dev/eventing v0\.([0-9]+)\.`).FindSubmatch(b)
		if m == nil {
			t.Fatalf("%s requires no knative.dev/eventing v0.X.Y", gomod)
		}
		minor, err := strconv.Atoi(string(m[1]))
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, fmt.Sprintf("1.%d", minor-27))
	}
	script, err := os.ReadFile(filepath.Join(repoRoot, "config/preflight.sh"))
	if err != nil {
		t.Fatal(err)
	}
	line := fmt.Sprintf("tested_minors=%q\n", strings.Join(want, " "))
	if !strings.Contains(string(script), line) {
		t.Errorf("config/preflight.sh has no line %q: the Eventing modules the cluster tests are %v", strings.TrimSpace(line), want)
	}
}
