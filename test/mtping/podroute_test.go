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

package mtping

import (
	"maps"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"knative.dev/pkg/ptr"

	"knative.dev/event-forwarding-proxy/adapter/kube"
	adapter "knative.dev/event-forwarding-proxy/adapter/mtping"
)

// TestRouteOnThePod runs the adapter as the Pod it names (POD_NAME; the
// Pod stays Pending without a kubelet) and switches its route both ways
// through config-event-forwarding: the Pod's Events follow, as kubectl
// describe pod reads them (by the Pod's UID), and the Pod itself is never
// written (the release's RBAC lets the adapter read it only).
func TestRouteOnThePod(t *testing.T) {
	t.Parallel()
	c := newCluster(t, maps.Clone(fastElection))
	const name = "adapter-route"
	pod, err := c.kube.CoreV1().Pods(systemNamespace).Create(c.ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"sources.knative.dev/role": "adapter"}},
		Spec: corev1.PodSpec{
			ServiceAccountName:           adapterAccount,
			AutomountServiceAccountToken: ptr.Bool(false),
			Containers:                   []corev1.Container{{Name: "dispatcher", Image: "dev.local/mtping:test"}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p := startAdapter(t, c, name)

	// routeIs reports whether the Pod holds count Events (repeats
	// included) of reason, each about this Pod's UID, and is as created.
	routeIs := func(reason string, count int32, note string) func() bool {
		return func() bool {
			got, err := c.kube.CoreV1().Pods(systemNamespace).Get(c.ctx, name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if got.ResourceVersion != pod.ResourceVersion {
				t.Fatalf("the adapter wrote its Pod: labels %v", got.Labels)
			}
			events, err := c.kube.CoreV1().Events(systemNamespace).List(c.ctx, metav1.ListOptions{
				FieldSelector: fields.Set{"involvedObject.kind": "Pod", "involvedObject.name": name, "involvedObject.uid": string(pod.UID), "reason": reason}.String()})
			if err != nil {
				t.Fatal(err)
			}
			var n int32
			for _, e := range events.Items {
				if e.Type != corev1.EventTypeNormal || e.Source.Component != adapter.Component || !strings.Contains(e.Message, note) {
					t.Fatalf("Event %s: type %s, source %s, message %q; want Normal, from %s, saying %q",
						e.Name, e.Type, e.Source.Component, e.Message, adapter.Component, note)
				}
				n += e.Count
			}
			return n == count
		}
	}
	eventually(t, 30*time.Second, "the Pod shows the direct route at start",
		routeIs(kube.ReasonSendingDirect, 1, "no proxy configured"))

	// Threshold 0 forwards whatever the number of sources; with none,
	// nothing is sent, so the proxy need not run.
	c.setForwarding(t, "http://127.0.0.1:1", "0")
	eventually(t, 30*time.Second, "the Pod shows the proxy route",
		routeIs(kube.ReasonForwardingThroughProxy, 1, "threshold 0: always"))

	c.setForwarding(t, "", "500")
	eventually(t, 30*time.Second, "the Pod shows the direct route again",
		routeIs(kube.ReasonSendingDirect, 2, "no proxy configured"))

	if logs := p.Logs.String(); strings.Contains(logs, "Cannot read the adapter's Pod") || strings.Contains(logs, "not shown on a Pod") {
		t.Errorf("the adapter could not write its route:\n%s", logs)
	}
}
