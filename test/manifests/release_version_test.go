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
)

// TestReleaseRefusesAnUndescribedVersion checks that a named release
// needs its CHANGELOG.md section and a vX.Y.Z name: hack/release.sh stops
// before it builds anything.
func TestReleaseRefusesAnUndescribedVersion(t *testing.T) {
	for _, tc := range []struct{ version, want string }{
		{"v9.9.9", "CHANGELOG.md has no section ## v9.9.9"},
		{"9.9", "VERSION=9.9 is not vX.Y.Z"},
		{"v1.2.3-rc.1; touch /tmp/x", "is not vX.Y.Z"},
	} {
		t.Run(tc.version, func(t *testing.T) {
			cmd := exec.CommandContext(t.Context(), filepath.Join(repoRoot, "hack/release.sh"))
			cmd.Env = append(os.Environ(), "RELEASE_VERSION="+tc.version, "IMGTAR=/nonexistent",
				"RELEASE_DIR="+t.TempDir())
			out, err := cmd.CombinedOutput()
			if err == nil || !strings.Contains(string(out), tc.want) {
				t.Errorf("release.sh with VERSION=%s: %v, %q; want a failure saying %q", tc.version, err, out, tc.want)
			}
		})
	}
}
