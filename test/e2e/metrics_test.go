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

package e2e

import (
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"knative.dev/event-forwarding-proxy/test/testproc"
)

// scrape reads the proxy's /metrics.
func (p *proc) scrape(t *testing.T) map[string]*dto.MetricFamily {
	t.Helper()
	fams, err := testproc.Scrape(p.MetricsURL)
	if err != nil {
		t.Fatalf("scrape: %v", err)
	}
	return fams
}

// value sums the samples of a family whose labels include want.
var value = testproc.Value

// TestMetricsCountHeldCalls holds sync and async calls and reads the
// contract's metrics back from the running proxy.
func TestMetricsCountHeldCalls(t *testing.T) {
	p := startProxy(t, "FORWARD_MAX_INFLIGHT=50")
	dest := newHeldSink(t)
	done := make(chan int, 2)
	for range 2 {
		go func() {
			resp := p.post(t, "sync", "Kn-Forward-To", dest.URL)
			resp.Body.Close()
			done <- resp.StatusCode
		}()
	}
	resp := p.post(t, "async", "Kn-Forward-To", dest.URL, "Prefer", "respond-async")
	resp.Body.Close()
	eventually(t, 10*time.Second, "three calls are held", func() bool { return dest.Count() == 3 })

	fams := p.scrape(t)
	if got := value(fams, "kn_forward_active_requests", nil); got != 3 {
		t.Errorf("kn_forward_active_requests = %v, want 3 (2 sync + 1 async)", got)
	}
	if got := value(fams, "kn_forward_capacity", nil); got != 50 {
		t.Errorf("kn_forward_capacity = %v, want 50", got)
	}
	if got := value(fams, "kn_forward_async_pending", nil); got != 1 {
		t.Errorf("kn_forward_async_pending = %v, want 1", got)
	}
	readAnswer(t, p.post(t, "", "Kn-Forward-To", "http://example.com/"))

	dest.Release()
	for range 2 {
		<-done
	}
	eventually(t, 10*time.Second, "no call is held", func() bool {
		return value(p.scrape(t), "kn_forward_active_requests", nil) == 0
	})
	fams = p.scrape(t)
	for _, c := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"kn_forward_requests_total", map[string]string{"outcome": "forwarded", "code": "2xx"}, 2},
		{"kn_forward_requests_total", map[string]string{"outcome": "accepted", "code": "2xx"}, 1},
		{"kn_forward_requests_total", map[string]string{"outcome": "rejected", "code": "4xx"}, 1},
		{"kn_forward_rejected_total", map[string]string{"reason": "destination_denied"}, 1},
		{"kn_forward_async_deliveries_total", map[string]string{"outcome": "delivered"}, 1},
	} {
		if got := value(fams, c.name, c.labels); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
	if fams["kn_forward_request_duration_seconds"] == nil || fams["go_goroutines"] == nil {
		t.Error("the duration histogram or the Go runtime metrics are missing")
	}
}
