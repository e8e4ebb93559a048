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

package proxy

import (
	"context"
	"net/http"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"

	"knative.dev/event-forwarding-proxy/delivery"
)

// Metric names of the contract: the dashboard, the alerts and the
// autoscaler read them by name (docs/configuration.md lists them as
// exported). The OTel Prometheus exporter appends _total to counters and
// _seconds to histograms in seconds, so the instrument names leave those
// suffixes out.
const (
	metricActive          = "kn_forward_active_requests"
	metricTenantActive    = "kn_forward_tenant_active_requests"
	metricAdmission       = "kn_forward_admission_duration"
	metricCapacity        = "kn_forward_capacity"
	metricRequests        = "kn_forward_requests"
	metricDuration        = "kn_forward_request_duration"
	metricRejected        = "kn_forward_rejected"
	metricAsyncDeliveries = "kn_forward_async_deliveries"
	metricAsyncRetries    = "kn_forward_async_retries"
	metricAsyncPending    = "kn_forward_async_pending"
	metricDeadLetters     = "kn_forward_dead_letters"
	metricMemoryBudget    = "kn_forward_memory_budget_bytes"
	metricMemoryReserved  = "kn_forward_memory_reserved_bytes"
)

// outcome is how a request ended, the outcome label.
type outcome uint8

const (
	outcomeForwarded outcome = iota // the destination answered (any status)
	outcomeAccepted                 // async: 202 given, delivery in the background
	outcomeSpread                   // async: 202 given, another pod took the delivery (Spreader)
	outcomeRejected                 // refused by the proxy before anything reached a destination
	outcomeFailed                   // no answer from the destination: 502 or 504
	outcomeCanceled                 // the caller went away first
	numOutcomes
)

var outcomeNames = [numOutcomes]string{"forwarded", "accepted", "spread", "rejected", "failed", "canceled"}

// asyncOutcome is how a background delivery ended.
type asyncOutcome uint8

const (
	asyncDelivered asyncOutcome = iota
	asyncFailed
	asyncAbandoned
	asyncDeadLettered // the destination failed; the dead-letter sink took the event
	numAsyncOutcomes
)

var asyncOutcomeNames = [numAsyncOutcomes]string{"delivered", "failed", "abandoned", "dead_lettered"}

// reasonList lists every reason, so their attribute sets can be built once.
var reasonList = []Reason{
	ReasonMissingDestination, ReasonBadDestination, ReasonBadRequest, ReasonUnauthenticated,
	ReasonDestinationDenied, ReasonLoopDetected, ReasonBodyTooLarge, ReasonTenantLimited,
	ReasonOverloaded, ReasonDestinationBusy, ReasonDraining, ReasonUnreachable, ReasonTimeout,
}

// Metrics are the proxy's instruments, built once. The zero value of
// *Metrics (nil) records nothing.
type Metrics struct {
	active     metric.Int64UpDownCounter
	tenants    metric.Int64UpDownCounter
	admission  metric.Float64Histogram
	requests   metric.Int64Counter
	duration   metric.Float64Histogram
	rejected   metric.Int64Counter
	deliveries metric.Int64Counter
	retries    metric.Int64Counter
	pending    metric.Int64UpDownCounter
	dead       metric.Int64Counter

	// Attribute sets, built once: the hot path allocates none.
	requestAttrs [numOutcomes][7]*attrs // by outcome and status/100 (6: none)
	outcomeAttrs [numOutcomes]*attrs
	reasonAttrs  map[Reason]*attrs
	asyncAttrs   [numAsyncOutcomes]*attrs
	deadAttrs    [2]map[string]*attrs // by delivered (1) or not, then reason
	namespaces   *labelValues
	tenantValues *labelValues
}

// NewMetrics builds the instruments from mp (a no-op provider if nil) and
// reports the limiter's capacity and the memory budget's size and use (b
// may be nil: no budget, both 0). The namespace and tenant labels take at
// most maxLabelValues distinct values each (if zero, 1000); later values are
// counted under OtherLabel.
func NewMetrics(mp metric.MeterProvider, l *Limiter, b *MemoryBudget, maxLabelValues int) (*Metrics, error) {
	if maxLabelValues <= 0 {
		maxLabelValues = 1000
	}
	if mp == nil {
		mp = noop.NewMeterProvider()
	}
	m := mp.Meter("knative.dev/event-forwarding-proxy/proxy")
	var (
		ms  Metrics
		err error
		all = make([]error, 0, 13) // one per instrument
	)
	ms.active, err = m.Int64UpDownCounter(metricActive, metric.WithDescription("Calls held now (sync and async), by destination namespace"))
	all = append(all, err)
	ms.tenants, err = m.Int64UpDownCounter(metricTenantActive, metric.WithDescription("Calls held now (sync and async), by tenant"))
	all = append(all, err)
	ms.admission, err = m.Float64Histogram(metricAdmission, metric.WithUnit("s"),
		metric.WithDescription("Time from a request's arrival to its admission decision"),
		metric.WithExplicitBucketBoundaries(0.00001, 0.00005, 0.0001, 0.0005, 0.001, 0.005, 0.01, 0.05))
	all = append(all, err)
	ms.requests, err = m.Int64Counter(metricRequests, metric.WithDescription("Requests ended, by outcome and status class"))
	all = append(all, err)
	ms.duration, err = m.Float64Histogram(metricDuration, metric.WithUnit("s"),
		metric.WithDescription("Time from arrival to the end of the answer, by outcome"),
		metric.WithExplicitBucketBoundaries(0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 120, 300, 600))
	all = append(all, err)
	ms.rejected, err = m.Int64Counter(metricRejected, metric.WithDescription("Answers the proxy made itself, by reason"))
	all = append(all, err)
	ms.deliveries, err = m.Int64Counter(metricAsyncDeliveries, metric.WithDescription("Async deliveries ended, by outcome (delivered, failed, abandoned)"))
	all = append(all, err)
	ms.retries, err = m.Int64Counter(metricAsyncRetries, metric.WithDescription("Async delivery attempts after the first"))
	all = append(all, err)
	ms.pending, err = m.Int64UpDownCounter(metricAsyncPending, metric.WithDescription("Async calls accepted and not yet ended"))
	all = append(all, err)
	ms.dead, err = m.Int64Counter(metricDeadLetters, metric.WithDescription(
		"Async events sent to their dead-letter sink, by outcome (delivered, failed) and why the destination failed"))
	all = append(all, err)
	_, err = m.Int64ObservableGauge(metricCapacity, metric.WithDescription("The pod's admission limit"),
		metric.WithInt64Callback(func(_ context.Context, o metric.Int64Observer) error {
			o.Observe(int64(l.Capacity()))
			return nil
		}))
	all = append(all, err)
	_, err = m.Int64ObservableGauge(metricMemoryBudget, metric.WithDescription("The pod's memory budget for the headers and async bodies of the calls it holds, in bytes"),
		metric.WithInt64Callback(func(_ context.Context, o metric.Int64Observer) error {
			o.Observe(b.Size())
			return nil
		}))
	all = append(all, err)
	_, err = m.Int64ObservableGauge(metricMemoryReserved, metric.WithDescription("Bytes of the memory budget the calls held reserve now"),
		metric.WithInt64Callback(func(_ context.Context, o metric.Int64Observer) error {
			o.Observe(b.Reserved())
			return nil
		}))
	all = append(all, err)
	for _, err := range all {
		if err != nil {
			return nil, err
		}
	}
	for o := range numOutcomes {
		ms.outcomeAttrs[o] = newAttrs(attribute.String("outcome", outcomeNames[o]))
		for class := range 7 {
			ms.requestAttrs[o][class] = newAttrs(attribute.String("outcome", outcomeNames[o]), attribute.String("code", classNames[class]))
		}
	}
	ms.namespaces = newLabelValues("namespace", maxLabelValues)
	ms.tenantValues = newLabelValues("tenant", maxLabelValues)
	ms.reasonAttrs = make(map[Reason]*attrs, len(reasonList))
	for _, r := range reasonList {
		ms.reasonAttrs[r] = newAttrs(attribute.String("reason", string(r)))
	}
	for o := range numAsyncOutcomes {
		ms.asyncAttrs[o] = newAttrs(attribute.String("outcome", asyncOutcomeNames[o]))
	}
	for i, o := range []string{"failed", "delivered"} {
		ms.deadAttrs[i] = make(map[string]*attrs, len(delivery.FailureReasons))
		for _, r := range delivery.FailureReasons {
			ms.deadAttrs[i][r] = newAttrs(attribute.String("outcome", o), attribute.String("reason", r))
		}
	}
	ms.zero()
	return &ms, nil
}

// zero reports every counter series the proxy knows of, and the gauges, at
// 0 from the start: rate() and increase() then see a pod's first event of
// each kind, and a fresh pod has held-call values before its first call.
func (m *Metrics) zero() {
	ctx := context.Background()
	for o := range numOutcomes {
		for _, class := range []int{2, 4, 5, 6} {
			m.requests.Add(ctx, 0, m.requestAttrs[o][class].add...)
		}
	}
	for _, a := range m.reasonAttrs {
		m.rejected.Add(ctx, 0, a.add...)
	}
	for _, a := range m.asyncAttrs {
		m.deliveries.Add(ctx, 0, a.add...)
	}
	for _, byReason := range m.deadAttrs {
		for _, a := range byReason {
			m.dead.Add(ctx, 0, a.add...)
		}
	}
	m.retries.Add(ctx, 0)
	m.pending.Add(ctx, 0)
	m.active.Add(ctx, 0, m.namespaces.option("").add...)
}

// held counts a call of tenant to namespace ns as held (delta 1) or no
// longer held (delta -1).
func (m *Metrics) held(ns, tenant string, delta int64) {
	if m == nil {
		return
	}
	m.active.Add(context.Background(), delta, m.namespaces.option(ns).add...)
	m.tenants.Add(context.Background(), delta, m.tenantValues.option(tenant).add...)
}

// admitted records how long the admission decision took after arrival.
func (m *Metrics) admitted(seconds float64) {
	if m != nil {
		m.admission.Record(context.Background(), seconds)
	}
}

func (m *Metrics) asyncPending(delta int64) {
	if m != nil {
		m.pending.Add(context.Background(), delta)
	}
}

func (m *Metrics) asyncRetry() {
	if m != nil {
		m.retries.Add(context.Background(), 1)
	}
}

func (m *Metrics) asyncEnded(o asyncOutcome) {
	if m != nil {
		m.deliveries.Add(context.Background(), 1, m.asyncAttrs[o].add...)
	}
}

// deadLetterEnded counts an event sent to its dead-letter sink: delivered
// there or not, and why its destination failed (delivery.FailureReason).
func (m *Metrics) deadLetterEnded(delivered bool, reason string) {
	if m == nil {
		return
	}
	i := 0
	if delivered {
		i = 1
	}
	if a, ok := m.deadAttrs[i][reason]; ok {
		m.dead.Add(context.Background(), 1, a.add...)
	}
}

// ended records one request: its outcome, status class, duration and, when
// the proxy answered itself, the reason.
func (m *Metrics) ended(o outcome, status int, seconds float64, reason Reason) {
	if m == nil {
		return
	}
	ctx := context.Background()
	m.requests.Add(ctx, 1, m.requestAttrs[o][statusClass(status)].add...)
	m.duration.Record(ctx, seconds, m.outcomeAttrs[o].record...)
	if reason != "" {
		a, ok := m.reasonAttrs[reason]
		if !ok {
			a = newAttrs(attribute.String("reason", string(reason)))
		}
		m.rejected.Add(ctx, 1, a.add...)
	}
}

// classNames are the code label values, indexed by statusClass.
var classNames = [7]string{"none", "1xx", "2xx", "3xx", "4xx", "5xx", "none"}

// statusClass is status/100 for real statuses, else 6 ("none").
func statusClass(status int) int {
	if status >= 100 && status < 600 {
		return status / 100
	}
	return 6
}

// outcomeOf classifies a request that ended with status (0 if nothing was
// written) and the proxy's own reason, if any.
func outcomeOf(c *call, status int, reason Reason) outcome {
	switch {
	case reason != "" && (status == http.StatusBadGateway || status == http.StatusGatewayTimeout):
		return outcomeFailed
	case reason != "":
		return outcomeRejected
	case status == 0:
		return outcomeCanceled
	case c.spread && status == http.StatusAccepted:
		return outcomeSpread
	case c.async && status == http.StatusAccepted:
		return outcomeAccepted
	default:
		return outcomeForwarded
	}
}
