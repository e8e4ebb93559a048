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

package monitoring

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestPromtool runs promtool on the rules file: its own checks, then the
// unit tests of testdata/rules_test.yaml, which make each alert fire on
// synthetic series and keep it silent otherwise.
func TestPromtool(t *testing.T) {
	promtool := requireTool(t, "promtool")
	tests := []struct {
		name string
		dir  string
		args []string
	}{
		{name: "check rules", dir: repoRoot, args: []string{"check", "rules", filepath.FromSlash(rulesFile)}},
		{name: "test rules", dir: "testdata", args: []string{"test", "rules", "rules_test.yaml"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command(promtool, tc.args...)
			cmd.Dir = tc.dir
			out, err := cmd.CombinedOutput()
			if err != nil || !strings.Contains(string(out), "SUCCESS") {
				t.Fatalf("promtool %s: %v\n%s", strings.Join(tc.args, " "), err, out)
			}
		})
	}
}
