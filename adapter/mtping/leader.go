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
	"sync"
	"time"

	"go.uber.org/zap"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"knative.dev/pkg/hash"
	kle "knative.dev/pkg/leaderelection"
	"knative.dev/pkg/reconciler"
)

// Lease names are upstream's (knative.dev/pkg's standard builder, for
// eventing's mt-ping reconciler), so that during a rollout from upstream's
// image to this one, or back, old and new pods compete for the same leases
// and a bucket never fires from both.
const (
	// Component is upstream's adapter name, the first part of a lease name.
	Component = "pingsource-mt-adapter"
	// QueueName is upstream's reconciler type, the middle part.
	QueueName = "knative.dev.eventing.pkg.adapter.mtping.Reconciler"
)

// Buckets returns the buckets of cc (with its lease names) in the order
// of their leases: knative.dev/pkg's consistent hashing of namespace/name,
// as every Knative controller and upstream's adapter use.
func Buckets(cc kle.ComponentConfig) []reconciler.Bucket {
	names := make(sets.Set[string], cc.Buckets)
	for i := range cc.Buckets {
		names.Insert(LeaseName(cc, i))
	}
	return hash.NewBucketSet(names).Buckets()
}

// LeaseName is the name of lease i, as knative.dev/pkg's standard builder
// writes it: <component>.<queue>.<ii>-of-<nn>, lower case, with the prefix
// replaced when map-lease-prefix names it.
func LeaseName(cc kle.ComponentConfig, i uint32) string {
	prefix := cc.Component + "." + QueueName
	if v := cc.LeaseNamesPrefixMapping[prefix]; v != "" {
		prefix = v
	}
	return strings.ToLower(fmt.Sprintf("%s.%02d-of-%02d", prefix, i, cc.Buckets))
}

// elector runs one Lease election per bucket, as knative.dev/pkg's
// standard builder does, but with the lease namespace given rather than
// read from the process environment, with promotion and demotion of a
// bucket in order (each term's Promote happens before its Demote, on the
// term's own context), and with the buckets shared evenly between the
// replicas (balancer): a replica stands for a free bucket only while it
// leads fewer than its share, and gives up what it leads above it.
type elector struct {
	kc        kubernetes.Interface
	namespace string
	cc        kle.ComponentConfig
	buckets   []reconciler.Bucket
	// gates are upstream's buckets (gate.go): every replica stands for
	// each, unbalanced, but for one that is also a bucket of cc.
	gates []reconciler.Bucket
	// promote is called when a term starts, with the fired-through mark
	// of the release it follows (zero if none); demote when it ends, with
	// the same context (done by then), or before, when the bucket is given
	// up.
	promote func(b reconciler.Bucket, term context.Context, firedThrough time.Time)
	demote  func(b reconciler.Bucket, term context.Context)
	// firedThrough says through when this replica fired b's sources, once
	// it has stopped firing them (HandoverAnnotation).
	firedThrough func(b reconciler.Bucket) (time.Time, bool)
	// handoverWait is how long to wait before giving up b, so that a tick
	// due meanwhile fires here rather than in the gap before another
	// replica takes b. If nil, no wait.
	handoverWait func(b reconciler.Bucket) time.Duration
	log          *zap.SugaredLogger
}

// run takes part in every bucket's election until ctx ends, then releases
// its member slot, then the leases it holds, and returns. After a lost or
// given-up term it stands again when its share allows.
func (e *elector) run(ctx context.Context) error {
	names := make([]string, len(e.buckets))
	byName := make(map[string]reconciler.Bucket, len(e.buckets))
	for i, b := range e.buckets {
		names[i], byName[b.Name()] = b.Name(), b
	}
	bal := newBalancer(e.cc.Identity, names, e.cc.LeaseDuration, e.cc.RetryPeriod, time.Now)
	les := make([]*leaderelection.LeaderElector, 0, len(e.buckets))
	for _, b := range e.buckets {
		lock := &handoverLock{client: e.kc.CoordinationV1(), namespace: e.namespace, name: b.Name(), identity: e.cc.Identity,
			firedThrough: func() (time.Time, bool) { return e.firedThrough(b) }}
		le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
			Lock:          &gatedLock{Interface: lock, name: b.Name(), bal: bal},
			LeaseDuration: e.cc.LeaseDuration,
			RenewDeadline: e.cc.RenewDeadline,
			RetryPeriod:   e.cc.RetryPeriod,
			Callbacks: leaderelection.LeaderCallbacks{
				// Called in a goroutine of its own; term ends when the
				// term does (after the lease is renewed no more).
				OnStartedLeading: func(term context.Context) {
					bal.started(b.Name(), term)
					e.promote(b, term, lock.takeInherited())
					<-term.Done()
					e.demote(b, term)
				},
				OnStoppedLeading: func() {},
			},
			ReleaseOnCancel: true,
			Name:            e.cc.Identity,
		})
		if err != nil {
			return err
		}
		les = append(les, le)
	}
	gates, err := e.gateElectors(byName)
	if err != nil {
		return err
	}
	members := newMemberSlots(e.kc, e.namespace, e.cc, time.Now)
	changed, err := watchMemberSlots(ctx, e.kc, e.namespace, e.cc.Component)
	if err != nil {
		return err
	}
	// The bucket Leases are released after the member slot: a standby that
	// sees a bucket free then no longer counts this replica in the shares,
	// and stands for every bucket at once rather than after its next look.
	elections, releaseBuckets := context.WithCancel(context.WithoutCancel(ctx))
	defer releaseBuckets()
	defer context.AfterFunc(ctx, bal.stop)()
	var wg sync.WaitGroup
	for i, le := range les {
		wg.Go(func() {
			for ctx.Err() == nil {
				runCtx, end := context.WithCancel(elections)
				bal.running(names[i], end)
				le.Run(runCtx) // one term (or none, when ctx ends first)
				end()
				bal.ended(names[i])
			}
		})
	}
	for _, le := range gates {
		wg.Go(func() {
			for ctx.Err() == nil {
				le.Run(elections) // one term (or none, when ctx ends first)
			}
		})
	}
	wg.Go(func() {
		e.balance(ctx, bal, members, changed, byName)
		releaseBuckets()
	})
	wg.Wait()
	return nil
}

// gateElectors returns an election for each gate that is not one of the
// buckets. A term only holds the gate for this adapter's replicas: it
// fires nothing of its own.
func (e *elector) gateElectors(buckets map[string]reconciler.Bucket) ([]*leaderelection.LeaderElector, error) {
	var les []*leaderelection.LeaderElector
	for _, g := range e.gates {
		if _, isBucket := buckets[g.Name()]; isBucket {
			continue // held as a bucket of this adapter's
		}
		lock, err := resourcelock.New(resourcelock.LeasesResourceLock, e.namespace, g.Name(),
			e.kc.CoreV1(), e.kc.CoordinationV1(), resourcelock.ResourceLockConfig{Identity: e.cc.Identity})
		if err != nil {
			return nil, err
		}
		le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
			Lock:          lock,
			LeaseDuration: e.cc.LeaseDuration,
			RenewDeadline: e.cc.RenewDeadline,
			RetryPeriod:   e.cc.RetryPeriod,
			Callbacks: leaderelection.LeaderCallbacks{
				OnStartedLeading: func(context.Context) {
					e.log.Infow("Holding upstream's Lease for this adapter", zap.String("lease", g.Name()))
				},
				OnStoppedLeading: func() {},
			},
			ReleaseOnCancel: true,
			Name:            e.cc.Identity,
		})
		if err != nil {
			return nil, err
		}
		les = append(les, le)
	}
	return les, nil
}

// balance keeps this replica's member slot, reads the others' and gives
// up buckets above this replica's share, every retry period and whenever
// a slot changes hands (changed) until ctx ends; it then releases the
// slot.
func (e *elector) balance(ctx context.Context, bal *balancer, m *memberSlots, changed <-chan struct{}, byName map[string]reconciler.Bucket) {
	var wg sync.WaitGroup // the releases waiting for a tick
	defer wg.Wait()
	var lastErr string
	var lastLive []string
	report := func(err error) {
		switch {
		case err != nil && err.Error() != lastErr:
			e.log.Warnw("Member slots: the shares may be uneven until this clears", zap.Error(err))
			lastErr = err.Error()
		case err == nil && lastErr != "":
			e.log.Info("Member slots readable again")
			lastErr = ""
		}
	}
	look := func(ctx context.Context) {
		live, err := m.sync(ctx)
		if err == nil {
			bal.setMembers(live)
			if slices.Sort(live); !slices.Equal(live, lastLive) {
				e.log.Infow("Replicas sharing the buckets", zap.Strings("replicas", live))
				lastLive = live
			}
		}
		report(err)
		for _, r := range bal.surplus() {
			b := byName[r.name]
			var wait time.Duration
			if e.handoverWait != nil {
				wait = e.handoverWait(b)
			}
			e.log.Infow("Giving up a bucket to even the shares", zap.String("lease", r.name), zap.Duration("after", wait),
				zap.Int("led", r.held), zap.Int("buckets", r.view.buckets), zap.Int("replicas", len(r.view.members)))
			wg.Go(func() {
				select {
				case <-ctx.Done():
					return // the election's end releases every Lease
				case <-time.After(wait):
				}
				e.demote(b, r.term) // stop firing before the Lease is free
				r.end()
			})
		}
	}
	for ctx.Err() == nil {
		look(ctx)
		next := time.NewTimer(wait.Jitter(e.cc.RetryPeriod, leaderelection.JitterFactor))
		select {
		case <-ctx.Done():
		case <-next.C:
		case <-changed:
		}
		next.Stop()
	}
	leaveCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), e.cc.RenewDeadline)
	defer cancel()
	if err := m.leave(leaveCtx); err != nil {
		e.log.Warnw("Member slot not released: the others count this replica until it expires", zap.Error(err))
	}
}
