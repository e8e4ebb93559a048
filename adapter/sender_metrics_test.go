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
	"net/http"
	"sort"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/attribute"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"knative.dev/event-forwarding-proxy/delivery"
)

func newTestMeterProvider() (*sdkmetric.ManualReader, *sdkmetric.MeterProvider) {
	r := sdkmetric.NewManualReader()
	return r, sdkmetric.NewMeterProvider(sdkmetric.WithReader(r))
}

// counterByLabel sums an Int64 counter's or gauge's points by the value
// of label.
func counterByLabel(t *testing.T, r *sdkmetric.ManualReader, name, label string) map[string]int64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	out := map[string]int64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != name {
				continue
			}
			var points []metricdata.DataPoint[int64]
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				points = d.DataPoints
			case metricdata.Gauge[int64]:
				points = d.DataPoints
			default:
				t.Fatalf("%s is a %T, not an Int64 counter or gauge", name, m.Data)
			}
			for _, p := range points {
				v, _ := p.Attributes.Value(attribute.Key(label))
				out[v.AsString()] += p.Value
			}
		}
	}
	return out
}

// TestSenderMetrics: sends by route and outcome, retries, fallbacks and
// hand-off latency, under the exact names Prometheus shows.
func TestSenderMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	exp, err := otelprom.New(otelprom.WithRegisterer(reg), otelprom.WithoutScopeInfo(), otelprom.WithoutTargetInfo())
	if err != nil {
		t.Fatal(err)
	}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(exp))
	proxy := newServer(t, statuses([]int{503, 202}, nil))
	sink := newServer(t, statuses([]int{200, 400}, nil))
	s := testSender(SenderParams{MeterProvider: mp, Retries: -1}, newFakeClock())
	send := func() { _, _ = s.Send(ctxFor(t, 10*time.Second), Target{URL: sink.url(t)}, testEvent("e")) }
	send() // direct, delivered
	send() // direct, failed (400)
	dls := newServer(t, statuses([]int{200}, nil))
	if res, err := s.Send(ctxFor(t, 10*time.Second), Target{URL: sink.url(t), DeadLetter: dls.url(t)}, testEvent("d")); err != nil || !res.DeadLettered {
		t.Fatalf("send with a dead-letter sink: %v (dead-lettered %v), want it dead-lettered", err, res.DeadLettered)
	}
	s.SetDirectSources(7)
	s.SetForwarding(forwardingTo(t, proxy))
	send() // proxy 503, no retry left: busy fallback, direct 400: failed
	send() // proxy 202: delivered

	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			key := mf.GetName()
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, l.GetName()+"="+l.GetValue())
			}
			sort.Strings(labels)
			for _, l := range labels {
				key += " " + l
			}
			switch {
			case m.Counter != nil:
				got[key] = m.Counter.GetValue()
			case m.Gauge != nil:
				got[key] = m.Gauge.GetValue()
			case m.Histogram != nil:
				got[key+" count"] = float64(m.Histogram.GetSampleCount())
			}
		}
	}
	want := map[string]float64{
		"kn_forward_sender_sends_total outcome=delivered route=direct":     1,
		"kn_forward_sender_sends_total outcome=failed route=direct":        2,
		"kn_forward_sender_sends_total outcome=delivered route=proxy":      1,
		"kn_forward_sender_sends_total outcome=dead_lettered route=direct": 1,
		"kn_forward_sender_fallbacks_total reason=busy":                    1,
		"kn_forward_sender_handoff_duration_seconds route=direct count":    4,
		"kn_forward_sender_handoff_duration_seconds route=proxy count":     1,
		"kn_forward_sender_direct_sources":                                 7,
		"kn_forward_sender_forwarding":                                     1,
		"kn_forward_sender_inflight route=direct":                          0, // every send ended
		"kn_forward_sender_inflight route=proxy":                           0,
	}
	for _, outcome := range []string{"delivered", "failed"} {
		for _, reason := range delivery.FailureReasons {
			want["kn_forward_sender_dead_letters_total outcome="+outcome+" reason="+reason] = 0 // there from the start
		}
	}
	want["kn_forward_sender_dead_letters_total outcome=delivered reason=4xx"] = 1
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("metrics (-want +got):\n%s", d)
	}
}

func TestSenderRetryMetric(t *testing.T) {
	reader, mp := newTestMeterProvider()
	proxy := newServer(t, func(w http.ResponseWriter, _ *http.Request, n int) {
		if n < 3 {
			proxyError(w, 503, "overloaded", "")
			return
		}
		w.WriteHeader(http.StatusAccepted)
	})
	sink := newServer(t, statuses([]int{503, 200}, nil))
	s := testSender(SenderParams{MeterProvider: mp}, newFakeClock())
	if _, err := s.Send(ctxFor(t, 10*time.Second), Target{URL: sink.url(t)}, testEvent("e")); err != nil {
		t.Fatal(err)
	}
	s.SetForwarding(forwardingTo(t, proxy))
	if _, err := s.Send(ctxFor(t, 10*time.Second), Target{URL: sink.url(t)}, testEvent("e")); err != nil {
		t.Fatal(err)
	}
	want := map[string]int64{"direct": 1, "proxy": 2}
	if d := cmp.Diff(want, counterByLabel(t, reader, "kn_forward_sender_retries", "route")); d != "" {
		t.Errorf("retries (-want +got):\n%s", d)
	}
}
