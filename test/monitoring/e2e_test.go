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

package monitoring

import (
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"knative.dev/event-forwarding-proxy/test/testproc"
)

// TestPrometheusSeesHeldCalls runs the proxy binary and a real Prometheus
// that scrapes it every second with the kit's rules loaded, holds a known
// number of sync and async calls at a blocking sink, and reads the number
// back through Prometheus' query API: raw series, recording rules and the
// Prometheus Adapter's query for the HPA. Every dashboard query must then
// evaluate, and after release everything returns to zero.
func TestPrometheusSeesHeldCalls(t *testing.T) {
	const capacity, syncCalls, asyncCalls = 50, 3, 2
	p := startProxy(t, fmt.Sprintf("FORWARD_MAX_INFLIGHT=%d", capacity))
	prom := startPrometheus(t, proxyTarget(p.MetricsAddr))
	const wait = 30 * time.Second
	prom.awaitValue(t, wait, fmt.Sprintf(`up{job=%q}`, scrapeJob), 1)

	dest := newSink(t, true, 0)
	var wg sync.WaitGroup
	for range syncCalls {
		wg.Go(func() {
			if code := p.post(t, dest.URL, "Kn-Namespace", "tenant-a"); code != http.StatusOK {
				t.Errorf("sync call: status %d, want 200", code)
			}
		})
	}
	t.Cleanup(func() { dest.Release(); wg.Wait() })
	for range asyncCalls {
		if code := p.post(t, dest.URL, "Prefer", "respond-async", "Kn-Namespace", "tenant-b"); code != http.StatusAccepted {
			t.Fatalf("async call: status %d, want 202", code)
		}
	}
	const held = syncCalls + asyncCalls
	testproc.EventuallyState(t, wait, "the sink holds every call", func() (bool, string) {
		return dest.Count() == held, fmt.Sprintf("%d calls", dest.Count())
	})

	podSel := fmt.Sprintf(`{namespace=%q, pod=%q}`, targetNamespace, targetPod)
	adapter := loadAdapterRule(t, "kn_forward_active_requests")
	for _, tc := range []struct {
		name string
		expr string
		want float64
	}{
		{name: "held calls", expr: `sum(kn_forward_active_requests)`, want: held},
		{name: "the pod's labels won the clash", expr: `sum(kn_forward_active_requests` + podSel + `)`, want: held},
		{name: "capacity", expr: `kn_forward_capacity` + podSel, want: capacity},
		{name: "async backlog", expr: `sum(kn_forward_async_pending)`, want: asyncCalls},
		{name: "tenant a", expr: `sum(kn_forward_tenant_active_requests{tenant="tenant-a"})`, want: syncCalls},
		{name: "tenant b", expr: `sum(kn_forward_tenant_active_requests{tenant="tenant-b"})`, want: asyncCalls},
		{name: "recording rule: held per pod", expr: `namespace_pod:kn_forward_active_requests:sum` + podSel, want: held},
		{name: "recording rule: saturation per pod", expr: `namespace_pod:kn_forward_saturation:ratio` + podSel, want: float64(held) / capacity},
		{name: "recording rule: held in total", expr: `namespace:kn_forward_active_requests:sum`, want: held},
		{name: "recording rule: held by tenant", expr: `namespace_tenant:kn_forward_tenant_active_requests:sum{tenant="tenant-a"}`, want: syncCalls},
		{name: "Prometheus Adapter rule for the HPA", expr: adapter.render(t, targetNamespace, targetPod), want: held},
	} {
		t.Run("held/"+tc.name, func(t *testing.T) {
			got := prom.awaitValue(t, wait, tc.expr, tc.want)
			if tc.name == "Prometheus Adapter rule for the HPA" && got.Metric["pod"] != targetPod {
				t.Errorf("adapter query labels %v, want pod=%s", got.Metric, targetPod)
			}
		})
	}

	// With calls held well below capacity, no alert of the kit is pending.
	t.Run("no alert", func(t *testing.T) {
		res, err := prom.query(`ALERTS{alertname=~"KnForward.*"}`)
		if err != nil || len(res) != 0 {
			t.Errorf("alerts %v (error %v), want none", res, err)
		}
	})

	// Every dashboard query evaluates (the memory panels read cAdvisor and
	// kube-state-metrics, absent here, so only errors count).
	vars := map[string]string{"namespace": targetNamespace, "pod": ".*"}
	for _, q := range dashboardQueries(t, vars) {
		t.Run("dashboard/"+q.where, func(t *testing.T) {
			if _, err := prom.query(q.expr); err != nil {
				t.Error(err)
			}
		})
	}
	t.Run("dashboard/held calls per pod", func(t *testing.T) {
		got := prom.awaitValue(t, wait, fmt.Sprintf(`sum by (pod) (kn_forward_active_requests{namespace=~%q, pod=~".*"})`, targetNamespace), held)
		if got.Metric["pod"] != targetPod {
			t.Errorf("labels %v, want pod=%s", got.Metric, targetPod)
		}
	})

	dest.Release()
	wg.Wait()
	for _, tc := range []struct {
		name string
		expr string
	}{
		{name: "held calls", expr: `sum(kn_forward_active_requests)`},
		{name: "async backlog", expr: `sum(kn_forward_async_pending)`},
		{name: "tenants", expr: `sum(kn_forward_tenant_active_requests)`},
		{name: "recording rule: held per pod", expr: `namespace_pod:kn_forward_active_requests:sum` + podSel},
		{name: "Prometheus Adapter rule for the HPA", expr: adapter.render(t, targetNamespace, targetPod)},
	} {
		t.Run("released/"+tc.name, func(t *testing.T) {
			prom.awaitValue(t, wait, tc.expr, 0)
		})
	}
	prom.awaitValue(t, wait, `sum(kn_forward_requests_total{outcome="forwarded", code="2xx"})`, syncCalls)
	prom.awaitValue(t, wait, `sum(kn_forward_async_deliveries_total{outcome="delivered"})`, asyncCalls)
}
