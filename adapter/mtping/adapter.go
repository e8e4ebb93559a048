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

// Package mtping is a multi-tenant PingSource adapter, a drop-in for
// upstream's pingsource-mt-adapter that sends through the event-forwarding
// proxy (adapter.Sender) and shares its PingSources among replicas.
//
// It watches every PingSource in the cluster and fires those that are Ready
// with a status.sinkUri, exactly as upstream's adapter schedules them
// (robfig/cron, seconds optional, descriptors, CRON_TZ from spec.timezone)
// and with the same events. The sources are split into buckets by
// knative.dev/pkg's consistent hashing of namespace/name; each bucket is a
// Lease in the system namespace, and only its holder fires its sources.
// When a replica dies its leases expire and the others take them; when it
// stops gracefully it stops firing first, then releases its leases at once.
package mtping

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/robfig/cron/v3"
	"go.opentelemetry.io/otel/metric"
	"go.uber.org/zap"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection"
	kle "knative.dev/pkg/leaderelection"
	"knative.dev/pkg/reconciler"

	"knative.dev/eventing/pkg/client/clientset/versioned"

	"knative.dev/event-forwarding-proxy/adapter"
	"knative.dev/event-forwarding-proxy/config"
)

// Sender delivers one event; *adapter.Sender is one.
type Sender interface {
	Send(ctx context.Context, t adapter.Target, e event.Event) (*adapter.Result, error)
	// SetDirectSources is told how many PingSources the adapter fires in
	// all: every source this replica's informer sees served, whichever
	// replica leads its bucket. The threshold counts the cluster's direct
	// sources, so every replica switches at the same number, however many
	// replicas share them.
	SetDirectSources(n int)
}

var _ Sender = (*adapter.Sender)(nil)

// Params configure an Adapter.
type Params struct {
	// Sources reads PingSources (cluster-wide list and watch). Required.
	Sources versioned.Interface
	// Kube reads the adapter's ConfigMap and holds the Leases. Required.
	Kube kubernetes.Interface
	// Sender sends the events. Required.
	Sender Sender
	// Namespace holds the adapter's ConfigMap and the Leases. If empty,
	// knative-eventing.
	Namespace string
	// Identity names this replica in the Leases (followed by
	// IdentitySuffix); it must differ between replicas. If empty, the
	// host name.
	Identity string
	// LeaderElection sets the buckets and lease timings. If nil, Run reads
	// them from SettingsConfigMap in Namespace (LeaderElectionSettings).
	LeaderElection *kle.Config
	// Upstream is the election of upstream's adapter
	// (UpstreamLeaderElection): its bucket Leases are the gates between
	// the two adapters (gate.go). If nil, upstream's single bucket.
	Upstream *kle.ComponentConfig
	// Spread delays each send by a random time below it, so that sources
	// sharing a schedule do not all send at the same instant (upstream
	// does the same). If zero, 500 ms; if negative, none.
	Spread time.Duration
	// HandoverWindow: on shutdown, when one of this replica's sources is
	// due within it, the replica waits for that tick before it releases its
	// leases, so that the standby's takeover falls between ticks. If zero,
	// 3.2 retry periods (2.2, the longest a standby takes to notice a
	// released lease, and one for the API server's round trips: the
	// release, the standby's read and write) plus Spread; if negative, no
	// wait.
	HandoverWindow time.Duration
	// DrainTimeout bounds the wait for sends still running at shutdown;
	// then they are cancelled. If zero, 20 s.
	DrainTimeout time.Duration
	// Resync is the informer's resync period. If zero, none.
	Resync time.Duration

	// Logger logs. If nil, nothing is logged.
	Logger *zap.SugaredLogger
	// MeterProvider receives the adapter's metrics. If nil, none.
	MeterProvider metric.MeterProvider
	// Now is the clock of event times. If nil, time.Now.
	Now func() time.Time
	// Rand returns a number in [0, n) for the spread. If nil, math/rand/v2.
	Rand func(n int64) int64
}

func (p *Params) defaults() {
	if p.Namespace == "" {
		p.Namespace = config.DefaultSystemNamespace
	}
	if p.Identity == "" {
		p.Identity, _ = os.Hostname()
	}
	switch {
	case p.Spread == 0:
		p.Spread = 500 * time.Millisecond
	case p.Spread < 0:
		p.Spread = 0
	}
	if p.DrainTimeout <= 0 {
		p.DrainTimeout = 20 * time.Second
	}
	if p.Logger == nil {
		p.Logger = zap.NewNop().Sugar()
	}
	if p.Now == nil {
		p.Now = time.Now
	}
	if p.Rand == nil {
		p.Rand = rand.Int64N
	}
}

// Adapter fires the PingSources of the buckets it leads.
type Adapter struct {
	p       Params
	cron    *cron.Cron
	metrics *adapterMetrics
	ready   atomic.Bool

	mu      sync.Mutex
	buckets []reconciler.Bucket
	terms   map[string]context.Context // bucket name → the term this replica leads it in
	// gates are upstream's buckets; gateHolders, each one's holder as last
	// seen ("" while free).
	gates       []reconciler.Bucket
	gateHolders map[string]string
	jobs        map[types.NamespacedName]*job
	entries     map[types.NamespacedName]entry // the jobs this replica fires
	stopping    bool
	// handedOver holds, for each bucket this replica stopped firing and
	// has not led since, through when it fired it (handover.go).
	handedOver map[string]time.Time
	// catchUpBound is the longest a released bucket may stay free and
	// still have its ticks fired late by the next holder: a lease duration.
	catchUpBound time.Duration
	// sendCtx is the context of every send; cancelled at the drain deadline.
	sendCtx context.Context

	sends    sync.WaitGroup
	inflight atomic.Int64
}

// entry is a job on the cron.
type entry struct {
	id  cron.EntryID
	job *job
}

// New returns an Adapter; Run starts it.
func New(p Params) (*Adapter, error) {
	if p.Sources == nil || p.Kube == nil || p.Sender == nil {
		return nil, errors.New("mtping: Sources, Kube and Sender are required")
	}
	p.defaults()
	a := &Adapter{
		p:           p,
		cron:        cron.New(cron.WithParser(parser)),
		terms:       map[string]context.Context{},
		gateHolders: map[string]string{},
		jobs:        map[types.NamespacedName]*job{},
		entries:     map[types.NamespacedName]entry{},
		handedOver:  map[string]time.Time{},
	}
	m, err := newAdapterMetrics(p.MeterProvider, a)
	if err != nil {
		return nil, err
	}
	a.metrics = m
	return a, nil
}

// Ready reports whether the adapter has seen every PingSource and is not
// shutting down (the readiness probe).
func (a *Adapter) Ready() bool { return a.ready.Load() }

// Run watches the PingSources, takes part in the elections and fires the
// sources of the buckets it leads, until ctx ends. It then stops firing,
// releases its leases and waits up to DrainTimeout for running sends.
// It returns an error when it cannot start.
func (a *Adapter) Run(ctx context.Context) error {
	lc := a.p.LeaderElection
	if lc == nil {
		var err error
		if lc, err = LeaderElectionSettings(ctx, a.p.Kube, a.p.Namespace); err != nil {
			return err
		}
	}
	cc := lc.GetComponentConfig(Component)
	cc.Identity = ownIdentity(a.p.Identity)
	upstream := kle.ComponentConfig{Component: Component, Buckets: 1}
	if a.p.Upstream != nil {
		upstream = *a.p.Upstream
	}
	sendCtx, cancelSends := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelSends()
	a.mu.Lock()
	a.buckets = Buckets(cc)
	a.gates = Buckets(upstream)
	a.catchUpBound = cc.LeaseDuration
	a.sendCtx = sendCtx
	a.mu.Unlock()
	if a.p.HandoverWindow == 0 {
		a.p.HandoverWindow = time.Duration((standbyPollFactor+1)*float64(cc.RetryPeriod)) + a.p.Spread
	}

	informCtx, stopInformer := context.WithCancel(ctx)
	defer stopInformer()
	err := a.watchGates(informCtx)
	if err == nil {
		err = a.watch(informCtx, sendCtx)
	}
	if err != nil {
		if ctx.Err() != nil {
			return nil // stopped while starting
		}
		return err
	}
	a.p.Logger.Infow("Watching PingSources", zap.String("identity", cc.Identity), zap.String("namespace", a.p.Namespace),
		zap.Uint32("buckets", cc.Buckets), zap.Duration("leaseDuration", cc.LeaseDuration),
		zap.Duration("renewDeadline", cc.RenewDeadline), zap.Duration("retryPeriod", cc.RetryPeriod),
		zap.Uint32("upstreamBuckets", upstream.Buckets))

	a.cron.Start()
	electCtx, stopElection := context.WithCancel(context.WithoutCancel(ctx))
	defer stopElection()
	el := &elector{kc: a.p.Kube, namespace: a.p.Namespace, cc: cc, buckets: a.buckets, gates: a.gates, promote: a.promote, demote: a.demote,
		firedThrough: a.firedThrough, handoverWait: a.bucketHandoverWait, log: a.p.Logger}
	elected := make(chan error, 1)
	go func() { elected <- el.run(electCtx) }()
	a.ready.Store(true)

	select {
	case <-ctx.Done():
	case err := <-elected:
		a.cron.Stop()
		return fmt.Errorf("leader election: %w", err) // only at start: bad lock settings
	}
	a.ready.Store(false)
	a.shutdown(stopElection, elected, cancelSends)
	return nil
}

// standbyPollFactor bounds how often a standby polls a lease, in retry
// periods: client-go waits a period plus up to JitterFactor (1.2) more.
const standbyPollFactor = 1 + leaderelection.JitterFactor

// shutdown stops firing (after the tick due within the handover window, if
// any), then releases the leases, then drains the sends.
func (a *Adapter) shutdown(stopElection func(), elected <-chan error, cancelSends func()) {
	if wait := a.handoverWait(); wait > 0 {
		a.p.Logger.Infow("Waiting for a tick before handing over", zap.Duration("wait", wait))
		time.Sleep(wait)
	}
	a.mu.Lock()
	a.stopping = true
	a.handOverAllLocked()
	a.mu.Unlock()
	// No tick starts any more: those due by now were sent above or by the
	// cron. Ticks the cron runs from now on see stopping and return; those
	// past that check are counted in sends. (The context Stop returns
	// waits for every running send: not here, the leases go first.)
	a.cron.Stop()
	stopElection()
	select {
	case <-elected: //nolint:errcheck // the election ends because stopElection cancelled it: its result says nothing more
		a.p.Logger.Info("Leases released")
	case <-time.After(10 * time.Second):
		a.p.Logger.Warn("Leases not released in 10 s: the standbys take them when they expire")
	}
	drained := make(chan struct{})
	go func() { a.sends.Wait(); close(drained) }()
	select {
	case <-drained:
	case <-time.After(a.p.DrainTimeout):
		a.p.Logger.Warnw("Sends still running at the drain deadline are cancelled", zap.Int64("sends", a.inflight.Load()))
		cancelSends()
		<-drained
	}
}

// handoverWait is how long to wait for the next tick due within the
// handover window, so that it fires here rather than in the gap before a
// standby takes over; 0 when none is due.
func (a *Adapter) handoverWait() time.Duration {
	var next time.Time
	for _, e := range a.cron.Entries() {
		if !e.Next.IsZero() && (next.IsZero() || e.Next.Before(next)) {
			next = e.Next
		}
	}
	return a.waitFor(next)
}

// bucketHandoverWait is handoverWait for the sources of one bucket, before
// it is given up to another replica.
func (a *Adapter) bucketHandoverWait(b reconciler.Bucket) time.Duration {
	a.mu.Lock()
	var next time.Time
	for key, en := range a.entries {
		if b.Has(key) {
			if e := a.cron.Entry(en.id); !e.Next.IsZero() && (next.IsZero() || e.Next.Before(next)) {
				next = e.Next
			}
		}
	}
	a.mu.Unlock()
	return a.waitFor(next)
}

// waitFor is how long until a tick due at next has started, if it is due
// within the handover window; 0 otherwise.
func (a *Adapter) waitFor(next time.Time) time.Duration {
	if a.p.HandoverWindow <= 0 || next.IsZero() {
		return 0
	}
	if d := time.Until(next); d <= a.p.HandoverWindow {
		return max(d, 0) + 50*time.Millisecond // time for the cron to start the tick
	}
	return 0
}
