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
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// What the async profile needs that a stock cluster may lack: Serving's
// HPA autoscaler, and Prometheus Adapter behind the custom metrics API.
var preflightParts = []struct{ namespace, deployment string }{
	{"knative-serving", "autoscaler-hpa"},
	{"monitoring", "prometheus-adapter"},
}

// checkPreflightRefuses runs docs/install.md's install block on a cluster
// without Serving's HPA autoscaler and Prometheus Adapter (both scaled to
// zero): its preflight stops it, naming the fix for each, before it
// changes anything. The async-kpa profile's block, which needs neither,
// then installs the proxy scaled by Knative's KPA. It then puts both back
// and waits until they serve, so that the install after it (the fix
// applied) completes, over the async-kpa profile.
func checkPreflightRefuses(ctx context.Context, t *testing.T) {
	t.Helper()
	replicas := map[string]int32{}
	for _, p := range preflightParts {
		d, err := cluster.kube.AppsV1().Deployments(p.namespace).Get(ctx, p.deployment, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		replicas[p.deployment] = *d.Spec.Replicas
		setReplicas(ctx, t, p.namespace, p.deployment, 0)
	}
	defer func() {
		for _, p := range preflightParts {
			setReplicas(ctx, t, p.namespace, p.deployment, replicas[p.deployment])
		}
		eventually(t, 2*time.Minute, time.Second, func() string { return "the custom metrics API not Available again" }, func() bool {
			return customMetricsAvailable(ctx, t) == "True"
		})
	}()
	eventually(t, time.Minute, time.Second, func() string { return "the custom metrics API still Available" }, func() bool {
		return customMetricsAvailable(ctx, t) == "False"
	})

	before := installState(ctx, t)
	out, err := docBlockOutput("install")
	if err == nil {
		t.Fatalf("the install block went through without Serving's HPA autoscaler and Prometheus Adapter:\n%s", out)
	}
	for _, want := range []string{
		"MISSING  Serving's HPA autoscaler (knative-serving/autoscaler-hpa, no ready replica)",
		"serving-hpa.yaml",
		"MISSING  the custom metrics API (v1beta1.custom.metrics.k8s.io, Available False)",
		"preflight: 2 missing; nothing was changed",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the refused install block does not say %q:\n%s", want, out)
		}
	}
	if after := installState(ctx, t); !maps.Equal(before, after) {
		t.Errorf("the refused install block changed the cluster: %v, then %v", before, after)
	}

	docBlock(t, "install-async-kpa")
	checkAsyncKPAInstall(ctx, t, installed)
}

// checkAsyncKPAInstall checks the async-kpa profile of proxy p is what
// scales it: its revision's PodAutoscaler is the KPA's and Ready, and no
// HPA exists in its namespace, neither the proxy's nor the adapter's.
func checkAsyncKPAInstall(ctx context.Context, t *testing.T, p proxyInstance) {
	t.Helper()
	rev := p.revision(ctx, t)
	pa := waitReady(ctx, t, paGVR, p.namespace, rev, 2*time.Minute)
	if class := pa.GetAnnotations()["autoscaling.knative.dev/class"]; class != "kpa.autoscaling.knative.dev" {
		t.Errorf("the PodAutoscaler of %s has class %q, want the KPA's", rev, class)
	}
	hpas, err := cluster.kube.AutoscalingV2().HorizontalPodAutoscalers(p.namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range hpas.Items {
		t.Errorf("HPA %s/%s in the async-kpa profile", h.Namespace, h.Name)
	}
	t.Logf("%s: the KPA scales %s, %d ready pods", p.namespace, rev, p.countReady(ctx, t))
}

// setReplicas scales deployment of namespace to n and waits until its
// status says so (scaleDeployment).
func setReplicas(ctx context.Context, t *testing.T, namespace, deployment string, n int32) {
	t.Helper()
	if err := scaleDeployment(ctx, namespace, deployment, n); err != nil {
		t.Fatal(err)
	}
}

// customMetricsAvailable is the Available condition of Prometheus
// Adapter's APIService.
func customMetricsAvailable(ctx context.Context, t *testing.T) string {
	t.Helper()
	out, err := kubectl("get", "apiservice", "v1beta1.custom.metrics.k8s.io", "-o", `jsonpath={.status.conditions[?(@.type=="Available")].status}`)
	if err != nil {
		t.Fatalf("the custom metrics APIService: %v: %s", err, out)
	}
	return strings.TrimSpace(string(out))
}

// installState is what the install block would change, by object: the
// project's labelled objects, and the adapter's Deployment.
func installState(ctx context.Context, t *testing.T) map[string]string {
	t.Helper()
	out, err := kubectl("get", "serviceaccount,configmap,role,rolebinding,clusterrolebinding,hpa,poddisruptionbudget,ksvc", "-A",
		"-l", "app.kubernetes.io/name=event-forwarding-proxy", "-o", "jsonpath={range .items[*]}{.kind}/{.metadata.namespace}/{.metadata.name}={.metadata.resourceVersion}{\"\\n\"}{end}")
	if err != nil {
		t.Fatalf("the project's objects: %v: %s", err, out)
	}
	state := map[string]string{}
	for line := range strings.Lines(string(out)) {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), "="); ok {
			state[k] = v
		}
	}
	d, err := cluster.kube.AppsV1().Deployments(systemNamespace).Get(ctx, adapterName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	state["Deployment/"+adapterName] = fmt.Sprintf("generation %d, image %s", d.Generation, d.Spec.Template.Spec.Containers[0].Image)
	return state
}

// docBlockOutput runs the block of docs/install.md marked name, with env
// added, and returns what it wrote, and its error.
func docBlockOutput(name string, env ...string) (string, error) {
	cmd := exec.Command(filepath.Join(repoRoot, "test/cluster/docblock.sh"), name)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// checkPreflightRefusesKubectl runs release/preflight.sh for Eventing
// applied with kubectl on Eventing the Knative Operator manages: it
// refuses, naming the Operator's block, which the preflight for the
// Operator passes.
func checkPreflightRefusesKubectl(t *testing.T) {
	t.Helper()
	out, err := releasePreflight("async", "kubectl")
	if err == nil {
		t.Fatalf("the preflight for Eventing applied with kubectl passed on Eventing the Operator manages:\n%s", out)
	}
	for _, want := range []string{"the Knative Operator manages it (knativeeventing.operator.knative.dev/knative-eventing)",
		"fix: sh release/preflight.sh async operator"} {
		if !strings.Contains(out, want) {
			t.Errorf("the refusing preflight does not say %q:\n%s", want, out)
		}
	}
	if out, err := releasePreflight("async", "operator"); err != nil {
		t.Errorf("the preflight for the Operator: %v\n%s", err, out)
	}
}

// releasePreflight runs release/preflight.sh with args as an operator
// would, with the cluster's kubectl and kubeconfig.
func releasePreflight(args ...string) (string, error) {
	cmd := exec.Command("sh", append([]string{filepath.Join(repoRoot, "release/preflight.sh")}, args...)...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+filepath.Join(repoRoot, ".cache/cluster/kubeconfig"),
		"PATH="+filepath.Join(repoRoot, ".cache/cluster/bin")+string(os.PathListSeparator)+os.Getenv("PATH"))
	out, err := cmd.CombinedOutput()
	return string(out), err
}
