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
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubefake "k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	kle "knative.dev/pkg/leaderelection"

	"knative.dev/event-forwarding-proxy/internal/kubetest"
	"knative.dev/event-forwarding-proxy/test/testproc"

	eventingfake "knative.dev/eventing/pkg/client/clientset/versioned/fake"
)

// TestRun runs the whole adapter against fake clientsets: it takes the
// leases, fires, follows a deletion, and on shutdown releases its leases
// and returns.
func TestRun(t *testing.T) {
	tests := []struct {
		name    string
		buckets uint32
	}{
		{name: "one bucket", buckets: 1},
		{name: "three buckets", buckets: 3},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ec := eventingfake.NewSimpleClientset(pingSource("tenant", "a"), pingSource("other", "b"))
			watching := kubetest.WatchStarted(ec, "pingsources")
			kc := kubefake.NewClientset()
			s := &fakeSender{}
			a, err := New(Params{
				Sources: ec, Kube: kc, Sender: s, Namespace: "system", Identity: "me", Spread: -1, HandoverWindow: -1,
				LeaderElection: &kle.Config{Buckets: tc.buckets, LeaseDuration: 3 * time.Second, RenewDeadline: 2 * time.Second, RetryPeriod: 500 * time.Millisecond},
			})
			if err != nil {
				t.Fatal(err)
			}
			ctx, stop := context.WithCancel(t.Context())
			done := make(chan error, 1)
			go func() { done <- a.Run(ctx) }()

			testproc.Eventually(t, 10*time.Second, "both sources fire", func() bool { return s.sent() >= 4 && a.Ready() })
			if n := s.lastCount(); n != 2 {
				t.Errorf("told %d sources, want 2", n)
			}
			watching(t)
			if err := ec.SourcesV1().PingSources("other").Delete(t.Context(), "b", metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
			testproc.Eventually(t, 10*time.Second, "the deletion is seen", func() bool { return s.lastCount() == 1 })

			stop()
			select {
			case err := <-done:
				if err != nil {
					t.Fatal(err)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("Run did not return after its context ended")
			}
			if a.Ready() {
				t.Error("still ready after shutdown")
			}
			leases, err := kc.CoordinationV1().Leases("system").List(t.Context(), metav1.ListOptions{})
			if err != nil {
				t.Fatal(err)
			}
			// With one bucket, upstream's single Lease is that bucket; with
			// three, the replica holds it beside them.
			wantGates := 0
			if tc.buckets != 1 {
				wantGates = 1
			}
			var buckets, members, gates int
			for _, l := range leases.Items {
				switch _, member := l.Labels[MemberLabel]; {
				case member:
					members++
				case strings.HasSuffix(l.Name, fmt.Sprintf("-of-%02d", tc.buckets)):
					buckets++
				default:
					gates++
				}
			}
			if buckets != int(tc.buckets) || members != 1 || gates != wantGates {
				t.Errorf("%d bucket Leases, %d member slots, %d of upstream's; want %d, the 1 this replica took, %d",
					buckets, members, gates, tc.buckets, wantGates)
			}
			for _, l := range leases.Items {
				if h := l.Spec.HolderIdentity; h != nil && *h != "" {
					t.Errorf("lease %s still held by %q after shutdown", l.Name, *h)
				}
			}
			checkReleaseOrder(t, kc)
		})
	}
}

// checkReleaseOrder checks that the member slot was released before any
// bucket Lease: a standby that sees a bucket free must no longer count this
// replica, or it stands for its share only.
func checkReleaseOrder(t *testing.T, kc *kubefake.Clientset) {
	t.Helper()
	member, firstBucket := -1, -1
	for i, act := range kc.Actions() {
		up, ok := act.(k8stesting.UpdateAction)
		if !ok || act.GetResource().Resource != "leases" {
			continue
		}
		l := up.GetObject().(*coordinationv1.Lease)
		if l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity != "" {
			continue
		}
		if _, ok := l.Labels[MemberLabel]; ok {
			member = i
		} else if firstBucket < 0 {
			firstBucket = i
		}
	}
	if member < 0 || firstBucket < 0 || member > firstBucket {
		t.Errorf("member slot released at action %d, the first bucket Lease at %d: want the slot first", member, firstBucket)
	}
}
