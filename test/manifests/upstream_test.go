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
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"sigs.k8s.io/yaml"
)

// adapterPatchFile is the one change the install makes to Eventing's
// adapter Deployment (kubectl patch --patch-file, strategic merge).
const adapterPatchFile = "config/patches/pingsource-mt-adapter.yaml"

// eventingDir is the eventing module the project builds against.
var eventingDir = sync.OnceValues(func() (string, error) {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "knative.dev/eventing").Output()
	return strings.TrimSpace(string(out)), err
})

// eventingFile reads a file of Eventing's config/core, the source of its
// release YAML.
func eventingFile(t testing.TB, rel string) []byte {
	t.Helper()
	dir, err := eventingDir()
	if err != nil {
		t.Fatalf("the eventing module: %v", err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "config", "core", rel))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// adapterDeployment returns Eventing's pingsource-mt-adapter Deployment as
// it ships, and as the install's patch leaves it.
func adapterDeployment(t testing.TB) (upstream, patched *appsv1.Deployment) {
	t.Helper()
	orig, err := yaml.YAMLToJSON(eventingFile(t, "deployments/pingsource-mt-adapter.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(repoRoot, adapterPatchFile))
	if err != nil {
		t.Fatal(err)
	}
	patch, err := yaml.YAMLToJSON(b)
	if err != nil {
		t.Fatal(err)
	}
	merged, err := strategicpatch.StrategicMergePatch(orig, patch, appsv1.Deployment{})
	if err != nil {
		t.Fatalf("%s does not apply to Eventing's Deployment: %v", adapterPatchFile, err)
	}
	upstream, patched = &appsv1.Deployment{}, &appsv1.Deployment{}
	if err := yaml.UnmarshalStrict(orig, upstream); err != nil {
		t.Fatal(err)
	}
	if err := yaml.UnmarshalStrict(merged, patched); err != nil {
		t.Fatal(err)
	}
	return upstream, patched
}

// TestAdapterIsUpstreamsButTheImage checks the install changes nothing of
// Eventing's adapter Deployment but the dispatcher's image: labels,
// service account, env, ports, probes and replicas stay upstream's, so
// neither upstream's controller nor the Knative Operator has anything to
// put back but the image.
func TestAdapterIsUpstreamsButTheImage(t *testing.T) {
	upstream, patched := adapterDeployment(t)
	if n := len(patched.Spec.Template.Spec.Containers); n != 1 {
		t.Fatalf("%d containers after the patch, want upstream's one", n)
	}
	c := patched.Spec.Template.Spec.Containers[0]
	if c.Name != "dispatcher" || c.Image != "ko://"+module+"/cmd/mtping" {
		t.Errorf("container %s runs %s, want dispatcher with this project's adapter", c.Name, c.Image)
	}
	patched.Spec.Template.Spec.Containers[0].Image = upstream.Spec.Template.Spec.Containers[0].Image
	if diff := cmp.Diff(upstream, patched); diff != "" {
		t.Errorf("the patch changes more than the image (-upstream +patched):\n%s", diff)
	}
}
