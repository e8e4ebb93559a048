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

package kube

import (
	"context"
	"fmt"
	"sync"
	"time"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"

	"knative.dev/event-forwarding-proxy/adapter"
	"knative.dev/event-forwarding-proxy/delivery"
)

// The reasons of the Events recorded on the Pod when the route changes.
const (
	ReasonForwardingThroughProxy = "ForwardingThroughProxy"
	ReasonSendingDirect          = "SendingDirect"
)

// PodRouteParams configure a PodRoute.
type PodRouteParams struct {
	// Client reads the Pod and records its Events: it needs get on pods
	// and create and patch on events in Namespace. Required.
	Client kubernetes.Interface
	// Namespace and Name are the adapter's own Pod. If Name is empty, Run
	// logs that there is no Pod and returns.
	Namespace, Name string
	// Component is the Events' source. If empty, event-forwarding-adapter.
	Component string
	// Logger logs the failures. If nil, nothing is logged.
	Logger *zap.SugaredLogger
	// RetryDelay is the wait before a failed read of the Pod is tried
	// again; it doubles with each further failure, with jitter. If zero,
	// 1 s.
	RetryDelay time.Duration
	// RetryMax caps that wait. If zero, 5 minutes.
	RetryMax time.Duration
	// Timeout bounds one read of the Pod. If zero, 10 s.
	Timeout time.Duration
}

// PodRoute shows a Sender's route on the adapter's own Pod: it records an
// Event about the Pod at each change, so that kubectl describe pod and
// kubectl get events show what the logs say. It reads the Pod (for its
// UID, by which kubectl describe pod finds its Events) and never writes
// it: the adapter's account may change no Pod.
//
// Publish, the Sender's OnRouteChange, only stores the change in a single
// slot, the latest winning; Run, on one goroutine, writes what the slot
// holds when it can. A slow or unreachable API server therefore costs the
// sends nothing, and routes that came and went while it was stuck are
// never written.
type PodRoute struct {
	p    PodRouteParams
	wake chan struct{} // capacity 1: a change is waiting

	mu     sync.Mutex
	latest adapter.RouteChange // guarded by mu
	has    bool                // guarded by mu: latest holds a change
}

// NewPodRoute returns a PodRoute; Run writes what Publish stores.
func NewPodRoute(p PodRouteParams) *PodRoute {
	if p.Component == "" {
		p.Component = "event-forwarding-adapter"
	}
	if p.Logger == nil {
		p.Logger = zap.NewNop().Sugar()
	}
	if p.Timeout <= 0 {
		p.Timeout = 10 * time.Second
	}
	if p.RetryDelay <= 0 {
		p.RetryDelay = time.Second
	}
	if p.RetryMax <= 0 {
		p.RetryMax = 5 * time.Minute
	}
	return &PodRoute{p: p, wake: make(chan struct{}, 1)}
}

// Publish stores c for Run to write, unless a later change (a higher Seq)
// is already there. It never blocks; use it as SenderParams.OnRouteChange.
func (pr *PodRoute) Publish(c adapter.RouteChange) {
	pr.mu.Lock()
	if !pr.has || c.Seq >= pr.latest.Seq {
		pr.latest, pr.has = c, true
	}
	pr.mu.Unlock()
	select {
	case pr.wake <- struct{}{}:
	default: // Run has yet to take the last wake-up: it will read c then
	}
}

// take returns the latest change stored.
func (pr *PodRoute) take() (adapter.RouteChange, bool) {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	return pr.latest, pr.has
}

// Run records the latest change until ctx ends: an Event when the route
// differs from the last one recorded. It first reads the Pod; a failed
// read is logged once per change and tried again, with the latest change,
// at the next one or after a backoff. When there is no Pod (no name, or
// the API server has none of it) Run logs it at Info and returns.
func (pr *PodRoute) Run(ctx context.Context) {
	if pr.p.Name == "" {
		pr.p.Logger.Info("The route is not shown on a Pod: its name is unknown (POD_NAME unset)")
		return
	}
	// Bounded: Events queue up to 1000 and are then dropped, and the
	// broadcaster's spam filter caps those about one Pod.
	broadcaster := record.NewBroadcaster(record.WithContext(ctx))
	defer broadcaster.Shutdown()
	broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: pr.p.Client.CoreV1().Events(pr.p.Namespace)})
	w := &podWriter{
		pr:       pr,
		recorder: broadcaster.NewRecorder(scheme.Scheme, corev1.EventSource{Component: pr.p.Component, Host: pr.p.Name}),
		pod:      &corev1.ObjectReference{APIVersion: "v1", Kind: "Pod", Namespace: pr.p.Namespace, Name: pr.p.Name},
		backoff:  delivery.Backoff{Delay: pr.p.RetryDelay, Max: pr.p.RetryMax},
	}
	retry := time.NewTimer(time.Hour)
	retry.Stop() // armed only after a failure
	defer retry.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-pr.wake:
		case <-retry.C:
		}
		c, ok := pr.take()
		if !ok {
			continue
		}
		switch wait, done := w.write(ctx, c); {
		case done:
			return
		case wait > 0:
			retry.Reset(wait)
		}
	}
}

// podWriter is Run's state: the Pod and what it last recorded. Only Run's
// goroutine uses it.
type podWriter struct {
	pr       *PodRoute
	recorder record.EventRecorder
	pod      *corev1.ObjectReference // UID set once the Pod was read
	backoff  delivery.Backoff

	found       bool // the Pod was read, or reading it is forbidden
	recorded    adapter.Route
	hasRecorded bool
	failures    int // reads failed in a row
	warnedSeq   uint64
	warned      bool // a failure to read the Pod for change warnedSeq was logged
}

// write records c. It returns how long to wait before trying again (0:
// nothing to retry), and done when there is no Pod to record it about.
func (w *podWriter) write(ctx context.Context, c adapter.RouteChange) (wait time.Duration, done bool) {
	if !w.found {
		err := w.read(ctx)
		switch {
		case err == nil:
			if w.failures > 0 {
				w.pr.p.Logger.Infow("The adapter's Pod is read again: its route's Events follow", zap.Stringer("route", c.Route))
			}
		case apierrors.IsNotFound(err):
			w.pr.p.Logger.Infow("The route is not shown on a Pod: the API server has no such Pod (not running in one?)",
				zap.String("namespace", w.pod.Namespace), zap.String("pod", w.pod.Name))
			return 0, true
		case ctx.Err() != nil:
			return 0, true // shutting down: not a failure to report
		case apierrors.IsForbidden(err):
			// The Events are still recorded, without the UID:
			// kubectl get events lists them, kubectl describe pod not.
			w.pr.p.Logger.Warnw("Cannot read the adapter's Pod: its route's Events carry no UID, so kubectl describe pod does not list them (RBAC: get on pods in its namespace?)",
				zap.String("namespace", w.pod.Namespace), zap.String("pod", w.pod.Name), zap.Error(err))
		default:
			w.failures++
			if !w.warned || w.warnedSeq != c.Seq {
				w.warnedSeq, w.warned = c.Seq, true
				w.pr.p.Logger.Warnw("Cannot read the adapter's Pod to record its route: trying again later",
					zap.String("namespace", w.pod.Namespace), zap.String("pod", w.pod.Name), zap.Stringer("route", c.Route), zap.Error(err))
			}
			return w.backoff.Wait(w.failures, 0), false
		}
		w.found, w.failures = true, 0
	}
	if !w.hasRecorded || w.recorded != c.Route {
		w.record(c)
	}
	return 0, false
}

// read learns the Pod's UID.
func (w *podWriter) read(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, w.pr.p.Timeout)
	defer cancel()
	pod, err := w.pr.p.Client.CoreV1().Pods(w.pod.Namespace).Get(ctx, w.pod.Name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	w.pod.UID = pod.UID // kubectl describe pod matches Events by UID
	return nil
}

// record queues the Event of a route change; the broadcaster writes it.
func (w *podWriter) record(c adapter.RouteChange) {
	reason, what := ReasonSendingDirect, "Sending directly to the sinks"
	if c.Route == adapter.RouteProxy {
		reason, what = ReasonForwardingThroughProxy, "Forwarding through the event-forwarding proxy"
	}
	w.recorder.Event(w.pod, corev1.EventTypeNormal, reason, fmt.Sprintf("%s: %s (%d direct sources; sends in flight: %d direct, %d through the proxy)",
		what, c.Reason, c.DirectSources, c.DirectInflight, c.ProxyInflight))
	w.recorded, w.hasRecorded = c.Route, true
}
