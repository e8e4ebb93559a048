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

package adapter

import (
	"context"
	"errors"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"

	"knative.dev/event-forwarding-proxy/delivery"
)

// MeterName names the sender's meter.
const MeterName = "knative.dev/event-forwarding-proxy/adapter"

// Metric names of the sender. The OTel Prometheus exporter appends _total
// to counters and _seconds to histograms in seconds, so the exported names
// are kn_forward_sender_sends_total{route,outcome},
// kn_forward_sender_fallbacks_total{reason},
// kn_forward_sender_dead_letters_total{outcome,reason},
// kn_forward_sender_retries_total{route},
// kn_forward_sender_handoff_duration_seconds{route},
// kn_forward_sender_direct_sources, kn_forward_sender_inflight{route} and
// kn_forward_sender_forwarding.
const (
	metricSenderSends     = "kn_forward_sender_sends"
	metricSenderFallbacks = "kn_forward_sender_fallbacks"
	metricSenderDead      = "kn_forward_sender_dead_letters"
	metricSenderRetries   = "kn_forward_sender_retries"
	metricSenderHandoff   = "kn_forward_sender_handoff_duration"
	metricSenderSources   = "kn_forward_sender_direct_sources"
	metricSenderInflight  = "kn_forward_sender_inflight"
	metricSenderProxying  = "kn_forward_sender_forwarding"
)

// handoffBuckets span a hand-off to the proxy (milliseconds) and a direct
// call held by a slow sink (minutes).
var handoffBuckets = []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600}

// senderMetrics holds the instruments, built once, and their precomputed
// attribute sets.
type senderMetrics struct {
	sends     metric.Int64Counter
	fallbacks metric.Int64Counter
	retries   metric.Int64Counter
	handoff   metric.Float64Histogram
	dead      metric.Int64Counter

	sendAttrs     [2][numSendOutcomes]metric.AddOption // [route][outcome]
	routeAdd      [2]metric.AddOption
	routeRecord   [2]metric.RecordOption
	fallbackAttrs [numFallbackReasons]metric.AddOption
	deadAttrs     [2]map[string]metric.AddOption // [delivered][reason]
}

// sendOutcome is how a send ended, the outcome label of
// kn_forward_sender_sends_total.
type sendOutcome uint8

const (
	sendFailed sendOutcome = iota
	sendDelivered
	sendDeadLettered // the sink failed; its dead-letter sink took the event
	numSendOutcomes
)

var sendOutcomeNames = [numSendOutcomes]string{"failed", "delivered", "dead_lettered"}

// outcomeOf is how a send that ended with res and err ended.
func outcomeOf(res *Result, err error) sendOutcome {
	switch {
	case err != nil:
		return sendFailed
	case res.DeadLettered:
		return sendDeadLettered
	}
	return sendDelivered
}

// deliveredIf is sendDelivered when ok, else sendFailed.
func deliveredIf(ok bool) sendOutcome {
	if ok {
		return sendDelivered
	}
	return sendFailed
}

func newSenderMetrics(mp metric.MeterProvider, r *Router) *senderMetrics {
	if mp == nil {
		mp = noop.NewMeterProvider()
	}
	m := mp.Meter(MeterName)
	ms := &senderMetrics{}
	var errs []error
	check := func(err error) { errs = append(errs, err) }
	var err error
	ms.sends, err = m.Int64Counter(metricSenderSends, metric.WithDescription("Events sent, by route (direct, proxy) and outcome (delivered, failed, dead_lettered)"))
	check(err)
	ms.dead, err = m.Int64Counter(metricSenderDead, metric.WithDescription(
		"Events sent to a dead-letter sink after their sink failed, by outcome (delivered, failed) and why the sink failed"))
	check(err)
	ms.fallbacks, err = m.Int64Counter(metricSenderFallbacks, metric.WithDescription("Events meant for the proxy that went direct, by reason"))
	check(err)
	ms.retries, err = m.Int64Counter(metricSenderRetries, metric.WithDescription("Attempts after the first, by route"))
	check(err)
	ms.handoff, err = m.Float64Histogram(metricSenderHandoff, metric.WithUnit("s"),
		metric.WithDescription("Time from a send's start until the adapter is free: the sink's answer direct, the proxy's 202 when handed off"),
		metric.WithExplicitBucketBoundaries(handoffBuckets...))
	check(err)
	sources, err := m.Int64ObservableGauge(metricSenderSources, metric.WithDescription("Direct sources the adapter reported serving"))
	check(err)
	proxying, err := m.Int64ObservableGauge(metricSenderProxying, metric.WithDescription("1 while sends are routed through the proxy, 0 while direct"))
	check(err)
	inflight, err := m.Int64ObservableGauge(metricSenderInflight,
		metric.WithDescription("Sends in flight, by route: direct ones hold the adapter until the sink answers, proxy ones until the proxy takes them"))
	check(err)
	inflightAttrs := [2]metric.ObserveOption{
		metric.WithAttributeSet(attribute.NewSet(attribute.String("route", RouteDirect.String()))),
		metric.WithAttributeSet(attribute.NewSet(attribute.String("route", RouteProxy.String()))),
	}
	if err = errors.Join(errs...); err == nil {
		_, err = m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
			_, n, route := r.State()
			o.ObserveInt64(sources, int64(n))
			o.ObserveInt64(proxying, int64(route))
			for _, rt := range []Route{RouteDirect, RouteProxy} {
				o.ObserveInt64(inflight, r.Inflight(rt), inflightAttrs[rt])
			}
			return nil
		}, sources, proxying, inflight)
	}
	if err != nil {
		// Only a misbehaving provider fails here: fall back to no metrics
		// rather than to no delivery.
		return newSenderMetrics(noop.NewMeterProvider(), r)
	}
	for _, route := range []Route{RouteDirect, RouteProxy} {
		ra := attribute.String("route", route.String())
		ms.routeAdd[route] = metric.WithAttributeSet(attribute.NewSet(ra))
		ms.routeRecord[route] = metric.WithAttributeSet(attribute.NewSet(ra))
		for o := range numSendOutcomes {
			ms.sendAttrs[route][o] = metric.WithAttributeSet(attribute.NewSet(ra, attribute.String("outcome", sendOutcomeNames[o])))
		}
	}
	// Every dead-letter series exists from the start, at 0, so that
	// increase() sees the first event of each kind.
	for i, o := range []string{"failed", "delivered"} {
		ms.deadAttrs[i] = make(map[string]metric.AddOption, len(delivery.FailureReasons))
		for _, r := range delivery.FailureReasons {
			ms.deadAttrs[i][r] = metric.WithAttributeSet(attribute.NewSet(attribute.String("outcome", o), attribute.String("reason", r)))
			ms.dead.Add(context.Background(), 0, ms.deadAttrs[i][r])
		}
	}
	for r := fallbackUnreachable; r < numFallbackReasons; r++ {
		ms.fallbackAttrs[r] = metric.WithAttributeSet(attribute.NewSet(attribute.String("reason", r.String())))
	}
	return ms
}

// sent counts a finished send and its hand-off time.
func (m *senderMetrics) sent(ctx context.Context, route Route, o sendOutcome, took time.Duration) {
	m.sends.Add(ctx, 1, m.sendAttrs[route][o])
	m.handoff.Record(ctx, took.Seconds(), m.routeRecord[route])
}

// deadLettered counts an event sent to a dead-letter sink: taken there
// or not, and why its sink failed (delivery.FailureReason).
func (m *senderMetrics) deadLettered(ctx context.Context, delivered bool, reason string) {
	i := 0
	if delivered {
		i = 1
	}
	if a, ok := m.deadAttrs[i][reason]; ok {
		m.dead.Add(ctx, 1, a)
	}
}

func (m *senderMetrics) fallback(ctx context.Context, r fallbackReason) {
	m.fallbacks.Add(ctx, 1, m.fallbackAttrs[r])
}

func (m *senderMetrics) retried(ctx context.Context, route Route) {
	m.retries.Add(ctx, 1, m.routeAdd[route])
}
