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
	"sync"
	"testing"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	"knative.dev/pkg/apis"
	kle "knative.dev/pkg/leaderelection"
	"knative.dev/pkg/reconciler"

	"knative.dev/event-forwarding-proxy/adapter"

	sourcesv1 "knative.dev/eventing/pkg/apis/sources/v1"
	eventingfake "knative.dev/eventing/pkg/client/clientset/versioned/fake"
)

// fakeSender records sends and the source counts it is told.
type fakeSender struct {
	mu     sync.Mutex
	events []event.Event
	target []adapter.Target
	counts []int
}

func (f *fakeSender) Send(_ context.Context, t adapter.Target, e event.Event) (*adapter.Result, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.events, f.target = append(f.events, e), append(f.target, t)
	return &adapter.Result{StatusCode: 202}, nil
}

func (f *fakeSender) SetDirectSources(n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.counts = append(f.counts, n)
}

func (f *fakeSender) sent() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.events)
}

func (f *fakeSender) lastCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.counts) == 0 {
		return 0
	}
	return f.counts[len(f.counts)-1]
}

// fixture is an Adapter that is not Run: the test plays the informer and
// the elector, and fires the ticks itself.
type fixture struct {
	a       *Adapter
	sender  *fakeSender
	buckets []reconciler.Bucket
	ctx     context.Context
}

var fixedNow = time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)

func newFixture(t *testing.T, sources int) *fixture {
	t.Helper()
	s := &fakeSender{}
	a, err := New(Params{
		Sources: eventingfake.NewSimpleClientset(), Kube: kubefake.NewClientset(), Sender: s,
		Spread: -1, Now: func() time.Time { return fixedNow },
	})
	if err != nil {
		t.Fatal(err)
	}
	cc := kle.ComponentConfig{Component: Component, Buckets: 2}
	a.buckets = Buckets(cc)
	a.sendCtx = t.Context()
	f := &fixture{a: a, sender: s, buckets: a.buckets, ctx: t.Context()}
	for i := range sources {
		f.upsert(pingSource("tenant", fmt.Sprintf("s%02d", i)))
	}
	return f
}

func (f *fixture) upsert(s *sourcesv1.PingSource) { f.a.upsert(f.ctx, s) }

// inBucket counts the known sources in bucket i.
func (f *fixture) inBucket(i int) int {
	n := 0
	for key := range f.a.jobs {
		if f.buckets[i].Has(key) {
			n++
		}
	}
	return n
}

// fireAll runs one tick of every scheduled source and returns how many
// events were sent.
func (f *fixture) fireAll() int {
	f.a.mu.Lock()
	var fires []func()
	for _, e := range f.a.entries {
		fires = append(fires, e.job.fire)
	}
	f.a.mu.Unlock()
	before := f.sender.sent()
	for _, fire := range fires {
		fire()
	}
	return f.sender.sent() - before
}

func (f *fixture) entries() int {
	f.a.mu.Lock()
	defer f.a.mu.Unlock()
	return len(f.a.entries)
}

func TestAdapterFiresWhatItLeads(t *testing.T) {
	tests := []struct {
		name string
		run  func(t *testing.T, f *fixture)
	}{{
		name: "nothing before a promotion",
		run: func(t *testing.T, f *fixture) {
			if n := f.fireAll(); n != 0 || f.entries() != 0 {
				t.Errorf("sent %d, scheduled %d; want none", n, f.entries())
			}
		},
	}, {
		// The threshold counts the cluster's direct sources: a replica
		// that leads no bucket, or one, counts them all.
		name: "every replica counts every source it sees served",
		run: func(t *testing.T, f *fixture) {
			if n := f.sender.lastCount(); n != 20 {
				t.Errorf("leading no bucket: told %d sources, want 20", n)
			}
			f.a.promote(f.buckets[0], f.ctx, time.Time{})
			f.a.demote(f.buckets[0], f.ctx)
			if n := f.sender.lastCount(); n != 20 {
				t.Errorf("after leading a bucket: told %d sources, want 20", n)
			}
			f.a.forget(pingSource("tenant", "s03"))
			if n := f.sender.lastCount(); n != 19 {
				t.Errorf("after a delete: told %d sources, want 19", n)
			}
		},
	}, {
		name: "a promoted bucket fires its sources once per tick",
		run: func(t *testing.T, f *fixture) {
			f.a.promote(f.buckets[0], f.ctx, time.Time{})
			want := f.inBucket(0)
			if want == 0 || want == 20 {
				t.Fatalf("bucket 0 has %d of 20 sources: hashing does not split", want)
			}
			if n := f.fireAll(); n != want || f.sender.lastCount() != 20 {
				t.Errorf("sent %d, told %d sources; want %d sent, 20 told", n, f.sender.lastCount(), want)
			}
			ids := map[string]bool{}
			for i, e := range f.sender.events {
				key := types.NamespacedName{Namespace: f.sender.target[i].Namespace, Name: e.Source()[len("/apis/v1/namespaces/tenant/pingsources/"):]}
				if !f.buckets[0].Has(key) || ids[e.ID()] || !e.Time().Equal(fixedNow) {
					t.Errorf("event %d: key %s in bucket 0 %v, id %q seen %v, time %v", i, key, f.buckets[0].Has(key), e.ID(), ids[e.ID()], e.Time())
				}
				ids[e.ID()] = true
			}
		},
	}, {
		name: "both buckets fire every source",
		run: func(t *testing.T, f *fixture) {
			f.a.promote(f.buckets[0], f.ctx, time.Time{})
			f.a.promote(f.buckets[1], f.ctx, time.Time{})
			if n := f.fireAll(); n != 20 {
				t.Errorf("sent %d, want 20", n)
			}
		},
	}, {
		name: "demotion stops the bucket, even a tick already chosen",
		run: func(t *testing.T, f *fixture) {
			f.a.promote(f.buckets[0], f.ctx, time.Time{})
			f.a.promote(f.buckets[1], f.ctx, time.Time{})
			f.a.mu.Lock()
			var chosen []func()
			for _, e := range f.a.entries {
				chosen = append(chosen, e.job.fire)
			}
			f.a.mu.Unlock()
			f.a.demote(f.buckets[0], f.ctx)
			for _, fire := range chosen {
				fire()
			}
			if got, want := f.sender.sent(), f.inBucket(1); got != want || f.sender.lastCount() != 20 {
				t.Errorf("sent %d, told %d; want %d sent, 20 told", got, f.sender.lastCount(), want)
			}
		},
	}, {
		name: "a stale term's demotion changes nothing",
		run: func(t *testing.T, f *fixture) {
			old, end := context.WithCancel(f.ctx)
			end()
			f.a.promote(f.buckets[0], f.ctx, time.Time{})
			f.a.demote(f.buckets[0], old)
			if f.entries() != f.inBucket(0) {
				t.Errorf("scheduled %d, want %d", f.entries(), f.inBucket(0))
			}
		},
	}, {
		name: "a term that ended before its promotion does not fire",
		run: func(t *testing.T, f *fixture) {
			term, end := context.WithCancel(f.ctx)
			end()
			f.a.promote(f.buckets[0], term, time.Time{})
			if n := f.fireAll(); n != 0 {
				t.Errorf("sent %d, want 0", n)
			}
		},
	}, {
		name: "an unchanged update keeps the schedule, a change replaces it",
		run: func(t *testing.T, f *fixture) {
			f.a.promote(f.buckets[0], f.ctx, time.Time{})
			f.a.promote(f.buckets[1], f.ctx, time.Time{})
			key := types.NamespacedName{Namespace: "tenant", Name: "s00"}
			id := f.a.entries[key].id
			s := pingSource("tenant", "s00")
			s.Status.ObservedGeneration = 3
			f.upsert(s)
			if f.a.entries[key].id != id {
				t.Error("an update that changes nothing rescheduled the source")
			}
			s.Spec.Data = `{"n":2}`
			f.upsert(s)
			if f.a.entries[key].id == id || string(f.a.entries[key].job.event.Data()) != `{"n":2}` {
				t.Error("a data change did not reschedule the source")
			}
		},
	}, {
		name: "deleted, tombstoned and finalizing sources stop, one no longer Ready fires on",
		run: func(t *testing.T, f *fixture) {
			f.a.promote(f.buckets[0], f.ctx, time.Time{})
			f.a.promote(f.buckets[1], f.ctx, time.Time{})
			notReady := pingSource("tenant", "s00")
			notReady.Status.MarkNoSink("Gone", "")
			f.upsert(notReady)
			f.a.forget(pingSource("tenant", "s01"))
			f.a.forget(cache.DeletedFinalStateUnknown{Key: "tenant/s02", Obj: pingSource("tenant", "s02")})
			// Deleted but not yet finalized by Eventing's controller.
			f.upsert(pingSource("tenant", "s03", func(s *sourcesv1.PingSource) {
				s.DeletionTimestamp = &metav1.Time{Time: time.Now()}
				s.Finalizers = []string{"pingsources.sources.knative.dev"}
			}))
			if n := f.fireAll(); n != 17 || f.sender.lastCount() != 17 {
				t.Errorf("sent %d, told %d; want 17", n, f.sender.lastCount())
			}
		},
	}, {
		name: "Deployed Unknown on every source, as while a replica starts: changes and new sources take effect",
		run: func(t *testing.T, f *fixture) {
			f.a.promote(f.buckets[0], f.ctx, time.Time{})
			f.a.promote(f.buckets[1], f.ctx, time.Time{})
			updating := conditions(corev1.ConditionTrue, corev1.ConditionUnknown, corev1.ConditionTrue)
			moved := pingSource("tenant", "s00", updating, func(s *sourcesv1.PingSource) {
				s.Status.SinkURI, _ = apis.ParseURL("http://moved.tenant/")
			})
			f.upsert(moved)
			f.upsert(pingSource("tenant", "new", updating))
			if n := f.fireAll(); n != 21 {
				t.Errorf("sent %d, want the 20 sources and the new one", n)
			}
			key := types.NamespacedName{Namespace: "tenant", Name: "s00"}
			if got := f.a.entries[key].job.spec.sink; got != "http://moved.tenant/" {
				t.Errorf("s00 fires at %s, want its new sink", got)
			}
		},
	}, {
		name: "a source never Ready is not scheduled",
		run: func(t *testing.T, f *fixture) {
			f.a.promote(f.buckets[0], f.ctx, time.Time{})
			f.a.promote(f.buckets[1], f.ctx, time.Time{})
			fresh := pingSource("tenant", "new")
			fresh.Status.MarkNoSink("NotFound", "")
			f.upsert(fresh)
			if _, ok := f.a.jobs[types.NamespacedName{Namespace: "tenant", Name: "new"}]; ok {
				t.Error("a source never Ready was scheduled")
			}
			if n := f.fireAll(); n != 20 {
				t.Errorf("sent %d, want the 20 Ready sources", n)
			}
		},
	}, {
		name: "nothing fires once stopping",
		run: func(t *testing.T, f *fixture) {
			f.a.promote(f.buckets[0], f.ctx, time.Time{})
			f.a.stopping = true
			if n := f.fireAll(); n != 0 {
				t.Errorf("sent %d, want 0", n)
			}
		},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.run(t, newFixture(t, 20))
		})
	}
}
