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
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/restmapper"
)

const fieldManager = "event-forwarding-e2e"

var (
	ksvcGVR       = schema.GroupVersionResource{Group: "serving.knative.dev", Version: "v1", Resource: "services"}
	pingSourceGVR = schema.GroupVersionResource{Group: "sources.knative.dev", Version: "v1", Resource: "pingsources"}
	sksGVR        = schema.GroupVersionResource{Group: "networking.internal.knative.dev", Version: "v1alpha1", Resource: "serverlessservices"}
	paGVR         = schema.GroupVersionResource{Group: "autoscaling.internal.knative.dev", Version: "v1alpha1", Resource: "podautoscalers"}
)

// newNamespace creates a namespace of the test's own, deleted when the
// test ends; on failure its pods' logs are written to the test log first.
func newNamespace(ctx context.Context, t testing.TB, prefix string) string {
	t.Helper()
	suffix := make([]byte, 3)
	_, _ = rand.Read(suffix)
	name := fmt.Sprintf("e2e-%s-%s", prefix, hex.EncodeToString(suffix))
	_, err := cluster.kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		Name: name, Labels: map[string]string{"app.kubernetes.io/part-of": "event-forwarding-e2e"},
	}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("namespace %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if t.Failed() {
			dumpLogs(ctx, t, name, "")
		}
		// PingSources first, and the sends they fired ended while the
		// sink still answers: a namespace being deleted keeps its sources
		// firing, and a send held by its terminating sink, until its last
		// pod has stopped (a sink's grace period is its revision timeout,
		// ten minutes), into the next test's counts.
		_ = cluster.dynamic.Resource(pingSourceGVR).Namespace(name).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
		if err := waitSourcesGone(ctx, name); err != nil {
			t.Logf("namespace %s deleted with sends in flight: %v", name, err)
		}
		_ = cluster.kube.CoreV1().Namespaces().Delete(ctx, name, metav1.DeleteOptions{})
	})
	return name
}

// waitSourcesGone waits, up to ctx's end, until namespace has no
// PingSource and the project's adapter pods no send in flight.
func waitSourcesGone(ctx context.Context, namespace string) error {
	for {
		err := sourcesGone(ctx, namespace)
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(time.Second):
		}
	}
}

func sourcesGone(ctx context.Context, namespace string) error {
	list, err := cluster.dynamic.Resource(pingSourceGVR).Namespace(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	if len(list.Items) > 0 {
		return fmt.Errorf("%d PingSources left", len(list.Items))
	}
	pods, err := cluster.kube.CoreV1().Pods(systemNamespace).List(ctx, metav1.ListOptions{LabelSelector: adapterSelector})
	if err != nil {
		return err
	}
	for _, p := range pods.Items {
		// Upstream's adapter (after an uninstall or a way back) exports no
		// such gauge: its sends are not waited for.
		if !ready(p) || !strings.HasPrefix(p.Spec.Containers[0].Image, projectAdapterImage) {
			continue
		}
		n, err := gauge(ctx, p, adapterPort, "kn_forward_mtping_inflight_sends")
		if err != nil {
			return err
		}
		if n > 0 {
			return fmt.Errorf("%s has %v sends in flight", p.Name, n)
		}
	}
	return nil
}

// dumpLogs writes the last lines of every container's log of the pods in
// namespace (matching selector) to the test log.
func dumpLogs(ctx context.Context, t testing.TB, namespace, selector string) {
	t.Helper()
	tail := int64(40)
	dumpPodLogs(ctx, t, namespace, selector, corev1.PodLogOptions{TailLines: &tail})
}

// dumpLogsSince writes what every container of the pods in namespace
// (matching selector) logged since since, up to 256 KiB each, to the
// test log.
func dumpLogsSince(ctx context.Context, t testing.TB, namespace, selector string, since time.Time) {
	t.Helper()
	limit := int64(256 << 10)
	dumpPodLogs(ctx, t, namespace, selector, corev1.PodLogOptions{SinceTime: &metav1.Time{Time: since}, LimitBytes: &limit})
}

func dumpPodLogs(ctx context.Context, t testing.TB, namespace, selector string, opts corev1.PodLogOptions) {
	t.Helper()
	pods, err := cluster.kube.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		t.Logf("logs of %s: %v", namespace, err)
		return
	}
	for _, p := range pods.Items {
		for _, c := range p.Spec.Containers {
			opts.Container = c.Name
			b, err := cluster.kube.CoreV1().Pods(namespace).GetLogs(p.Name, &opts).DoRaw(ctx)
			if err != nil {
				t.Logf("--- %s/%s %s: %v", namespace, p.Name, c.Name, err)
				continue
			}
			t.Logf("--- %s/%s %s:\n%s", namespace, p.Name, c.Name, b)
		}
	}
}

// apply server-side applies every document of manifest (YAML, with
// {{NAMESPACE}} replaced by namespace).
func apply(ctx context.Context, t testing.TB, namespace, manifest string) {
	t.Helper()
	manifest = strings.ReplaceAll(manifest, "{{NAMESPACE}}", namespace)
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader([]byte(manifest)), 4096)
	for {
		var obj unstructured.Unstructured
		if err := dec.Decode(&obj.Object); err != nil {
			if errors.Is(err, io.EOF) {
				return
			}
			t.Fatalf("manifest: %v", err)
		}
		if len(obj.Object) == 0 {
			continue
		}
		applyObject(ctx, t, &obj)
	}
}

// restMapper maps kinds to resources for every apply from one discovery
// of the API server's groups, read again when a kind is missing (a CRD
// installed since), rather than a discovery per object applied.
var restMapper = sync.OnceValue(func() *restmapper.DeferredDiscoveryRESTMapper {
	return restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(cluster.kube.Discovery()))
})

// applyObject server-side applies obj.
func applyObject(ctx context.Context, t testing.TB, obj *unstructured.Unstructured) {
	t.Helper()
	gvk := obj.GroupVersionKind()
	m, err := restMapper().RESTMapping(gvk.GroupKind(), gvk.Version)
	if meta.IsNoMatchError(err) {
		restMapper().Reset() // a kind whose CRD came after the last discovery
		m, err = restMapper().RESTMapping(gvk.GroupKind(), gvk.Version)
	}
	if err != nil {
		t.Fatalf("%s: %v", gvk, err)
	}
	body, err := obj.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	force := true
	_, err = cluster.dynamic.Resource(m.Resource).Namespace(obj.GetNamespace()).Patch(ctx, obj.GetName(), types.ApplyPatchType, body,
		metav1.PatchOptions{FieldManager: fieldManager, Force: &force})
	if err != nil {
		t.Fatalf("apply %s %s: %v", gvk.Kind, obj.GetName(), err)
	}
}

// waitReady waits for the Ready condition of a Knative object.
func waitReady(ctx context.Context, t testing.TB, gvr schema.GroupVersionResource, namespace, name string, within time.Duration) *unstructured.Unstructured {
	t.Helper()
	var last *unstructured.Unstructured
	eventually(t, within, time.Second, func() string {
		return fmt.Sprintf("%s %s/%s Ready: %v", gvr.Resource, namespace, name, conditions(last))
	}, func() bool {
		u, err := cluster.dynamic.Resource(gvr).Namespace(namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false
		}
		last = u
		return conditionTrue(u, "Ready")
	})
	return last
}

func conditions(u *unstructured.Unstructured) []any {
	if u == nil {
		return nil
	}
	c, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	return c
}

func conditionTrue(u *unstructured.Unstructured, typ string) bool {
	for _, c := range conditions(u) {
		m, _ := c.(map[string]any)
		if m["type"] == typ {
			return m["status"] == "True"
		}
	}
	return false
}

// proxyToken is a token of a service account of namespace with the
// proxy's audience, as the adapter presents it in Kn-Forward-Authorization.
func proxyToken(ctx context.Context, t testing.TB, namespace string) string {
	t.Helper()
	const sa = "e2e-caller"
	_, err := cluster.kube.CoreV1().ServiceAccounts(namespace).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	ttl := int64(3600)
	tr, err := cluster.kube.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, sa, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{Audiences: []string{proxyAudience}, ExpirationSeconds: &ttl},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("token for %s/%s: %v", namespace, sa, err)
	}
	return tr.Status.Token
}

// setSchedule changes a PingSource's schedule.
func setSchedule(ctx context.Context, t testing.TB, namespace, name, schedule string) {
	t.Helper()
	b, _ := json.Marshal(map[string]any{"spec": map[string]any{"schedule": schedule}})
	if _, err := cluster.dynamic.Resource(pingSourceGVR).Namespace(namespace).Patch(ctx, name, types.MergePatchType, b, metav1.PatchOptions{}); err != nil {
		t.Fatalf("schedule of %s/%s: %v", namespace, name, err)
	}
}
