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
	"errors"
	"maps"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	kubefake "k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	kle "knative.dev/pkg/leaderelection"

	"knative.dev/event-forwarding-proxy/internal/kubetest"
)

var leasesResource = coordinationv1.SchemeGroupVersion.WithResource("leases")

// withVersions makes the fake clientset's Leases carry resourceVersions
// and refuses a write at a stale one, as the API server does.
func withVersions(kc *kubefake.Clientset) {
	var mu sync.Mutex
	next := 0
	write := func(a k8stesting.Action, create bool) (bool, runtime.Object, error) {
		mu.Lock()
		defer mu.Unlock()
		l := a.(interface{ GetObject() runtime.Object }).GetObject().(*coordinationv1.Lease).DeepCopy()
		l.Namespace = a.GetNamespace()
		cur, err := kc.Tracker().Get(leasesResource, l.Namespace, l.Name)
		switch {
		case create && err == nil:
			return true, nil, apierrors.NewAlreadyExists(leasesResource.GroupResource(), l.Name)
		case !create && err != nil:
			return true, nil, err
		case !create && cur.(*coordinationv1.Lease).ResourceVersion != l.ResourceVersion:
			return true, nil, apierrors.NewConflict(leasesResource.GroupResource(), l.Name, errors.New("written at a stale version"))
		}
		next++
		l.ResourceVersion = strconv.Itoa(next)
		if create {
			err = kc.Tracker().Create(leasesResource, l, l.Namespace)
		} else {
			err = kc.Tracker().Update(leasesResource, l, l.Namespace)
		}
		return true, l, err
	}
	kc.PrependReactor("create", "leases", func(a k8stesting.Action) (bool, runtime.Object, error) { return write(a, true) })
	kc.PrependReactor("update", "leases", func(a k8stesting.Action) (bool, runtime.Object, error) { return write(a, false) })
}

func TestMemberSlots(t *testing.T) {
	const ns = "knative-eventing"
	kc := kubefake.NewClientset()
	withVersions(kc)
	now := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	replica := func(id string) *memberSlots {
		cc := kle.ComponentConfig{Component: Component, Buckets: 3, Identity: id, LeaseDuration: 15 * time.Second}
		return newMemberSlots(kc, ns, cc, clock)
	}
	sync := func(t *testing.T, m *memberSlots) []string {
		t.Helper()
		live, err := m.sync(t.Context())
		if err != nil {
			t.Fatalf("%s: %v", m.id, err)
		}
		slices.Sort(live)
		return live
	}
	holders := func(t *testing.T) []string {
		t.Helper()
		list, err := kc.CoordinationV1().Leases(ns).List(t.Context(), metav1.ListOptions{LabelSelector: MemberLabel + "=" + Component})
		if err != nil {
			t.Fatal(err)
		}
		var hs []string
		for _, l := range list.Items {
			hs = append(hs, holderOf(&l))
			if l.Labels[PartOfLabel] != PartOfValue {
				t.Errorf("slot %s has no %s=%s label: the uninstall finds the slots by it", l.Name, PartOfLabel, PartOfValue)
			}
		}
		slices.Sort(hs)
		return hs
	}
	a, b := replica("a"), replica("b")

	t.Run("each replica takes a slot of its own, and counts the others", func(t *testing.T) {
		sync(t, a)
		sync(t, b)
		if got := sync(t, a); !slices.Equal(got, []string{"a", "b"}) {
			t.Errorf("a counts %v, want [a b]", got)
		}
		if got := holders(t); !slices.Equal(got, []string{"a", "b"}) {
			t.Errorf("slots held by %v, want [a b]", got)
		}
	})

	t.Run("a replica that leaves frees its slot for the next", func(t *testing.T) {
		if err := b.leave(t.Context()); err != nil {
			t.Fatal(err)
		}
		if got := sync(t, a); !slices.Equal(got, []string{"a"}) {
			t.Errorf("a counts %v once b left, want [a]", got)
		}
		c := replica("c")
		sync(t, c)
		if got := holders(t); !slices.Equal(got, []string{"a", "c"}) {
			t.Errorf("slots held by %v, want [a c]: c takes the one b released", got)
		}
	})

	t.Run("a restarted replica takes back its own slot", func(t *testing.T) {
		again := replica("a")
		if got := sync(t, again); !slices.Equal(got, []string{"a", "c"}) {
			t.Errorf("a, restarted, counts %v, want [a c]", got)
		}
		if got := holders(t); !slices.Equal(got, []string{"a", "c"}) {
			t.Errorf("slots held by %v, want [a c]", got)
		}
		a = again
	})

	t.Run("a dead replica's slot is taken once unchanged for a duration", func(t *testing.T) {
		d, e := replica("d"), replica("e")
		sync(t, d) // the third slot: c stops renewing from here on
		sync(t, e)
		if e.held != "" {
			t.Fatalf("e took %s while every slot was held", e.held)
		}
		now = now.Add(10 * time.Second)
		sync(t, a)
		sync(t, d)
		if got := sync(t, e); e.held != "" || !slices.Equal(got, []string{"a", "c", "d", "e"}) {
			t.Errorf("e, 10 s on, holds %q and counts %v; want none, and c still counted", e.held, got)
		}
		now = now.Add(6 * time.Second)
		sync(t, a)
		sync(t, d)
		if got := sync(t, e); e.held == "" || !slices.Equal(got, []string{"a", "d", "e"}) {
			t.Errorf("e, 16 s on, holds %q and counts %v; want c's slot, and c not counted", e.held, got)
		}
		if got := holders(t); !slices.Equal(got, []string{"a", "d", "e"}) {
			t.Errorf("slots held by %v, want [a d e]", got)
		}
	})

	t.Run("of two replicas taking one slot at one version, one gets it", func(t *testing.T) {
		now = now.Add(time.Minute) // every slot dead to whoever looks again
		f, g := replica("f"), replica("g")
		sync(t, f)
		sync(t, g) // both have now seen every slot at its version
		now = now.Add(20 * time.Second)
		stale := maps.Clone(g.last)
		sync(t, f) // takes the first slot
		g.last, g.held = stale, ""
		if err := g.take(t.Context(), now); err != nil {
			t.Fatal(err)
		}
		if g.held == "" || g.held == f.held {
			t.Errorf("g holds %q, f %q: want two different slots", g.held, f.held)
		}
	})

	t.Run("never more member Leases than buckets, and none deleted", func(t *testing.T) {
		if n := len(holders(t)); n != 3 {
			t.Errorf("%d member Leases, want 3", n)
		}
		for _, act := range kc.Actions() {
			if act.GetVerb() == "delete" {
				t.Errorf("a Lease was deleted: %v", act)
			}
		}
	})
}

// TestMemberSlotLeftAfterAnUnseenRenewal: a renewal that reached the API
// server after its caller gave up leaves the replica with a stale version;
// leaving must still free the slot rather than leave it alive.
func TestMemberSlotLeftAfterAnUnseenRenewal(t *testing.T) {
	const ns = "knative-eventing"
	kc := kubefake.NewClientset()
	withVersions(kc)
	now := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	cc := kle.ComponentConfig{Component: Component, Buckets: 2, Identity: "a", LeaseDuration: 15 * time.Second}
	a := newMemberSlots(kc, ns, cc, func() time.Time { return now })
	if _, err := a.sync(t.Context()); err != nil {
		t.Fatal(err)
	}
	stale := maps.Clone(a.last)
	now = now.Add(time.Second)
	if _, err := a.sync(t.Context()); err != nil { // the renewal a never saw
		t.Fatal(err)
	}
	a.last = stale
	if err := a.leave(t.Context()); err != nil {
		t.Fatal(err)
	}
	l, err := kc.CoordinationV1().Leases(ns).Get(t.Context(), MemberSlotName(cc, 0), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if h := holderOf(l); h != "" {
		t.Errorf("slot held by %q after a left, want none", h)
	}
	if a.held != "" {
		t.Errorf("a still holds %q", a.held)
	}
}

// TestWatchMemberSlots: the balancing loop hears of a slot taken and
// released through the watch; of an update, only one that changes the
// holder counts (changedHands), not a renewal.
func TestWatchMemberSlots(t *testing.T) {
	kc := kubefake.NewClientset()
	watching := kubetest.WatchStarted(kc, "leases")
	changed, err := watchMemberSlots(t.Context(), kc, "system", Component)
	if err != nil {
		t.Fatal(err)
	}
	watching(t)
	leases := kc.CoordinationV1().Leases("system")
	slot := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: "slot", Labels: map[string]string{MemberLabel: Component}},
		Spec:       coordinationv1.LeaseSpec{HolderIdentity: new("a"), RenewTime: &metav1.MicroTime{Time: time.Now()}},
	}
	heard := func(what string) {
		t.Helper()
		select {
		case <-changed:
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: no signal", what)
		}
	}
	if _, err := leases.Create(t.Context(), slot, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	heard("a slot taken")
	released := slot.DeepCopy()
	released.Spec.HolderIdentity = new("")
	if _, err := leases.Update(t.Context(), released, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	heard("the slot released")

	renewed := slot.DeepCopy()
	renewed.Spec.RenewTime = &metav1.MicroTime{Time: time.Now().Add(time.Second)}
	taken := slot.DeepCopy()
	taken.Spec.HolderIdentity = new("b")
	tests := []struct {
		name     string
		old, cur any
		want     bool
	}{
		{name: "renewed", old: slot, cur: renewed},
		{name: "released", old: slot, cur: released, want: true},
		{name: "taken over", old: slot, cur: taken, want: true},
		{name: "taken", old: released, cur: slot, want: true},
		{name: "not a Lease", old: cache.DeletedFinalStateUnknown{}, cur: slot, want: true},
	}
	for _, tc := range tests {
		if got := changedHands(tc.old, tc.cur); got != tc.want {
			t.Errorf("%s: changedHands = %v, want %v", tc.name, got, tc.want)
		}
	}
}
