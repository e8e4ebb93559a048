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
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/robfig/cron/v3"
	"go.uber.org/zap"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"knative.dev/pkg/kmeta"
	"knative.dev/pkg/reconciler"

	sourcesv1 "knative.dev/eventing/pkg/apis/sources/v1"
	"knative.dev/eventing/pkg/client/informers/externalversions"
)

// watch starts the PingSource informer and returns once it has listed
// every source (or with an error when ctx ends first). Sends made by the
// ticks use sendCtx.
func (a *Adapter) watch(ctx, sendCtx context.Context) error {
	f := externalversions.NewSharedInformerFactory(a.p.Sources, a.p.Resync)
	inf := f.Sources().V1().PingSources().Informer()
	_, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { a.upsert(sendCtx, obj) },
		UpdateFunc: func(_, obj any) { a.upsert(sendCtx, obj) },
		DeleteFunc: a.forget,
	})
	if err != nil {
		return err
	}
	f.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		return fmt.Errorf("listing PingSources: %w", context.Cause(ctx))
	}
	return nil
}

// upsert records a new or changed PingSource and, when this replica leads
// its bucket, (re)schedules it.
func (a *Adapter) upsert(sendCtx context.Context, obj any) {
	src, ok := obj.(*sourcesv1.PingSource)
	if !ok {
		return
	}
	if src.DeletionTimestamp != nil {
		// Deleted: it stops now, not once Eventing's controller has
		// removed its finalizer, which a busy controller (thousands of
		// sources to make Ready) may take minutes to do.
		a.forget(src)
		return
	}
	key := types.NamespacedName{Namespace: src.Namespace, Name: src.Name}
	j, err := newJob(src)
	if err == nil {
		j.fire = func() { a.fire(sendCtx, j) }
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if errors.Is(err, errNotServed) {
		// A source whose sink stops resolving keeps the schedule and sink
		// it had, as upstream's adapter keeps it. One never served is not
		// scheduled; a deleted one stops (forget).
		return
	}
	if err != nil {
		a.p.Logger.Errorw("PingSource cannot be scheduled", zap.Stringer("pingsource", key), zap.Error(err))
		delete(a.jobs, key)
		a.unscheduleLocked(key)
		a.p.Sender.SetDirectSources(len(a.jobs))
		return
	}
	a.jobs[key] = j
	a.p.Sender.SetDirectSources(len(a.jobs))
	if a.leadsLocked(key) {
		a.scheduleLocked(j)
	}
}

// forget stops a deleted PingSource.
func (a *Adapter) forget(obj any) {
	acc, err := kmeta.DeletionHandlingAccessor(obj)
	if err != nil {
		return
	}
	key := types.NamespacedName{Namespace: acc.GetNamespace(), Name: acc.GetName()}
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.jobs, key)
	a.unscheduleLocked(key)
	a.p.Sender.SetDirectSources(len(a.jobs))
}

// promote starts a term of leadership of b: its sources start firing.
// After a graceful hand-over (firedThrough set) it first fires the ticks
// due since the last holder stopped, which no replica fired meanwhile.
func (a *Adapter) promote(b reconciler.Bucket, term context.Context, firedThrough time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if term.Err() != nil {
		return // the term ended before it started here
	}
	if a.stopping {
		// Taken while this replica stops: it fires nothing and passes the
		// mark it inherited on to the next holder.
		if !firedThrough.IsZero() {
			a.handedOver[b.Name()] = firedThrough
		}
		return
	}
	a.terms[b.Name()] = term //nolint:fatcontext // kept per bucket until its term ends, not derived again
	delete(a.handedOver, b.Name())
	caught := a.catchUpLocked(b, firedThrough)
	n := 0
	for key, j := range a.jobs {
		if b.Has(key) {
			a.scheduleLocked(j)
			n++
		}
	}
	a.p.Logger.Infow("Leading a bucket", zap.String("lease", b.Name()), zap.Int("sources", n), zap.Int("caughtUp", caught))
}

// demote ends a term of leadership of b: its sources stop firing. Every
// tick due by then fires here (handOverLocked), so that the next holder
// can take over from that instant.
func (a *Adapter) demote(b reconciler.Bucket, term context.Context) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.terms[b.Name()] != term {
		return // a later term has begun, or this one never did
	}
	if !a.stopping { // shutdown handed every bucket over already
		a.handOverLocked(b, a.p.Now())
	}
	delete(a.terms, b.Name())
	for key := range a.entries {
		if b.Has(key) {
			a.unscheduleLocked(key)
		}
	}
	a.p.Logger.Infow("No longer leading a bucket", zap.String("lease", b.Name()))
}

// leadsLocked reports whether this replica leads the bucket of key.
func (a *Adapter) leadsLocked(key types.NamespacedName) bool {
	for _, b := range a.buckets {
		if b.Has(key) {
			term := a.terms[b.Name()]
			return term != nil && term.Err() == nil
		}
	}
	return false
}

// scheduleLocked puts j on the cron, replacing an older version of the
// same source unless nothing the adapter uses changed (then the schedule
// keeps its phase).
func (a *Adapter) scheduleLocked(j *job) {
	if e, ok := a.entries[j.key]; ok {
		if e.job.spec == j.spec {
			return
		}
		a.cron.Remove(e.id)
	}
	j.due.Store(j.schedule.Next(a.p.Now()).UnixNano())
	id := a.cron.Schedule(j.schedule, cron.FuncJob(j.fire))
	a.entries[j.key] = entry{id: id, job: j}
}

// unscheduleLocked takes key's job off the cron.
func (a *Adapter) unscheduleLocked(key types.NamespacedName) {
	e, ok := a.entries[key]
	if !ok {
		return
	}
	a.cron.Remove(e.id)
	delete(a.entries, key)
}

// fire is the cron's run of j: its tick, a fresh event (new id, time
// now) sent to its sink, and before it the ticks a late cron skipped
// (due.go), unless j was replaced, its bucket lost or the adapter is
// stopping since the cron chose to run it, or upstream's adapter fires it
// (its gate is held there).
func (a *Adapter) fire(ctx context.Context, j *job) {
	a.mu.Lock()
	now := a.p.Now()
	dues := a.claimLocked(j, now)
	if len(dues) == 0 {
		// A run earlier than planned (the clock was set back): count from
		// its second, the cron's resolution, and the next from now.
		j.due.Store(j.schedule.Next(now).UnixNano())
		dues = []time.Time{now.Truncate(time.Second)}
	}
	e, ok := a.entries[j.key]
	if a.stopping || !ok || e.job != j || !a.leadsLocked(j.key) || !a.gateOpenLocked(j.key) {
		a.mu.Unlock()
		return
	}
	due, at := a.sendOverdueLocked(j, dues, now)
	a.sends.Add(1)
	a.mu.Unlock()
	a.send(ctx, j, due, at)
}

// send sends the tick of j due at due, for which sends.Add(1) was called.
// The event's time is at, or the moment it is sent when at is zero.
func (a *Adapter) send(ctx context.Context, j *job, due, at time.Time) {
	defer a.sends.Done()
	a.inflight.Add(1)
	defer a.inflight.Add(-1)

	if a.p.Spread > 0 {
		t := time.NewTimer(time.Duration(a.p.Rand(int64(a.p.Spread))))
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return
		}
	}
	ev := j.event.Clone()
	ev.SetID(uuid.NewString())
	if at.IsZero() {
		at = a.p.Now()
	}
	ev.SetTime(at)
	a.metrics.late(ctx, a.p.Now().Sub(due))
	// The sender logs what it could not deliver.
	_, _ = a.p.Sender.Send(ctx, j.target, ev)
}
