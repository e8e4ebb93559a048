//go:build integration

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

package sender

import (
	"context"
	"net/http"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"knative.dev/event-forwarding-proxy/adapter"
	"knative.dev/event-forwarding-proxy/config"
)

// TestProxyKilledMidRun: while sources send through the proxy, the proxy
// process dies. Sends fall back to direct delivery, none fails, and every
// event is accounted for at the sink; when the proxy comes back on its
// address, sends return to it.
//
// A synchronous call the proxy was holding when it died is sent again
// directly, so the sink may see it twice (at least once, never zero). An
// asynchronous event the proxy had already accepted (202) is the proxy's to
// deliver: SIGTERM lets it finish; SIGKILL can lose the few accepted in the
// last instant, and the test counts them apart from the sender's.
func TestProxyKilledMidRun(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		sig  syscall.Signal
		sync bool
	}{
		{name: "SIGKILL, sync calls", sig: syscall.SIGKILL, sync: true},
		{name: "SIGKILL, async hand-offs", sig: syscall.SIGKILL},
		{name: "SIGTERM drain, async hand-offs", sig: syscall.SIGTERM},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			proxy := startProxy(t)
			sink := newSink(t)
			logger, _ := testLogger(t)
			reader := sdkmetric.NewManualReader()
			s := adapter.NewSender(adapter.SenderParams{
				Logger: logger, MeterProvider: sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)),
				ProxyDownFor: 300 * time.Millisecond,
			})
			s.SetForwarding(config.Forwarding{ProxyURL: mustURL(t, proxy.URL), Threshold: 0})
			d := newDriver(t, s, adapter.Target{URL: sink.url(t), Namespace: "tenant", Sync: tc.sync}, "kill")

			// Eight sources send back to back until told to stop.
			var (
				stop     atomic.Bool
				wg       sync.WaitGroup
				failures atomic.Int64
				back     atomic.Int64 // through the proxy again after the restart
				restart  atomic.Bool
			)
			for range 8 {
				wg.Go(func() {
					for !stop.Load() {
						id, res, err := d.trySend()
						if err != nil {
							failures.Add(1)
							t.Errorf("event %s lost by the sender: %v", id, err)
							continue
						}
						if restart.Load() && res.Route == adapter.RouteProxy && !res.Fallback {
							back.Add(1)
						}
					}
				})
			}
			eventually(t, time.Minute, "100 events arrive through the proxy", func() bool { return sink.Count() >= 100 })
			proxy.stop(tc.sig)
			killedAt := len(d.delivered())
			eventually(t, time.Minute, "100 more events are sent with the proxy gone", func() bool { return len(d.delivered()) >= killedAt+100 })
			restart.Store(true)
			startProxyOn(t, proxy.Port, proxy.MetricsPort)
			eventually(t, time.Minute, "sends go through the restarted proxy", func() bool { return back.Load() >= 20 })
			stop.Store(true)
			wg.Wait()

			sent := d.delivered()
			var lostInProxy int
			eventually(t, 30*time.Second, "every event the sender delivered arrives", func() bool {
				got := sink.byID()
				lostInProxy = 0
				for id, res := range sent {
					if got[id] > 0 {
						continue
					}
					if tc.sig == syscall.SIGKILL && !tc.sync && res.Route == adapter.RouteProxy && res.StatusCode == http.StatusAccepted {
						lostInProxy++ // accepted by the process that was killed
						continue
					}
					return false
				}
				return true
			})
			dups := 0
			for _, n := range sink.byID() {
				dups += n - 1
			}
			fb := fallbacks(t, reader)
			t.Logf("%d events sent, %d failed; fallbacks %v; %d arrived twice; %d accepted by the killed proxy and lost with it",
				len(sent), failures.Load(), fb, dups, lostInProxy)
			if fb["unreachable"] == 0 {
				t.Errorf("no fallback counted: %v", fb)
			}
			if tc.sig == syscall.SIGTERM && lostInProxy != 0 {
				t.Errorf("a drained proxy lost %d events", lostInProxy)
			}
			if limit := 8; dups > limit {
				t.Errorf("%d duplicates: more than the %d calls in flight at the kill", dups, limit)
			}
		})
	}
}

// fallbacks reads kn_forward_sender_fallbacks_total by reason.
func fallbacks(t *testing.T, r *sdkmetric.ManualReader) map[string]int64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	out := map[string]int64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != "kn_forward_sender_fallbacks" {
				continue
			}
			for _, p := range m.Data.(metricdata.Sum[int64]).DataPoints {
				v, _ := p.Attributes.Value("reason")
				out[v.AsString()] += p.Value
			}
		}
	}
	return out
}
