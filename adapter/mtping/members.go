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
	"slices"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	kle "knative.dev/pkg/leaderelection"
)

// MemberLabel marks the member slots: Leases each held by one running
// replica and renewed like a bucket's Lease, so that each replica knows
// how many share the buckets. Its value is the adapter's component name.
const MemberLabel = "event-forwarding.knative.dev/member-of"

// PartOfLabel and PartOfValue mark every Lease this adapter creates (its
// member slots and the bucket Leases it makes first) as the release marks
// its objects, so that the uninstall finds them (docs/install.md). A
// bucket Lease upstream's adapter made first carries no such label.
const (
	PartOfLabel = "app.kubernetes.io/name"
	PartOfValue = "event-forwarding-proxy"
)

// MemberSlotName is the name of member slot i: the buckets' prefix,
// "member" and the slot's number. There are as many slots as buckets: a
// replica beyond that many would lead no bucket anyway.
func MemberSlotName(cc kle.ComponentConfig, i int) string {
	prefix := strings.TrimSuffix(LeaseName(cc, 0), fmt.Sprintf(".%02d-of-%02d", 0, cc.Buckets))
	return fmt.Sprintf("%s.member.%02d", prefix, i)
}

// watchMemberSlots watches the member slots of component and signals on
// the channel it returns whenever one changes hands (taken, released,
// created or deleted), not at renewals. A replica stopping gracefully
// releases its slot before its bucket Leases, so the others count it out
// before they see its buckets free, and stand for them at their next try
// rather than after their next look at the slots.
func watchMemberSlots(ctx context.Context, kc kubernetes.Interface, namespace, component string) (<-chan struct{}, error) {
	changed := make(chan struct{}, 1)
	signal := func() {
		select {
		case changed <- struct{}{}:
		default: // one pending signal is enough
		}
	}
	f := informers.NewSharedInformerFactoryWithOptions(kc, 0, informers.WithNamespace(namespace),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = MemberLabel + "=" + component }))
	inf := f.Coordination().V1().Leases().Informer()
	_, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(any) { signal() },
		UpdateFunc: func(old, cur any) {
			if changedHands(old, cur) {
				signal()
			}
		},
		DeleteFunc: func(any) { signal() },
	})
	if err != nil {
		return nil, err
	}
	f.Start(ctx.Done())
	return changed, nil
}

// changedHands says whether an update of a slot changed its holder (a
// renewal does not).
func changedHands(old, cur any) bool {
	o, ok1 := old.(*coordinationv1.Lease)
	c, ok2 := cur.(*coordinationv1.Lease)
	return !ok1 || !ok2 || holderOf(o) != holderOf(c)
}

// memberSlots holds one member slot for this replica and reads the
// others'. A fixed set of slots, taken over rather than made per replica,
// leaves nothing behind when replicas come and go, and needs no right to
// delete a Lease. Only the balancing loop uses it.
type memberSlots struct {
	kc        kubernetes.Interface
	namespace string
	component string
	id        string
	slots     []string
	duration  time.Duration
	now       func() time.Time
	// held is the slot this replica holds, "" while it holds none.
	held string
	// last is each slot as last listed; seen, each slot's last version and
	// when this replica first saw it.
	last map[string]coordinationv1.Lease
	seen map[string]seenLease
}

type seenLease struct {
	version    string
	observedAt time.Time
}

func newMemberSlots(kc kubernetes.Interface, namespace string, cc kle.ComponentConfig, now func() time.Time) *memberSlots {
	m := &memberSlots{kc: kc, namespace: namespace, component: cc.Component, id: cc.Identity,
		duration: cc.LeaseDuration, now: now}
	for i := range int(cc.Buckets) {
		m.slots = append(m.slots, MemberSlotName(cc, i))
	}
	return m
}

// sync renews this replica's slot, or takes one that is absent, released
// or dead, and returns the identities of the replicas whose slots are
// alive, this one included. Every write is made at the version listed:
// of two replicas taking one slot, one wins, the other tries another at
// its next sync.
func (m *memberSlots) sync(ctx context.Context) ([]string, error) {
	leases := m.kc.CoordinationV1().Leases(m.namespace)
	list, err := leases.List(ctx, metav1.ListOptions{LabelSelector: MemberLabel + "=" + m.component})
	if err != nil {
		return nil, err
	}
	now := m.now()
	m.last = make(map[string]coordinationv1.Lease, len(list.Items))
	seen := make(map[string]seenLease, len(list.Items))
	ids := []string{m.id}
	var mine []string
	for _, l := range list.Items {
		if !slices.Contains(m.slots, l.Name) {
			continue // a slot of another bucket count: not this set's
		}
		s, ok := m.seen[l.Name]
		if !ok || s.version != l.ResourceVersion {
			s = seenLease{version: l.ResourceVersion, observedAt: now}
		}
		seen[l.Name] = s
		m.last[l.Name] = l
		switch holder := holderOf(&l); {
		case holder == m.id:
			mine = append(mine, l.Name)
		case holder != "" && alive(&l, s, now) && !slices.Contains(ids, holder):
			ids = append(ids, holder)
		}
	}
	m.seen = seen
	// The slot held, or one this identity held before a restart; a second
	// one (two restarts that raced) is released.
	if !slices.Contains(mine, m.held) {
		m.held = ""
		if len(mine) > 0 {
			m.held = mine[0]
		}
	}
	for _, name := range mine {
		if name != m.held {
			_ = m.release(ctx, name) // counted by the others until it expires
		}
	}
	if m.held != "" {
		if err := m.write(ctx, m.held); err == nil || !apierrors.IsConflict(err) {
			return ids, err
		}
		m.held = "" // taken by another, which saw this replica dead
	}
	return ids, m.take(ctx, now)
}

// take takes the first slot that is absent, released or dead.
func (m *memberSlots) take(ctx context.Context, now time.Time) error {
	for _, name := range m.slots {
		l, listed := m.last[name]
		if listed && holderOf(&l) != "" && !dead(&l, m.seen[name], now) {
			continue
		}
		err := m.write(ctx, name)
		switch {
		case err == nil:
			m.held = name
			return nil
		case apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err):
			continue // another replica took it first
		default:
			return err
		}
	}
	return nil // every slot held: this replica leads no bucket
}

// write makes this replica the holder of slot name, renewed now, at the
// version last listed (created when none was).
func (m *memberSlots) write(ctx context.Context, name string) error {
	leases := m.kc.CoordinationV1().Leases(m.namespace)
	now := metav1.NewMicroTime(m.now())
	spec := coordinationv1.LeaseSpec{HolderIdentity: new(m.id),
		LeaseDurationSeconds: new(int32(m.duration / time.Second)), RenewTime: &now, AcquireTime: &now}
	l, listed := m.last[name]
	var written *coordinationv1.Lease
	var err error
	if listed {
		if holderOf(&l) == m.id {
			spec.AcquireTime = l.Spec.AcquireTime
		}
		l.Spec = spec
		written, err = leases.Update(ctx, &l, metav1.UpdateOptions{})
	} else {
		written, err = leases.Create(ctx, &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{MemberLabel: m.component, PartOfLabel: PartOfValue}},
			Spec:       spec,
		}, metav1.CreateOptions{})
	}
	if err == nil {
		m.last[name] = *written // what leave releases
	}
	return err
}

// release frees slot name, if this replica still holds it. A write at a
// stale version (a renewal that reached the API server after its caller
// gave up on it) is retried at the version read back, so that the slot is
// not left alive for a whole duration; one already another's, or gone, is
// left as is.
func (m *memberSlots) release(ctx context.Context, name string) error {
	leases := m.kc.CoordinationV1().Leases(m.namespace)
	l, ok := m.last[name]
	for range 3 {
		if !ok || holderOf(&l) != m.id {
			break
		}
		l.Spec = coordinationv1.LeaseSpec{HolderIdentity: new("")}
		_, err := leases.Update(ctx, &l, metav1.UpdateOptions{})
		if err == nil || apierrors.IsNotFound(err) {
			break
		}
		if !apierrors.IsConflict(err) {
			return err
		}
		cur, err := leases.Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			break
		}
		if err != nil {
			return err
		}
		l, ok = *cur, true
	}
	delete(m.last, name)
	return nil
}

// leave releases this replica's slot, so that the others count it out at
// once rather than after its duration, and a new replica can take it.
func (m *memberSlots) leave(ctx context.Context) error {
	if m.held == "" {
		return nil
	}
	err := m.release(ctx, m.held)
	if err == nil {
		m.held = ""
	}
	return err
}

func holderOf(l *coordinationv1.Lease) string {
	if l.Spec.HolderIdentity == nil {
		return ""
	}
	return *l.Spec.HolderIdentity
}

// alive says a slot is held: this replica has seen a new version of it
// within its duration and its renew time is within its duration too, so
// that a replica that starts after another died does not count the dead
// one for a whole duration. (The renew time is another replica's clock:
// clocks apart by more than a duration make the shares less even, never a
// bucket fire twice, which the buckets' own Leases decide.)
func alive(l *coordinationv1.Lease, s seenLease, now time.Time) bool {
	d, renewed, ok := timing(l)
	return ok && now.Before(s.observedAt.Add(d)) && now.Before(renewed.Add(d))
}

// dead says a slot may be taken over: unchanged for a whole duration as
// this replica saw it, and not renewed for one by its holder's clock.
func dead(l *coordinationv1.Lease, s seenLease, now time.Time) bool {
	d, renewed, ok := timing(l)
	return !ok || (!now.Before(s.observedAt.Add(d)) && !now.Before(renewed.Add(d)))
}

func timing(l *coordinationv1.Lease) (time.Duration, time.Time, bool) {
	if l.Spec.LeaseDurationSeconds == nil || l.Spec.RenewTime == nil {
		return 0, time.Time{}, false
	}
	return time.Duration(*l.Spec.LeaseDurationSeconds) * time.Second, l.Spec.RenewTime.Time, true
}
