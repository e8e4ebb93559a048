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
	"strconv"
	"testing"
	"time"

	"knative.dev/event-forwarding-proxy/test/testproc"
)

// alertExpr returns the expression of the named alert of rules.yaml.
func alertExpr(t *testing.T, name string) string {
	t.Helper()
	for _, g := range loadRules(t).Groups {
		for _, r := range g.Rules {
			if r.Alert == name {
				return r.Expr
			}
		}
	}
	t.Fatalf("%s has no alert %s", rulesFile, name)
	return ""
}

// adapterRow is the title of the dashboard's row for the adapter.
const adapterRow = "PingSource adapter"

// adapterRowQueries returns the expressions of the panels of the
// adapter's row, with vars substituted.
func adapterRowQueries(t *testing.T, vars map[string]string) []query {
	t.Helper()
	var qs []query
	in := false
	for _, p := range loadDashboard(t).Panels {
		if p.Type == "row" {
			in = p.Title == adapterRow
			continue
		}
		for _, tg := range p.Targets {
			if in {
				qs = append(qs, query{where: fmt.Sprintf("panel %q %s", p.Title, tg.RefID), expr: substVars(tg.Expr, vars)})
			}
		}
	}
	if len(qs) == 0 {
		t.Fatalf("%s: no row %q", dashboardFile, adapterRow)
	}
	return qs
}

// TestPrometheusSeesTheAdapter runs the PingSource adapter against a real
// API server, the proxy, and a real Prometheus that scrapes both every
// second with the kit's rules loaded, through three states: another
// process holds the adapter's only Lease (KnForwardAdapterNoLeaseHeld
// pending); the adapter leads and sends through the proxy (that alert
// gone); the proxy's address leads nowhere (KnForwardAdapterFallingBack
// pending, naming the reason). Every query of the dashboard's adapter row
// must then return data.
func TestPrometheusSeesTheAdapter(t *testing.T) {
	k := startKube(t)
	k.holdLease(t)
	p := startProxy(t)
	k.forwardTo(t, p.URL)
	sink := newSink(t, false, 0)
	k.createPingSource(t, sink.URL)
	a := startMtping(t, k)
	prom := startPrometheus(t, proxyTarget(p.MetricsAddr),
		scrapeTarget{job: mtpingScrapeJob, addr: a.MetricsAddr, namespace: mtpingNamespace, pod: mtpingPod})
	const wait = 30 * time.Second
	// `or vector(0)`: a count of nothing is no sample, not 0.
	pending := func(alert string) string {
		return fmt.Sprintf(`count(ALERTS{alertname=%q, alertstate="pending", namespace=%q}) or vector(0)`, alert, mtpingNamespace)
	}
	prom.awaitValue(t, wait, fmt.Sprintf(`up{job=%q}`, mtpingScrapeJob), 1)

	t.Run("no lease", func(t *testing.T) {
		prom.awaitValue(t, wait, `sum(kn_forward_mtping_leases_held)`, 0)
		got := prom.awaitValue(t, wait, alertExpr(t, "KnForwardAdapterNoLeaseHeld"), 0)
		if got.Metric["namespace"] != mtpingNamespace {
			t.Errorf("alert expression gave %v, want namespace %s", got.Metric, mtpingNamespace)
		}
		prom.awaitValue(t, wait, pending("KnForwardAdapterNoLeaseHeld"), 1)
		if n := sink.Count(); n != 0 {
			t.Errorf("the sink got %d events while another process held the Lease", n)
		}
	})

	k.freeLease(t)
	t.Run("leads and forwards", func(t *testing.T) {
		prom.awaitValue(t, wait, `sum(kn_forward_mtping_leases_held)`, 1)
		prom.awaitValue(t, wait, pending("KnForwardAdapterNoLeaseHeld"), 0)
		prom.awaitValue(t, wait, `max(kn_forward_sender_forwarding)`, 1)
		prom.awaitValue(t, wait, `sum(kn_forward_sender_sends_total{route="proxy", outcome="delivered"}) > bool 0`, 1)
		prom.awaitValue(t, wait, `sum(kn_forward_async_deliveries_total{outcome="delivered"}) > bool 0`, 1)
		// The lateness alert's quantile, per pod, is a number (not NaN
		// from an empty histogram); its threshold is promtool's to test.
		prom.awaitValue(t, wait, `histogram_quantile(0.99, sum by (namespace, pod, le) (rate(kn_forward_mtping_tick_lateness_seconds_bucket[5m]))) >= bool 0`, 1)
		// The Prometheus Adapter rule for the adapter's HPA: one value.
		prom.awaitValue(t, wait, `count(`+loadAdapterRule(t, "kn_forward_mtping_inflight_sends").render(t, mtpingNamespace, mtpingPod)+`)`, 1)
	})

	k.forwardTo(t, "http://127.0.0.1:"+strconv.Itoa(freePort(t)))
	t.Run("falls back", func(t *testing.T) {
		prom.awaitValue(t, wait, `sum(kn_forward_sender_fallbacks_total) > bool 0`, 1)
		prom.awaitValue(t, wait, `sum(kn_forward_sender_sends_total{route="direct", outcome="delivered"}) > bool 0`, 1)
		// The expression, then the alert Prometheus evaluates from it,
		// name the reason.
		for _, expr := range []string{alertExpr(t, "KnForwardAdapterFallingBack"), `ALERTS{alertname="KnForwardAdapterFallingBack", alertstate="pending"}`} {
			testproc.EventuallyState(t, wait, expr+" names the reason", func() (bool, string) {
				res, err := prom.query(expr)
				if err != nil {
					t.Fatal(err)
				}
				for _, s := range res {
					if r := s.Metric["reason"]; s.Metric["namespace"] == mtpingNamespace && (r == "unreachable" || r == "proxy_down") {
						return true, ""
					}
				}
				return false, fmt.Sprint(res)
			})
		}
	})

	vars := map[string]string{"namespace": targetNamespace, "pod": ".*", "adapter_namespace": mtpingNamespace, "adapter_pod": ".*"}
	for _, q := range adapterRowQueries(t, vars) {
		t.Run("dashboard/"+q.where, func(t *testing.T) {
			testproc.EventuallyState(t, wait, "the query returns data", func() (bool, string) {
				res, err := prom.query(q.expr)
				if err != nil {
					t.Fatal(err)
				}
				return len(res) > 0, q.expr
			})
		})
	}
	t.Run("dashboard/every query evaluates", func(t *testing.T) {
		for _, q := range dashboardQueries(t, vars) {
			if _, err := prom.query(q.expr); err != nil {
				t.Errorf("%s: %v", q.where, err)
			}
		}
	})
}
