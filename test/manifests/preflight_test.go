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

package manifests

import (
	"bytes"
	"context"
	"errors"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/yaml"

	"knative.dev/event-forwarding-proxy/test/apiserver"
	"knative.dev/event-forwarding-proxy/test/testproc"
)

var (
	apiServiceGVR      = schema.GroupVersionResource{Group: "apiregistration.k8s.io", Version: "v1", Resource: "apiservices"}
	crdGVR             = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	knativeEventingGVR = schema.GroupVersionResource{Group: "operator.knative.dev", Version: "v1beta1", Resource: "knativeeventings"}
)

// customMetricsAPI is Prometheus Adapter's APIService, Available without
// a Service (Local: the aggregator checks nothing), not with one that is
// not there.
const customMetricsAPI = `
apiVersion: apiregistration.k8s.io/v1
kind: APIService
metadata: {name: v1beta1.custom.metrics.k8s.io}
spec:
  group: custom.metrics.k8s.io
  version: v1beta1
  groupPriorityMinimum: 100
  versionPriority: 100
`

// knativeEventingCRD is the Knative Operator's kind, its schema left open.
const knativeEventingCRD = `
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: knativeeventings.operator.knative.dev}
spec:
  group: operator.knative.dev
  scope: Namespaced
  names: {kind: KnativeEventing, plural: knativeeventings, singular: knativeeventing, listKind: KnativeEventingList}
  versions:
    - name: v1beta1
      served: true
      storage: true
      schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}
`

// TestPreflight runs config/preflight.sh (release/preflight.sh) with the
// real kubectl against a real API server holding what a stock Knative
// install shows it, then without each part in turn: it passes on the
// whole install, refuses each missing part with the command that fixes
// it, and writes nothing.
func TestPreflight(t *testing.T) {
	s := apiserver.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	kube := kubernetes.NewForConfigOrDie(s.Config)
	dyn := dynamic.NewForConfigOrDie(s.Config)
	stock := newStockKnative(ctx, t, kube, dyn)
	admin := s.Kubeconfig

	t.Run("a stock install", func(t *testing.T) {
		for _, profile := range []string{"async", "async-kpa", "sync"} {
			out := preflight(t, s, admin, 0, profile)
			wantLines(t, out, "ok       Knative Eventing 1.23.0", "ok       Knative Serving 1.23.0",
				"ok       Eventing managed with kubectl", "ok       permission to create and patch what the install does",
				"note     Eventing's OIDC (config-features authentication-oidc): disabled", "preflight: ready to install")
		}
	})

	t.Run("without Serving's HPA autoscaler and Prometheus Adapter", func(t *testing.T) {
		stock.setHPAAutoscalerReady(ctx, t, 0)
		stock.setCustomMetricsAPI(ctx, t, false)
		defer stock.setHPAAutoscalerReady(ctx, t, 1)
		defer stock.setCustomMetricsAPI(ctx, t, true)
		before := objectVersions(ctx, t, dyn)
		out := preflight(t, s, admin, 1, "async")
		wantLines(t, out,
			"MISSING  Serving's HPA autoscaler (knative-serving/autoscaler-hpa, no ready replica): the async profile's Service has the HPA class",
			"fix: kubectl apply -f https://github.com/knative/serving/releases/download/knative-v1.23.0/serving-hpa.yaml",
			"fix: install Prometheus Adapter with release/prometheus-adapter-rule.yaml (docs/install.md, section 3), or use the async-kpa profile",
			"preflight: 2 missing; nothing was changed")
		if after := objectVersions(ctx, t, dyn); !maps.Equal(before, after) {
			t.Errorf("the preflight changed the cluster: %d objects before, %d after", len(before), len(after))
		}
		// The other profiles need neither.
		wantLines(t, preflight(t, s, admin, 0, "async-kpa"), "preflight: the async-kpa profile, Eventing managed with kubectl", "preflight: ready to install")
		wantLines(t, preflight(t, s, admin, 0, "sync"), "preflight: ready to install")
	})

	t.Run("Eventing's version", func(t *testing.T) {
		defer stock.setEventingVersion(ctx, t, "1.23.0")
		for _, c := range []struct {
			version string
			code    int
			line    string
		}{
			{"1.22.2", 0, "ok       Knative Eventing 1.22.2"},
			{"1.21.4", 1, "MISSING  Knative Eventing 1.21.4, older than 1.22"},
			{"1.24.0", 0, "note     Knative Eventing 1.24.0, newer than the 1.23 this release is tested with"},
			{"devel", 0, `note     Knative Eventing of version "devel": this release is tested with 1.22 1.23`},
		} {
			stock.setEventingVersion(ctx, t, c.version)
			wantLines(t, preflight(t, s, admin, c.code, "async"), c.line)
		}
	})

	t.Run("Eventing managed by the Knative Operator", func(t *testing.T) {
		createYAML(ctx, t, dyn, crdGVR, "", knativeEventingCRD)
		testproc.Eventually(t, time.Minute, "the KnativeEventing kind served", func() bool {
			_, err := dyn.Resource(knativeEventingGVR).Namespace("knative-eventing").List(ctx, metav1.ListOptions{})
			return err == nil
		})
		wantLines(t, preflight(t, s, admin, 1, "async", "operator"),
			"MISSING  a KnativeEventing in knative-eventing for the Knative Operator block")
		createYAML(ctx, t, dyn, knativeEventingGVR, "knative-eventing",
			"{apiVersion: operator.knative.dev/v1beta1, kind: KnativeEventing, metadata: {name: knative-eventing}}")
		defer func() {
			if err := dyn.Resource(knativeEventingGVR).Namespace("knative-eventing").Delete(ctx, "knative-eventing", metav1.DeleteOptions{}); err != nil {
				t.Error(err)
			}
		}()
		wantLines(t, preflight(t, s, admin, 1, "async"),
			"MISSING  Eventing applied with kubectl: the Knative Operator manages it (knativeeventing.operator.knative.dev/knative-eventing) and would undo the Deployment's patch",
			"fix: sh release/preflight.sh async operator, then the Operator block of docs/install.md")
		wantLines(t, preflight(t, s, admin, 0, "async", "operator"), "ok       Eventing managed with operator", "preflight: ready to install")
	})

	t.Run("someone who may read but not install", func(t *testing.T) {
		reader := impersonating(t, s, "reader")
		grantRead(ctx, t, kube, "reader")
		out := preflight(t, s, reader, 1, "async")
		wantLines(t, out, "ok       Knative Eventing 1.23.0", "MISSING  permission to create serviceaccounts in knative-eventing",
			"MISSING  permission to create clusterrolebindings", "MISSING  permission to patch deployment pingsource-mt-adapter in knative-eventing")
	})

	t.Run("someone who may not read", func(t *testing.T) {
		wantLines(t, preflight(t, s, impersonating(t, s, "stranger"), 1, "async"),
			"MISSING  permission to get namespace knative-eventing", "MISSING  permission to get deployments -n knative-eventing",
			"preflight: 7 missing; nothing was changed")
	})

	t.Run("no Eventing", func(t *testing.T) {
		t.Setenv("EVENTING_NAMESPACE", "eventing-elsewhere")
		wantLines(t, preflight(t, s, admin, 1, "async"), "MISSING  Knative Eventing's namespace eventing-elsewhere")
	})

	t.Run("no API server", func(t *testing.T) {
		cfg, err := clientcmd.LoadFromFile(admin)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range cfg.Clusters {
			c.Server = "https://127.0.0.1:1" // nothing listens on port 1
		}
		gone := filepath.Join(t.TempDir(), "kubeconfig")
		if err := clientcmd.WriteToFile(*cfg, gone); err != nil {
			t.Fatal(err)
		}
		wantLines(t, preflight(t, s, gone, 1, "async"), "fix: point kubectl at the cluster (KUBECONFIG, --context)")
	})

	t.Run("a wrong argument", func(t *testing.T) {
		wantLines(t, preflight(t, s, admin, 2, "fast"), "preflight: profile fast: want async, async-kpa or sync")
	})
}

// preflight runs config/preflight.sh with args, with s's kubectl first on
// PATH and kubeconfig, and a kubectl cache of its own; it fails t unless
// the script exits with code, and returns what it wrote.
func preflight(t *testing.T, s *apiserver.Server, kubeconfig string, code int, args ...string) string {
	t.Helper()
	cmd := exec.Command("sh", append([]string{filepath.Join(repoRoot, "config", "preflight.sh")}, args...)...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig, "HOME="+t.TempDir(),
		"PATH="+filepath.Dir(s.Kubectl)+string(os.PathListSeparator)+os.Getenv("PATH"))
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	got := 0
	if exit := (*exec.ExitError)(nil); errors.As(err, &exit) {
		got = exit.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	if got != code {
		t.Errorf("preflight %v exited %d, want %d:\n%s", args, got, code, out.String())
	}
	return out.String()
}

// wantLines fails t for each line not in out (each line trimmed).
func wantLines(t *testing.T, out string, lines ...string) {
	t.Helper()
	have := map[string]bool{}
	for l := range strings.Lines(out) {
		have[strings.TrimSpace(l)] = true
	}
	for _, l := range lines {
		if !have[l] {
			t.Errorf("no line %q in:\n%s", l, out)
		}
	}
}

// stockKnative is what a stock Knative install shows the preflight,
// without its controllers: Eventing's and Serving's Deployments (their
// releases' version labels, the HPA autoscaler's ready replicas written
// as its controller would), upstream's PingSource adapter, Eventing's
// features, and Prometheus Adapter's APIService.
type stockKnative struct {
	kube kubernetes.Interface
	dyn  dynamic.Interface
}

func newStockKnative(ctx context.Context, t *testing.T, kube kubernetes.Interface, dyn dynamic.Interface) *stockKnative {
	t.Helper()
	for _, ns := range []string{"knative-eventing", "knative-serving"} {
		if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, d := range []struct{ ns, name, version string }{
		{"knative-eventing", "eventing-controller", "1.23.0"},
		{"knative-eventing", "pingsource-mt-adapter", "1.23.0"},
		{"knative-serving", "controller", "1.23.0"},
		{"knative-serving", "autoscaler-hpa", "1.23.0"},
	} {
		labels := map[string]string{"app": d.name}
		dep := &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Name: d.name, Labels: map[string]string{"app.kubernetes.io/version": d.version}},
			Spec: appsv1.DeploymentSpec{
				Selector: &metav1.LabelSelector{MatchLabels: labels},
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: labels},
					Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: d.name, Image: "dev.local/" + d.name}}},
				},
			},
		}
		if _, err := kube.AppsV1().Deployments(d.ns).Create(ctx, dep, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "config-features"}, Data: map[string]string{"kreference-group": "disabled"}}
	if _, err := kube.CoreV1().ConfigMaps("knative-eventing").Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	k := &stockKnative{kube: kube, dyn: dyn}
	createYAML(ctx, t, dyn, apiServiceGVR, "", customMetricsAPI)
	k.setHPAAutoscalerReady(ctx, t, 1)
	k.setCustomMetricsAPI(ctx, t, true)
	return k
}

// setHPAAutoscalerReady writes n ready replicas in the status of
// Serving's HPA autoscaler.
func (k *stockKnative) setHPAAutoscalerReady(ctx context.Context, t *testing.T, n int32) {
	t.Helper()
	d, err := k.kube.AppsV1().Deployments("knative-serving").Get(ctx, "autoscaler-hpa", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	d.Status.Replicas, d.Status.ReadyReplicas, d.Status.AvailableReplicas = n, n, n
	if _, err := k.kube.AppsV1().Deployments("knative-serving").UpdateStatus(ctx, d, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// setEventingVersion labels Eventing's controller as its release of
// version does.
func (k *stockKnative) setEventingVersion(ctx context.Context, t *testing.T, version string) {
	t.Helper()
	d, err := k.kube.AppsV1().Deployments("knative-eventing").Get(ctx, "eventing-controller", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	d.Labels["app.kubernetes.io/version"] = version
	if _, err := k.kube.AppsV1().Deployments("knative-eventing").Update(ctx, d, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// setCustomMetricsAPI makes Prometheus Adapter's APIService available
// (Local) or not (its Service missing), and waits until the aggregator
// says so.
func (k *stockKnative) setCustomMetricsAPI(ctx context.Context, t *testing.T, available bool) {
	t.Helper()
	api := k.dyn.Resource(apiServiceGVR)
	u, err := api.Get(ctx, "v1beta1.custom.metrics.k8s.io", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if available {
		unstructured.RemoveNestedField(u.Object, "spec", "service")
		unstructured.RemoveNestedField(u.Object, "spec", "insecureSkipTLSVerify")
	} else {
		u.Object["spec"].(map[string]any)["service"] = map[string]any{"namespace": "monitoring", "name": "prometheus-adapter"}
		u.Object["spec"].(map[string]any)["insecureSkipTLSVerify"] = true
	}
	if _, err := api.Update(ctx, u, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	want := "False"
	if available {
		want = "True"
	}
	testproc.Eventually(t, time.Minute, "the custom metrics API Available "+want, func() bool {
		u, err := api.Get(ctx, "v1beta1.custom.metrics.k8s.io", metav1.GetOptions{})
		if err != nil {
			return false
		}
		conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
		for _, c := range conds {
			if m, ok := c.(map[string]any); ok && m["type"] == "Available" {
				return m["status"] == want
			}
		}
		return false
	})
}

// createYAML creates the object of doc as gvr, in namespace ns.
func createYAML(ctx context.Context, t *testing.T, dyn dynamic.Interface, gvr schema.GroupVersionResource, ns, doc string) {
	t.Helper()
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
		t.Fatal(err)
	}
	var err error
	if ns == "" {
		_, err = dyn.Resource(gvr).Create(ctx, u, metav1.CreateOptions{})
	} else {
		_, err = dyn.Resource(gvr).Namespace(ns).Create(ctx, u, metav1.CreateOptions{})
	}
	if err != nil {
		t.Fatal(err)
	}
}

// objectVersions is the resourceVersion of every object the install
// creates or changes, by kind, namespace and name.
func objectVersions(ctx context.Context, t *testing.T, dyn dynamic.Interface) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, gvr := range []schema.GroupVersionResource{
		{Group: "apps", Version: "v1", Resource: "deployments"},
		{Version: "v1", Resource: "configmaps"},
		{Version: "v1", Resource: "serviceaccounts"},
		{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "roles"},
		{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "rolebindings"},
		{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "clusterrolebindings"},
		{Group: "policy", Version: "v1", Resource: "poddisruptionbudgets"},
		{Group: "autoscaling", Version: "v2", Resource: "horizontalpodautoscalers"},
		{Group: "serving.knative.dev", Version: "v1", Resource: "services"},
	} {
		list, err := dyn.Resource(gvr).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range list.Items {
			out[gvr.Resource+"/"+o.GetNamespace()+"/"+o.GetName()] = o.GetResourceVersion()
		}
	}
	return out
}

// impersonating writes a kubeconfig of s's admin acting as user, as
// kubectl --as does.
func impersonating(t *testing.T, s *apiserver.Server, user string) string {
	t.Helper()
	cfg, err := clientcmd.LoadFromFile(s.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range cfg.AuthInfos {
		a.Impersonate = user
	}
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// grantRead lets user read everything (the view role of a cluster's
// auditors, say), and waits until the API server's authorizer knows.
func grantRead(ctx context.Context, t *testing.T, kube kubernetes.Interface, user string) {
	t.Helper()
	role := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: user + "-reads"},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{"*"}, Resources: []string{"*"}, Verbs: []string{"get", "list", "watch"}}},
	}
	if _, err := kube.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: user + "-reads"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{APIGroup: "rbac.authorization.k8s.io", Kind: "User", Name: user}},
	}
	if _, err := kube.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	may := access{user: user, res: res("get", "apps", "deployments", "", "knative-eventing")}
	testproc.Eventually(t, rbacSyncBound, user+" may read", func() bool {
		got, err := review(ctx, kube, may)
		return err == nil && got.Allowed
	})
}
