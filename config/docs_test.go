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

package config

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// The settings docs/configuration.md documents are the ones the code
// reads, both ways: a setting added without its row, or a row left for a
// setting gone, fails here.

// platformVariables are read by the proxy but set by Kubernetes, not by
// an operator: the page names them, outside the table.
var platformVariables = []string{"KUBERNETES_SERVICE_HOST"}

func TestConfigurationDocumentsEveryVariable(t *testing.T) {
	doc := configurationPage(t)
	var read []string
	lookup := func(name string) (string, bool) {
		if !slices.Contains(read, name) {
			read = append(read, name)
		}
		return "", false
	}
	if _, err := ProxyFromEnv(lookup, 0); err != nil {
		t.Fatal(err)
	}
	rows := tableKeys(t, doc, "| variable | default | meaning |")
	for _, name := range read {
		switch {
		case slices.Contains(platformVariables, name):
			if !strings.Contains(doc, "`"+name+"`") {
				t.Errorf("docs/configuration.md does not name %s, which the proxy reads", name)
			}
		case !slices.Contains(rows, name):
			t.Errorf("docs/configuration.md's table of the proxy's environment has no row for %s, which the proxy reads", name)
		}
	}
	for _, name := range rows {
		if !slices.Contains(read, name) {
			t.Errorf("docs/configuration.md documents %s, which the proxy does not read", name)
		}
	}
	t.Logf("%d variables read, %d rows", len(read), len(rows))
}

func TestConfigurationDocumentsEveryForwardingKey(t *testing.T) {
	rows := tableKeys(t, configurationPage(t), "| key | default | accepted values | what it does |")
	keys := forwardingKeys(t)
	for _, k := range keys {
		if !slices.Contains(rows, k) {
			t.Errorf("docs/configuration.md's table of %s has no row for %s, which the sources read", ForwardingConfigName, k)
		}
	}
	for _, k := range rows {
		if !slices.Contains(keys, k) {
			t.Errorf("docs/configuration.md documents the key %s of %s, which no source reads", k, ForwardingConfigName)
		}
	}
	t.Logf("%d keys, %d rows", len(keys), len(rows))
}

func configurationPage(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

var firstCell = regexp.MustCompile("^\\| `([^`]+)` \\|")

// tableKeys returns the names in the first column of the table whose
// header is header.
func tableKeys(t *testing.T, doc, header string) []string {
	t.Helper()
	_, table, ok := strings.Cut(doc, header+"\n")
	if !ok {
		t.Fatalf("docs/configuration.md has no table %q", header)
	}
	var keys []string
	for line := range strings.Lines(table) {
		if !strings.HasPrefix(line, "|") {
			break
		}
		if m := firstCell.FindStringSubmatch(line); m != nil {
			keys = append(keys, m[1])
		}
	}
	if len(keys) == 0 {
		t.Fatalf("docs/configuration.md's table %q has no rows", header)
	}
	return keys
}

// forwardingKeys returns the values of forwarding.go's constants named
// Forwarding…Key: the keys of config-event-forwarding the sources read.
func forwardingKeys(t *testing.T) []string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), "forwarding.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	ast.Inspect(f, func(n ast.Node) bool {
		spec, ok := n.(*ast.ValueSpec)
		if !ok {
			return true
		}
		for i, name := range spec.Names {
			if !strings.HasPrefix(name.Name, "Forwarding") || !strings.HasSuffix(name.Name, "Key") || i >= len(spec.Values) {
				continue
			}
			if lit, ok := spec.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
				v, _ := strconv.Unquote(lit.Value)
				keys = append(keys, v)
			}
		}
		return true
	})
	if len(keys) == 0 {
		t.Fatal("forwarding.go declares no Forwarding…Key constant")
	}
	return keys
}
