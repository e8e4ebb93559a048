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
	"slices"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/leaderelection/resourcelock"

	sourcesv1 "knative.dev/eventing/pkg/apis/sources/v1"
	eventingfake "knative.dev/eventing/pkg/client/clientset/versioned/fake"
	kle "knative.dev/pkg/leaderelection"
)

// clockFixture is a fixture whose clock the test moves, with one bucket
// and one source firing on even seconds.
type clockFixture struct {
	*fixture
	mu  sync.Mutex
	now time.Time
}

var evenSeconds = func(s *sourcesv1.PingSource) { s.Spec.Schedule = "*/2 * * * * *" }

func newClockFixture(t *testing.T) *clockFixture {
	t.Helper()
	cf := &clockFixture{now: time.Date(2026, 3, 1, 10, 0, 0, 300e6, time.UTC)}
	s := &fakeSender{}
	a, err := New(Params{
		Sources: eventingfake.NewSimpleClientset(), Kube: kubefake.NewClientset(), Sender: s,
		Spread: -1, Now: cf.clock,
	})
	if err != nil {
		t.Fatal(err)
	}
	a.buckets = Buckets(kle.ComponentConfig{Component: Component, Buckets: 1})
	a.sendCtx, a.catchUpBound = t.Context(), 15*time.Second
	cf.fixture = &fixture{a: a, sender: s, buckets: a.buckets, ctx: t.Context()}
	cf.upsert(pingSource("tenant", "even", evenSeconds))
	return cf
}

func (cf *clockFixture) clock() time.Time {
	cf.mu.Lock()
	defer cf.mu.Unlock()
	return cf.now
}

func (cf *clockFixture) set(t time.Time) {
	cf.mu.Lock()
	defer cf.mu.Unlock()
	cf.now = t
}

// times waits for every send started and returns the event times sent.
func (cf *clockFixture) times() []time.Time {
	cf.a.sends.Wait()
	cf.sender.mu.Lock()
	defer cf.sender.mu.Unlock()
	var out []time.Time
	for _, e := range cf.sender.events {
		out = append(out, e.Time())
	}
	slices.SortFunc(out, time.Time.Compare)
	return out
}

func at(sec, ms int) time.Time { return time.Date(2026, 3, 1, 10, 0, sec, ms*1e6, time.UTC) }

func TestNextHolderFiresTheTicksDueWhileTheLeaseWasFree(t *testing.T) {
	cf := newClockFixture(t)
	cf.set(at(5, 300))
	// The last holder fired through 10:00:00.500: the ticks of 10:00:02
	// and 10:00:04 fell while the Lease was free.
	cf.a.promote(cf.buckets[0], cf.ctx, at(0, 500))
	if got, want := cf.times(), []time.Time{at(2, 0), at(4, 0)}; !slices.Equal(got, want) {
		t.Errorf("caught up %v, want %v (each stamped with its due time)", got, want)
	}
	// The cron's next run is the first tick after the promotion.
	cf.set(at(6, 10))
	if n := cf.fireAll(); n != 1 {
		t.Errorf("the tick of 10:00:06 sent %d events, want 1", n)
	}
}

func TestNoCatchUpWithoutAFreshMark(t *testing.T) {
	for _, tc := range []struct {
		name string
		mark time.Time
	}{
		{name: "no mark: the last holder died", mark: time.Time{}},
		{name: "free longer than a lease duration", mark: at(5, 300).Add(-16 * time.Second)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cf := newClockFixture(t)
			cf.set(at(5, 300))
			cf.a.promote(cf.buckets[0], cf.ctx, tc.mark)
			if got := cf.times(); len(got) != 0 {
				t.Errorf("sent %v, want nothing", got)
			}
		})
	}
}

// A loaded cron runs a tick late: a bucket given up before the cron ran
// its tick still fires it, once, and its mark is the moment it stopped.
func TestGivingUpFiresTheTicksDueAndMarksTheLease(t *testing.T) {
	cf := newClockFixture(t)
	term, end := context.WithCancel(cf.ctx)
	defer end()
	cf.a.promote(cf.buckets[0], term, time.Time{}) // next tick 10:00:02
	cf.set(at(2, 400))                             // due, not run by the cron yet
	cf.a.demote(cf.buckets[0], term)
	if got, want := len(cf.times()), 1; got != want {
		t.Fatalf("giving up sent %d events, want %d", got, want)
	}
	if mark, ok := cf.a.firedThrough(cf.buckets[0]); !ok || !mark.Equal(at(2, 400)) {
		t.Errorf("mark = %v, %v; want %v", mark, ok, at(2, 400))
	}
	cf.a.fire(cf.ctx, cf.a.jobs[types.NamespacedName{Namespace: "tenant", Name: "even"}]) // the cron's late run
	if got := len(cf.times()); got != 1 {
		t.Errorf("the cron's late run sent again: %d events in all, want 1", got)
	}
	// Led again, the mark is gone: a later release carries a new one.
	cf.a.promote(cf.buckets[0], cf.ctx, time.Time{})
	if _, ok := cf.a.firedThrough(cf.buckets[0]); ok {
		t.Error("a bucket led again still has the mark of the last hand-over")
	}
}

func TestStoppingHandsOverAtOnce(t *testing.T) {
	cf := newClockFixture(t)
	cf.a.promote(cf.buckets[0], cf.ctx, time.Time{})
	cf.set(at(2, 100))
	cf.a.mu.Lock()
	cf.a.stopping = true
	cf.a.handOverAllLocked()
	cf.a.mu.Unlock()
	if got := len(cf.times()); got != 1 {
		t.Errorf("stopping sent %d events, want the tick due (1)", got)
	}
	if mark, ok := cf.a.firedThrough(cf.buckets[0]); !ok || !mark.Equal(at(2, 100)) {
		t.Errorf("mark = %v, %v; want %v", mark, ok, at(2, 100))
	}
	// A bucket taken while stopping fires nothing and passes on the mark
	// it came with.
	other := Buckets(kle.ComponentConfig{Component: Component, Buckets: 2})[1]
	cf.a.promote(other, cf.ctx, at(1, 0))
	if mark, _ := cf.a.firedThrough(other); !mark.Equal(at(1, 0)) {
		t.Errorf("mark passed on = %v, want %v", mark, at(1, 0))
	}
}

func TestHandoverLockCarriesTheMark(t *testing.T) {
	ctx := t.Context()
	kc := kubefake.NewClientset()
	leases := kc.CoordinationV1().Leases("knative-eventing")
	mark := time.Date(2026, 3, 1, 10, 0, 2, 123456789, time.UTC)
	newLock := func(id string, through *time.Time) *handoverLock {
		return &handoverLock{client: kc.CoordinationV1(), namespace: "knative-eventing", name: "bucket", identity: id,
			firedThrough: func() (time.Time, bool) {
				if through == nil {
					return time.Time{}, false
				}
				return *through, true
			}}
	}
	// record is what client-go writes: the count of holders so far.
	record := func(holder string, transitions int) resourcelock.LeaderElectionRecord {
		now := metav1.NewTime(time.Now())
		return resourcelock.LeaderElectionRecord{HolderIdentity: holder, LeaseDurationSeconds: 15, AcquireTime: now, RenewTime: now,
			LeaderTransitions: transitions}
	}
	lease := func() *coordinationv1.Lease {
		l, err := leases.Get(ctx, "bucket", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	step := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	acquire := func(l *handoverLock, transitions int) time.Time {
		t.Helper()
		_, _, err := l.Get(ctx)
		step(l.identity+" reads", err)
		step(l.identity+" acquires", l.Update(ctx, record(l.identity, transitions)))
		return l.takeInherited()
	}

	a, b, c := newLock("a", &mark), newLock("b", nil), newLock("c", &mark)
	step("a creates", a.Create(ctx, record("a", 0)))
	if got := lease().Labels[PartOfLabel]; got != PartOfValue {
		t.Errorf("created Lease labelled %s=%q, want %q: the uninstall finds it by that", PartOfLabel, got, PartOfValue)
	}
	if got := a.takeInherited(); !got.IsZero() {
		t.Errorf("a created the Lease and inherited %v", got)
	}
	step("a renews", a.Update(ctx, record("a", 0)))
	step("a releases", a.Update(ctx, record("", 0)))
	if got, ok := FiredThrough(lease()); !ok || !got.Equal(mark) {
		t.Errorf("released Lease's mark = %v, %v; want %v (%v)", got, ok, mark, lease().Annotations)
	}

	if got := acquire(b, 1); !got.Equal(mark) {
		t.Errorf("b inherited %v, want %v", got, mark)
	}
	if got := b.takeInherited(); !got.IsZero() {
		t.Errorf("the mark was taken twice: %v", got)
	}
	if _, ok := lease().Annotations[HandoverAnnotation]; ok {
		t.Error("the acquisition left the mark on the Lease")
	}

	// b still fires when it releases (a failed renewal): no mark.
	step("b releases", b.Update(ctx, record("", 1)))
	if got := acquire(c, 2); !got.IsZero() {
		t.Errorf("c inherited %v from a release without a mark", got)
	}

	// Another elector (upstream's adapter: client-go's LeaseLock, which
	// keeps annotations) takes the Lease c released and releases it: the
	// mark it kept is not its own.
	step("c releases", c.Update(ctx, record("", 2)))
	l := lease()
	l.Spec.HolderIdentity, l.Spec.LeaseTransitions = ptr("upstream"), ptr(int32(3))
	l, err := leases.Update(ctx, l, metav1.UpdateOptions{})
	step("upstream acquires", err)
	l.Spec.HolderIdentity = ptr("")
	_, err = leases.Update(ctx, l, metav1.UpdateOptions{})
	step("upstream releases", err)
	if got := acquire(a, 4); !got.IsZero() {
		t.Errorf("a inherited %v, the mark of a release before upstream's", got)
	}

	// A holder that died leaves no release: its Lease expires, and a mark
	// on a Lease someone holds counts for nothing.
	l = lease()
	l.Annotations = map[string]string{HandoverAnnotation: `{"firedThrough":"2026-03-01T10:00:02Z","leaseTransitions":4}`}
	_, err = leases.Update(ctx, l, metav1.UpdateOptions{})
	step("a mark on a held Lease", err)
	if got := acquire(b, 5); !got.IsZero() {
		t.Errorf("b inherited %v from an expired holder", got)
	}
}

// A cron that wakes a period late or more runs one tick and skips the
// ones due meanwhile: the adapter sends them too, every tick of that run
// stamped with its due time.
func TestALateCronSendsTheTicksItSkipped(t *testing.T) {
	cf := newClockFixture(t)
	cf.a.promote(cf.buckets[0], cf.ctx, time.Time{}) // next tick 10:00:02
	cf.set(at(7, 200))                               // 10:00:02, :04 and :06 due
	if n := cf.fireAll(); n < 1 {
		t.Fatalf("the cron's late run sent %d events at once, want its own", n)
	}
	if got, want := cf.times(), []time.Time{at(2, 0), at(4, 0), at(6, 0)}; !slices.EqualFunc(got, want, time.Time.Equal) {
		t.Errorf("sent %v, want %v", got, want)
	}
	cf.set(at(8, 5))
	if n := cf.fireAll(); n != 1 {
		t.Errorf("the tick of 10:00:08 sent %d events, want 1", n)
	}
}

// Ticks skipped more than a lease duration ago are not sent: the
// bucket's Lease may have passed to another replica meanwhile.
func TestALateCronSendsNothingOlderThanALeaseDuration(t *testing.T) {
	cf := newClockFixture(t)
	core, logs := observer.New(zap.WarnLevel)
	cf.a.p.Logger = zap.New(core).Sugar()
	cf.a.promote(cf.buckets[0], cf.ctx, time.Time{}) // next tick 10:00:02
	cf.set(at(22, 500))                              // 15 s back is 10:00:07.5
	cf.fireAll()
	got := cf.times()
	want := []time.Time{at(8, 0), at(10, 0), at(12, 0), at(14, 0), at(16, 0), at(18, 0), at(20, 0), at(22, 0)}
	if !slices.EqualFunc(got, want, time.Time.Equal) {
		t.Errorf("sent %v, want %v", got, want)
	}
	// The ticks of 10:00:02 to :06 are lost, and said so.
	notSent := logs.FilterMessageSnippet("were not sent").All()
	if len(notSent) != 1 {
		t.Fatalf("%d lines about the ticks not sent, want 1: %v", len(notSent), logs.All())
	}
	fields := notSent[0].ContextMap()
	from, _ := fields["from"].(time.Time)
	before, _ := fields["before"].(time.Time)
	if !from.Equal(at(2, 0)) || !before.Equal(at(8, 0)) {
		t.Errorf("not sent from %v before %v, want %v and %v", from, before, at(2, 0), at(8, 0))
	}
}

// A bucket given up while its cron is a period late or more fires every
// tick due by then, once.
func TestGivingUpFiresEveryTickALateCronSkipped(t *testing.T) {
	cf := newClockFixture(t)
	term, end := context.WithCancel(cf.ctx)
	defer end()
	cf.a.promote(cf.buckets[0], term, time.Time{}) // next tick 10:00:02
	cf.set(at(5, 0))
	cf.a.demote(cf.buckets[0], term)
	cf.a.fire(cf.ctx, cf.a.jobs[types.NamespacedName{Namespace: "tenant", Name: "even"}]) // the cron's late run
	if got, want := cf.times(), []time.Time{at(2, 0), at(4, 0)}; !slices.EqualFunc(got, want, time.Time.Equal) {
		t.Errorf("sent %v, want %v", got, want)
	}
}
