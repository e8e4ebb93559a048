//go:build cluster

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

package e2e

import (
	"context"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// repoRoot is the repository root, seen from this package's directory.
const repoRoot = "../../.."

const upgradeSourceManifest = `
apiVersion: sources.knative.dev/v1
kind: PingSource
metadata: {name: upgrade, namespace: "{{NAMESPACE}}"}
spec:
  schedule: "*/2 * * * * *"
  data: '{"upgrade":true}'
  sink:
    ref: {apiVersion: serving.knative.dev/v1, kind: Service, name: e2esink}
    uri: /upgrade
`

// TestUpgradeRollbackUninstall runs docs/install.md's own blocks for an
// Eventing upgrade, the way back to upstream's adapter and the uninstall
// (test/cluster/docblock.sh), checking after each step what the page says
// happens and that the PingSource keeps firing, and that none of its
// ticks fires twice (each step's ticks are logged); then runs the install
// block on a cluster without what the async profile needs, which its
// preflight refuses, installs the async-kpa profile there, and installs
// the async profile again once they are back.
func TestUpgradeRollbackUninstall(t *testing.T) {
	upgradeStage.begin(t) // before t.Parallel: see stages_test.go
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	ns := newNamespace(ctx, t, "upgrade")
	s := newSink(ctx, t, ns)
	apply(ctx, t, ns, upgradeSourceManifest)
	waitReady(ctx, t, pingSourceGVR, ns, "upgrade", 2*time.Minute)
	t.Cleanup(func() {
		// Whatever happened, leave the project installed for the next run.
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		if err := runProjectInstall(ctx); err != nil {
			t.Errorf("reinstall: %v", err)
		}
	})
	firing := func(t *testing.T, step string) {
		t.Helper()
		from := len(s.records(ctx, t))
		eventually(t, 3*time.Minute, time.Second, func() string { return step + ": the PingSource stopped firing" }, func() bool {
			return len(s.records(ctx, t)) >= from+2
		})
	}
	firing(t, "installed")
	steps := newStepLog()
	start := time.Now()
	steps.mark("installed")

	t.Run("Eventing upgrade", func(t *testing.T) {
		// The next release's YAML names another adapter image (the same
		// binary, tagged by test/cluster/eventing.sh): kubectl apply puts
		// it in place of the project's, and leaves the replicas to the HPA.
		next := strings.ReplaceAll(upstreamEventing(t, "deployments/pingsource-mt-adapter.yaml", "configmaps/leader-election.yaml"),
			upstreamAdapterImage+eventingVersion(t), upstreamAdapterImage+eventingVersion(t)+"-next")
		steps.mark("Eventing upgrade")
		kubectlApply(t, next)
		waitAdapter(ctx, t, upstreamAdapterImage+eventingVersion(t)+"-next", adapterAccount, 2)
		firing(t, "after the upgrade, upstream's adapter")
		// What the page says to do next: its install block again.
		steps.mark("install again")
		docBlock(t, "install")
		waitAdapter(ctx, t, projectAdapterImage, adapterAccount, 2)
		cm, err := cluster.kube.CoreV1().ConfigMaps(systemNamespace).Get(ctx, forwardingCM, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if cm.Data["event-forwarding-proxy"] != "http://"+proxyHost {
			t.Errorf("forwarding setting after installing again: %q", cm.Data["event-forwarding-proxy"])
		}
		firing(t, "after installing again")
	})

	t.Run("the way back", func(t *testing.T) {
		core := filepath.Join(t.TempDir(), "eventing-core.yaml")
		if err := os.WriteFile(core, []byte(upstreamEventing(t, "deployments/pingsource-mt-adapter.yaml")), 0o644); err != nil {
			t.Fatal(err)
		}
		steps.mark("way back")
		docBlock(t, "rollback", "EVENTING_CORE="+core)
		// The HPA gone first, the Deployment keeps the replicas it had.
		waitAdapter(ctx, t, upstreamAdapterImage+eventingVersion(t), adapterAccount, 2)
		if _, err := cluster.kube.AutoscalingV2().HorizontalPodAutoscalers(systemNamespace).Get(ctx, adapterHPAName, metav1.GetOptions{}); err == nil {
			t.Error("the adapter's HPA is still there after the way back")
		}
		checkLeaderElectionUntouched(ctx, t)
		firing(t, "upstream's adapter")
	})

	t.Run("uninstall", func(t *testing.T) {
		steps.mark("uninstall")
		docBlock(t, "uninstall")
		eventually(t, 2*time.Minute, 2*time.Second, func() string { return "the proxy Service is still there" }, func() bool {
			_, err := cluster.dynamic.Resource(ksvcGVR).Namespace(systemNamespace).Get(ctx, proxyService, metav1.GetOptions{})
			return err != nil
		})
		// What another step needs stays: the cluster's Prometheus Adapter
		// mounts the rules' ConfigMap as its configuration
		// (test/cluster/project.sh). The Leases the adapter made go.
		left, err := kubectl("get", "serviceaccount,configmap,role,rolebinding,clusterrole,clusterrolebinding,hpa,poddisruptionbudget,lease", "-A",
			"-l", "app.kubernetes.io/name=event-forwarding-proxy", "-o", "name")
		if want := "configmap/event-forwarding-prometheus-adapter"; err != nil || strings.TrimSpace(string(left)) != want {
			t.Errorf("left after the uninstall (%v): %q, want only %s, which Prometheus Adapter mounts", err, left, want)
		}
		waitAdapter(ctx, t, upstreamAdapterImage, adapterAccount, 2)
		firing(t, "after the uninstall")
	})

	// The cleanup's install after it is the one with the fix applied.
	t.Run("the preflight refuses what the async profile lacks; async-kpa installs", func(t *testing.T) { checkPreflightRefuses(ctx, t) })

	checkStepTicks(ctx, t, s, upgradeTicks, steps, start)
}

// upgradeTicks are the upgrade source's ticks (its schedule's */2), as
// checkStepTicks counts them. Each step waits for two of them.
var upgradeTicks = tickedSources{name: "/pingsources/upgrade", sources: 1, every: 2 * time.Second}

// checkLeaderElectionUntouched checks that Eventing's
// config-leader-election is as Eventing ships it (its example only): the
// adapter's buckets are its own ConfigMap's, and every Eventing binary
// keeps Knative's defaults.
func checkLeaderElectionUntouched(ctx context.Context, t testing.TB) {
	t.Helper()
	cm, err := cluster.kube.CoreV1().ConfigMaps(systemNamespace).Get(ctx, "config-leader-election", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if keys := slices.Sorted(maps.Keys(cm.Data)); !slices.Equal(keys, []string{"_example"}) {
		t.Errorf("config-leader-election sets %v, want Eventing's _example only", keys)
	}
}

// docBlock runs the block of docs/install.md marked name, with env added.
func docBlock(t testing.TB, name string, env ...string) {
	t.Helper()
	cmd := exec.Command(filepath.Join(repoRoot, "test/cluster/docblock.sh"), name)
	cmd.Env = append(os.Environ(), env...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("docs/install.md, block %s: %v\n%s", name, err, out)
	}
}

// upstreamEventing returns files of Eventing's release YAML (from the
// eventing module this project builds against), images resolved to the
// dev.local images the cluster runs, as one stream.
func upstreamEventing(t testing.TB, files ...string) string {
	t.Helper()
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "knative.dev/eventing").Output()
	if err != nil {
		t.Fatalf("the eventing module: %v", err)
	}
	dir := filepath.Join(strings.TrimSpace(string(out)), "config", "core")
	var b strings.Builder
	for _, f := range files {
		y, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		b.WriteString("---\n")
		b.Write(y)
	}
	return strings.ReplaceAll(b.String(), "ko://knative.dev/eventing/cmd/mtping", upstreamAdapterImage+eventingVersion(t))
}

// eventingVersion is the version of the Eventing images the cluster runs.
func eventingVersion(t testing.TB) string {
	t.Helper()
	return builtVersion(t, "eventing")
}

// builtVersion is the module version cluster.mk built the images of name
// from (.cache/cluster/bin/NAME.version).
func builtVersion(t testing.TB, name string) string {
	t.Helper()
	version, err := os.ReadFile(filepath.Join(repoRoot, ".cache/cluster/bin", name+".version"))
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(version))
}

// kubectl runs the cluster's kubectl, as an operator would.
func kubectl(args ...string) ([]byte, error) {
	cmd := exec.Command(filepath.Join(repoRoot, ".cache/cluster/bin/kubectl"), append([]string{"--kubeconfig", filepath.Join(repoRoot, ".cache/cluster/kubeconfig")}, args...)...)
	return cmd.CombinedOutput()
}

func kubectlApply(t testing.TB, manifest string) {
	t.Helper()
	cmd := exec.Command(filepath.Join(repoRoot, ".cache/cluster/bin/kubectl"), "--kubeconfig", filepath.Join(repoRoot, ".cache/cluster/kubeconfig"), "apply", "-f", "-")
	cmd.Stdin = strings.NewReader(manifest)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("kubectl apply: %v\n%s", err, out)
	}
}

// waitAdapter waits until the adapter's Deployment runs image (a prefix)
// as account with replicas ready replicas (0: as many as it asks for,
// which its HPA sets).
func waitAdapter(ctx context.Context, t testing.TB, image, account string, replicas int32) {
	t.Helper()
	var last string
	eventually(t, 3*time.Minute, time.Second, func() string { return "adapter: " + last }, func() bool {
		d, err := cluster.kube.AppsV1().Deployments(systemNamespace).Get(ctx, adapterName, metav1.GetOptions{})
		if err != nil {
			last = err.Error()
			return false
		}
		c := d.Spec.Template.Spec.Containers[0]
		last = fmt.Sprintf("image %s, account %s, %d/%d ready, updated %d, available %d, %d pods, generation %d (observed %d)",
			c.Image, d.Spec.Template.Spec.ServiceAccountName, d.Status.ReadyReplicas, *d.Spec.Replicas, d.Status.UpdatedReplicas,
			d.Status.AvailableReplicas, d.Status.Replicas, d.Generation, d.Status.ObservedGeneration)
		want := replicas
		if want == 0 {
			want = max(*d.Spec.Replicas, 1)
		}
		return strings.HasPrefix(c.Image, image) && d.Spec.Template.Spec.ServiceAccountName == account &&
			*d.Spec.Replicas == want && d.Status.ReadyReplicas == want && d.Status.UpdatedReplicas == want &&
			d.Status.Replicas == want && d.Status.AvailableReplicas == want
	})
}
