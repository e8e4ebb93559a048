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
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"

	"knative.dev/event-forwarding-proxy/adapter"
	"knative.dev/event-forwarding-proxy/delivery"
)

// RouteLabel is the label of the adapter's own Pod that names its route,
// direct or proxy: `kubectl get pods -L event-forwarding.knative.dev/route`.
// No selector may use it: it changes while the Pod runs.
const RouteLabel = "event-forwarding.knative.dev/route"

// The reasons of the Events recorded on the Pod when the route changes.
const (
	ReasonForwardingThroughProxy = "ForwardingThroughProxy"
	ReasonSendingDirect          = "SendingDirect"
)

// PodRouteParams configure a PodRoute.
type PodRouteParams struct {
	// Client patches the Pod and records its Events: it needs patch on
	// pods and create and patch on events in Namespace. Required.
	Client kubernetes.Interface
	// Namespace and Name are the adapter's own Pod. If Name is empty, Run
	// logs that there is no Pod and returns.
	Namespace, Name string
	// Component is the Events' source. If empty, event-forwarding-adapter.
	Component string
	// Logger logs the failures. If nil, nothing is logged.
	Logger *zap.SugaredLogger
	// RetryDelay is the wait before a failed label is written again; it
	// doubles with each further failure, with jitter. If zero, 1 s.
	RetryDelay time.Duration
	// RetryMax caps that wait. If zero, 5 minutes.
	RetryMax time.Duration
	// Timeout bounds one patch. If zero, 10 s.
	Timeout time.Duration
}

// PodRoute shows a Sender's route on the adapter's own Pod: it keeps
// RouteLabel at the route and records an Event at each change, so that
// kubectl get pods and kubectl describe pod show what the logs say.
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

// Run writes the latest change onto the Pod until ctx ends: the label, and
// an Event when the route differs from the last one recorded. A failed
// patch is logged once per change and tried again, with the latest change,
// at the next one or after a backoff. When there is no Pod to write to (no
// name, or the API server has none of it) Run logs it at Info and returns.
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

// podWriter is Run's state: what it last wrote. Only Run's goroutine
// uses it.
type podWriter struct {
	pr       *PodRoute
	recorder record.EventRecorder
	pod      *corev1.ObjectReference // UID set once a patch returned the Pod
	backoff  delivery.Backoff

	labelled, recorded    adapter.Route
	hasLabel, hasRecorded bool
	failures              int // patches failed in a row
	warnedSeq             uint64
	warned                bool // a failure to write change warnedSeq was logged
}

// write brings the Pod to c. It returns how long to wait before trying
// again (0: nothing to retry), and done when there is no Pod to write to.
func (w *podWriter) write(ctx context.Context, c adapter.RouteChange) (wait time.Duration, done bool) {
	var err error
	if !w.hasLabel || w.labelled != c.Route {
		err = w.patch(ctx, c.Route)
		switch {
		case apierrors.IsNotFound(err):
			w.pr.p.Logger.Infow("The route is not shown on a Pod: the API server has no such Pod (not running in one?)",
				zap.String("namespace", w.pod.Namespace), zap.String("pod", w.pod.Name))
			return 0, true
		case err != nil && ctx.Err() != nil:
			return 0, true // shutting down: not a failure to report
		}
	}
	// kubectl describe pod shows only the Events that carry the Pod's UID,
	// which a patch returns: wait for one, unless patching is forbidden.
	if (!w.hasRecorded || w.recorded != c.Route) && (err == nil || w.pod.UID != "" || apierrors.IsForbidden(err)) {
		w.record(c)
	}
	if err == nil {
		if w.failures > 0 {
			w.pr.p.Logger.Infow("The adapter's Pod shows its route again", zap.Stringer("route", c.Route))
		}
		w.failures = 0
		return 0, false
	}
	w.failures++
	if !w.warned || w.warnedSeq != c.Seq {
		w.warnedSeq, w.warned = c.Seq, true
		w.pr.p.Logger.Warnw("Cannot label the adapter's Pod with its route: trying again later (RBAC: patch on pods in its namespace?)",
			zap.String("namespace", w.pod.Namespace), zap.String("pod", w.pod.Name), zap.Stringer("route", c.Route), zap.Error(err))
	}
	return w.backoff.Wait(w.failures, 0), false
}

// patch sets RouteLabel to route with a JSON merge patch, which touches
// no other label, and learns the Pod's UID from the answer.
func (w *podWriter) patch(ctx context.Context, route adapter.Route) error {
	body, err := json.Marshal(map[string]any{"metadata": map[string]any{"labels": map[string]string{RouteLabel: route.String()}}})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, w.pr.p.Timeout)
	defer cancel()
	pod, err := w.pr.p.Client.CoreV1().Pods(w.pod.Namespace).Patch(ctx, w.pod.Name, types.MergePatchType, body, metav1.PatchOptions{})
	if err != nil {
		return err
	}
	w.pod.UID = pod.UID // kubectl describe pod matches Events by UID
	w.labelled, w.hasLabel = route, true
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
