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
	"time"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"
)

// MeterName names the adapter's meter.
const MeterName = "knative.dev/event-forwarding-proxy/adapter/mtping"

// Metric names of the adapter. Exported through the OTel Prometheus
// exporter as kn_forward_mtping_inflight_sends,
// kn_forward_mtping_leases_held and
// kn_forward_mtping_tick_lateness_seconds. The sender's own
// kn_forward_sender_* metrics count the sends by route and outcome.
const (
	// MetricInflightSends is also the metric the adapter's HPA scales on
	// (config/async).
	MetricInflightSends = "kn_forward_mtping_inflight_sends"
	metricLeases        = "kn_forward_mtping_leases_held"
	metricLateness      = "kn_forward_mtping_tick_lateness"
)

// latenessBuckets span the spread (up to 500 ms) and a starved adapter.
var latenessBuckets = []float64{0.01, 0.05, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 10, 30, 60}

type adapterMetrics struct {
	lateness metric.Float64Histogram
}

func newAdapterMetrics(mp metric.MeterProvider, a *Adapter) (*adapterMetrics, error) {
	if mp == nil {
		mp = noop.NewMeterProvider()
	}
	m := mp.Meter(MeterName)
	lateness, err1 := m.Float64Histogram(metricLateness, metric.WithUnit("s"),
		metric.WithDescription("Time from a tick's scheduled second until its event is handed to the sender"),
		metric.WithExplicitBucketBoundaries(latenessBuckets...))
	inflight, err2 := m.Int64ObservableGauge(MetricInflightSends, metric.WithDescription("Ticks whose send has not ended (direct: until the sink answers)"))
	leases, err3 := m.Int64ObservableGauge(metricLeases, metric.WithDescription("Buckets (Leases) this replica leads"))
	if err := errors.Join(err1, err2, err3); err != nil {
		return nil, err
	}
	_, err := m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		o.ObserveInt64(inflight, a.inflight.Load())
		a.mu.Lock()
		n := len(a.terms)
		a.mu.Unlock()
		o.ObserveInt64(leases, int64(n))
		return nil
	}, inflight, leases)
	if err != nil {
		return nil, err
	}
	return &adapterMetrics{lateness: lateness}, nil
}

// late records how late a tick's event reached the sender.
func (m *adapterMetrics) late(ctx context.Context, d time.Duration) {
	m.lateness.Record(ctx, d.Seconds())
}
