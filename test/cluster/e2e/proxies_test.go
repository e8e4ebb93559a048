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
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// A proxyInstance is one proxy Knative Service named proxyService: the
// release's install in Eventing's namespace, or a copy of it in a
// scenario's own namespace (copyProxy).
type proxyInstance struct{ namespace string }

// installed is the release's proxy, the one the adapter calls.
var installed = proxyInstance{systemNamespace}

// host is the Service's cluster-local host name.
func (p proxyInstance) host() string {
	return proxyService + "." + p.namespace + ".svc.cluster.local"
}

// pods are the pods of the Service's latest ready revision: after an
// install that changed the Service, the previous revision's pods may stay
// a while, holding nothing.
func (p proxyInstance) pods(ctx context.Context, t testing.TB) []corev1.Pod {
	t.Helper()
	return podsOf(ctx, t, p.namespace, "serving.knative.dev/revision="+p.revision(ctx, t))
}

// revision is the Service's latest ready revision, which is also the name
// of its HorizontalPodAutoscaler.
func (p proxyInstance) revision(ctx context.Context, t testing.TB) string {
	t.Helper()
	ksvc, err := cluster.dynamic.Resource(ksvcGVR).Namespace(p.namespace).Get(ctx, proxyService, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rev, _, _ := unstructured.NestedString(ksvc.Object, "status", "latestReadyRevisionName")
	if rev == "" {
		t.Fatalf("%s in %s has no ready revision", proxyService, p.namespace)
	}
	return rev
}

// countReady is how many of the Service's pods are ready.
func (p proxyInstance) countReady(ctx context.Context, t testing.TB) int {
	t.Helper()
	n := 0
	for _, pod := range p.pods(ctx, t) {
		if ready(pod) {
			n++
		}
	}
	return n
}

// busiestPod is the ready pod holding the most calls, and how many.
func (p proxyInstance) busiestPod(ctx context.Context, t testing.TB) (string, float64) {
	t.Helper()
	name, most := "", -1.0
	for _, pod := range p.pods(ctx, t) {
		if ready(pod) {
			if held := sum(scrape(ctx, t, pod, proxyMetrics), "kn_forward_active_requests", nil); held > most {
				name, most = pod.Name, held
			}
		}
	}
	if name == "" {
		t.Fatalf("no ready proxy pod in %s", p.namespace)
	}
	return name, most
}

// The copy's settings beside the release's: its pods stay at the
// release's min-scale, whatever they hold, and ask for little CPU, since
// the one node's two cores are requested by the install and by the
// scenarios running beside (the figures measured there are memory).
const (
	copyScale      = "2"
	copyCPURequest = "50m"
)

// copyProxy installs a copy of the release's proxy in namespace, a test's
// own (newNamespace): the release's Knative Service, service account and
// trust-bundle Role, with its own issuer-discovery binding and without the
// release's name label, at copyScale pods. A scenario holding calls there measures the release's proxy
// without sharing the install's pods with the scenarios that scale them
// or replace them. It returns once the Service is Ready.
func copyProxy(ctx context.Context, t testing.TB, namespace string) proxyInstance {
	t.Helper()
	return copyProxyProfile(ctx, t, namespace, "async", copyScale)
}

// copyProxyProfile is copyProxy of the release's profile, at most
// maxScale pods.
func copyProxyProfile(ctx context.Context, t testing.TB, namespace, profile, maxScale string) proxyInstance {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot, "release/event-forwarding-proxy-"+profile+".yaml"))
	if err != nil {
		t.Fatal(err)
	}
	kept := map[string]bool{
		"ServiceAccount/" + proxyService:                           true,
		"Role/event-forwarding-proxy-trust-bundles":                true,
		"RoleBinding/event-forwarding-proxy-trust-bundles":         true,
		"ClusterRoleBinding/event-forwarding-proxy-oidc-discovery": true,
		"Service/" + proxyService:                                  true,
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(b), 4096)
	copied := 0
	for {
		var obj unstructured.Unstructured
		if err := dec.Decode(&obj.Object); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			t.Fatalf("release: %v", err)
		}
		key := obj.GetKind() + "/" + obj.GetName()
		if !kept[key] || (obj.GetKind() == "Service" && obj.GetAPIVersion() != "serving.knative.dev/v1") {
			continue
		}
		switch obj.GetKind() {
		case "ClusterRoleBinding":
			obj.SetName(namespace + "-proxy-oidc-discovery")
			t.Cleanup(func() {
				_ = cluster.kube.RbacV1().ClusterRoleBindings().Delete(context.Background(), obj.GetName(), metav1.DeleteOptions{})
			})
		case "Service":
			setCopySettings(t, &obj, namespace, maxScale)
		}
		if obj.GetKind() != "ClusterRoleBinding" {
			obj.SetNamespace(namespace)
		}
		// Not the release's name label: the uninstall scenario checks that
		// nothing so labelled is left, in any namespace.
		labels := obj.GetLabels()
		if labels == nil {
			labels = map[string]string{}
		}
		delete(labels, "app.kubernetes.io/name")
		labels["app.kubernetes.io/part-of"] = "event-forwarding-e2e"
		obj.SetLabels(labels)
		if subjects, ok, _ := unstructured.NestedSlice(obj.Object, "subjects"); ok {
			for _, s := range subjects {
				s.(map[string]any)["namespace"] = namespace
			}
			if err := unstructured.SetNestedSlice(obj.Object, subjects, "subjects"); err != nil {
				t.Fatal(err)
			}
		}
		applyObject(ctx, t, &obj)
		copied++
	}
	if copied != len(kept) {
		t.Fatalf("copied %d of the release's %d proxy objects", copied, len(kept))
	}
	waitReady(ctx, t, ksvcGVR, namespace, proxyService, 3*time.Minute)
	return proxyInstance{namespace}
}

// setCopySettings sets the copy's scale (copyScale pods, up to maxScale),
// CPU request and trust-bundle namespace in the release's Knative Service,
// and takes the release's name label off its template.
func setCopySettings(t testing.TB, ksvc *unstructured.Unstructured, namespace, maxScale string) {
	t.Helper()
	annotations, _, _ := unstructured.NestedStringMap(ksvc.Object, "spec", "template", "metadata", "annotations")
	if annotations == nil {
		annotations = map[string]string{}
	}
	annotations["autoscaling.knative.dev/min-scale"] = copyScale
	annotations["autoscaling.knative.dev/max-scale"] = maxScale
	containers, _, _ := unstructured.NestedSlice(ksvc.Object, "spec", "template", "spec", "containers")
	if len(containers) != 1 {
		t.Fatalf("the release's proxy has %d containers, want 1", len(containers))
	}
	c := containers[0].(map[string]any)
	if err := unstructured.SetNestedField(c, copyCPURequest, "resources", "requests", "cpu"); err != nil {
		t.Fatal(err)
	}
	env, _, _ := unstructured.NestedSlice(c, "env")
	set := false
	for _, e := range env {
		if e := e.(map[string]any); e["name"] == "FORWARD_TRUST_BUNDLES_NAMESPACE" {
			e["value"], set = namespace, true
		}
	}
	if !set {
		t.Fatal("the release's proxy sets no FORWARD_TRUST_BUNDLES_NAMESPACE")
	}
	// Knative labels the revision's objects, its HPA among them, with the
	// template's labels.
	labels, _, _ := unstructured.NestedStringMap(ksvc.Object, "spec", "template", "metadata", "labels")
	delete(labels, "app.kubernetes.io/name")
	if err := errors.Join(
		unstructured.SetNestedStringMap(ksvc.Object, labels, "spec", "template", "metadata", "labels"),
		unstructured.SetNestedSlice(c, env, "env"),
		unstructured.SetNestedSlice(ksvc.Object, containers, "spec", "template", "spec", "containers"),
		unstructured.SetNestedStringMap(ksvc.Object, annotations, "spec", "template", "metadata", "annotations"),
	); err != nil {
		t.Fatal(err)
	}
}
