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
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubefake "k8s.io/client-go/kubernetes/fake"
	kle "knative.dev/pkg/leaderelection"

	"knative.dev/event-forwarding-proxy/test/testproc"

	eventingfake "knative.dev/eventing/pkg/client/clientset/versioned/fake"
)

// upstreamHolder is an identity as upstream's adapter holds its Leases:
// the host name, "_" and a UUID (knative.dev/pkg's UniqueID).
const upstreamHolder = "pingsource-mt-adapter-7d9f8c6b5-x2x4q_0f8e3c55-86b1-4d0c-9a5e-2f1d6c0b7a11"

func TestGateOpen(t *testing.T) {
	tests := []struct {
		holder string
		want   bool
	}{
		{holder: "", want: true},
		{holder: ownIdentity("pingsource-mt-adapter-5f6d-abcde"), want: true},
		{holder: upstreamHolder, want: false},
		{holder: "pingsource-mt-adapter-5f6d-abcde", want: false},
	}
	for _, tc := range tests {
		if got := gateOpen(tc.holder); got != tc.want {
			t.Errorf("gateOpen(%q) = %v, want %v", tc.holder, got, tc.want)
		}
	}
	if id := ownIdentity(ownIdentity("p")); id != "p"+IdentitySuffix {
		t.Errorf("ownIdentity twice = %q, want the suffix once", id)
	}
}

// TestUpstreamFiresTheSourcesOfItsGates: with both of this adapter's
// buckets led, a source fires only while its gate (one of upstream's
// three buckets) is free or held by this adapter.
func TestUpstreamFiresTheSourcesOfItsGates(t *testing.T) {
	f := newFixture(t, 30)
	f.a.gates = Buckets(kle.ComponentConfig{Component: Component, Buckets: 3})
	f.a.promote(f.buckets[0], f.ctx, time.Time{})
	f.a.promote(f.buckets[1], f.ctx, time.Time{})
	inGate := func(i int) int {
		n := 0
		for key := range f.a.jobs {
			if f.a.gates[i].Has(key) {
				n++
			}
		}
		return n
	}
	gate := func(i int, holder string) { f.a.setGateHolder(f.a.gates[i].Name(), holder) }
	if n := f.fireAll(); n != 30 {
		t.Errorf("no gate Lease seen: sent %d, want 30", n)
	}
	gate(0, upstreamHolder)
	if n, want := f.fireAll(), 30-inGate(0); n != want || want == 30 {
		t.Errorf("upstream holds gate 0: sent %d, want %d (all but gate 0's)", n, want)
	}
	gate(1, upstreamHolder)
	gate(2, upstreamHolder)
	if n := f.fireAll(); n != 0 {
		t.Errorf("upstream holds every gate: sent %d, want 0", n)
	}
	gate(0, "")
	gate(1, ownIdentity("other-replica"))
	if n, want := f.fireAll(), inGate(0)+inGate(1); n != want {
		t.Errorf("gate 0 free, gate 1 another replica's: sent %d, want %d", n, want)
	}
}

// TestRunWaitsForUpstreamsLease runs the adapter beside a Lease that
// upstream's adapter holds: it leads its own buckets but fires nothing
// until upstream's adapter releases the Lease; then it fires, and holds
// the Lease for its replicas. (Closing again is
// TestUpstreamFiresTheSourcesOfItsGates: a fake clientset takes writes at
// any version, so a second holder here would race the replica's renewals.)
func TestRunWaitsForUpstreamsLease(t *testing.T) {
	upstream := kle.ComponentConfig{Component: Component, Buckets: 1}
	gateName := LeaseName(upstream, 0)
	now := metav1.NewMicroTime(time.Now())
	kc := kubefake.NewClientset(&coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: "system", Name: gateName},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr(upstreamHolder), LeaseDurationSeconds: ptr(int32(3600)),
			AcquireTime: &now, RenewTime: &now},
	})
	ec := eventingfake.NewSimpleClientset(pingSource("tenant", "a"), pingSource("other", "b"))
	s := &fakeSender{}
	a, err := New(Params{
		Sources: ec, Kube: kc, Sender: s, Namespace: "system", Identity: "me", Spread: -1, HandoverWindow: -1,
		LeaderElection: &kle.Config{Buckets: 3, LeaseDuration: 3 * time.Second, RenewDeadline: 2 * time.Second, RetryPeriod: 500 * time.Millisecond},
		Upstream:       &upstream,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	defer func() { stop(); <-done }()

	// Two ticks of each source come due while upstream holds the gate.
	testproc.Eventually(t, 10*time.Second, "every source scheduled", func() bool { return scheduled(a) == 2 })
	waitTicks(t, a, 2)
	if n := s.sent(); n != 0 {
		t.Fatalf("sent %d while upstream's adapter holds its Lease, want 0", n)
	}
	// Released as client-go's elector releases it when upstream's adapter
	// stops.
	l, err := kc.CoordinationV1().Leases("system").Get(t.Context(), gateName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	released := metav1.NewMicroTime(time.Now())
	l.Spec = coordinationv1.LeaseSpec{HolderIdentity: ptr(""), LeaseDurationSeconds: ptr(int32(1)), AcquireTime: &released, RenewTime: &released}
	if _, err := kc.CoordinationV1().Leases("system").Update(t.Context(), l, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	testproc.Eventually(t, 10*time.Second, "both sources fire", func() bool { return s.sent() >= 2 })
	testproc.Eventually(t, 10*time.Second, "the replica holds upstream's Lease", func() bool {
		a.mu.Lock()
		defer a.mu.Unlock()
		return a.gateHolders[gateName] == ownIdentity("me")
	})
}

// scheduled counts the sources on the cron.
func scheduled(a *Adapter) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.entries)
}

// waitTicks waits until every scheduled source has come due n more times
// (the cron called its tick, which may or may not have sent).
func waitTicks(t *testing.T, a *Adapter, n int) {
	t.Helper()
	a.mu.Lock()
	start := map[*job]int64{}
	for _, e := range a.entries {
		start[e.job] = e.job.due.Load()
	}
	a.mu.Unlock()
	testproc.Eventually(t, time.Duration(n+4)*5*time.Second, "ticks due", func() bool {
		for j, due := range start {
			if j.due.Load() < due+int64(n)*int64(2*time.Second) {
				return false
			}
		}
		return true
	})
}
