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
	"math"
	"sync"
	"testing"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	kubefake "k8s.io/client-go/kubernetes/fake"
	kle "knative.dev/pkg/leaderelection"

	sourcesv1 "knative.dev/eventing/pkg/apis/sources/v1"
	eventingfake "knative.dev/eventing/pkg/client/clientset/versioned/fake"
)

// A tick's lateness counts from the second it was due, not from the
// moment the cron got round to it: a cron that runs a tick 1.3 s late
// shows 1.3 s.
func TestTickLatenessCountsFromTheDueSecond(t *testing.T) {
	var (
		mu    sync.Mutex
		clock = time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	)
	now := func() time.Time { mu.Lock(); defer mu.Unlock(); return clock }
	set := func(t time.Time) { mu.Lock(); defer mu.Unlock(); clock = t }
	reader, sender := sdkmetric.NewManualReader(), &fakeSender{}
	a, err := New(Params{
		Sources: eventingfake.NewSimpleClientset(), Kube: kubefake.NewClientset(), Sender: sender,
		Spread: -1, Now: now, MeterProvider: sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)),
	})
	if err != nil {
		t.Fatal(err)
	}
	a.buckets = Buckets(kle.ComponentConfig{Component: Component, Buckets: 1})
	f := &fixture{a: a, sender: sender, buckets: a.buckets, ctx: t.Context()}
	f.upsert(pingSource("tenant", "minutely", func(s *sourcesv1.PingSource) { s.Spec.Schedule = "* * * * *" }))
	a.promote(a.buckets[0], f.ctx, time.Time{}) // due at 10:01:00

	set(time.Date(2026, 3, 1, 10, 1, 1, 300e6, time.UTC))
	if n := f.fireAll(); n != 1 {
		t.Fatalf("sent %d events, want 1", n)
	}
	set(time.Date(2026, 3, 1, 10, 2, 0, 200e6, time.UTC))
	f.fireAll()

	count, sum := lateness(t, reader)
	if count != 2 || math.Abs(sum-1.5) > 1e-9 {
		t.Errorf("lateness: %d ticks, %.3f s in all; want 2 ticks, 1.3 s + 0.2 s", count, sum)
	}
}

// lateness returns the count and sum of the tick lateness histogram.
func lateness(t *testing.T, r *sdkmetric.ManualReader) (uint64, float64) {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if h, ok := m.Data.(metricdata.Histogram[float64]); ok && m.Name == metricLateness {
				var count uint64
				var sum float64
				for _, dp := range h.DataPoints {
					count += dp.Count
					sum += dp.Sum
				}
				return count, sum
			}
		}
	}
	t.Fatal("no tick lateness histogram")
	return 0, 0
}
