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
	"slices"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/prometheus/promql/parser"

	"knative.dev/event-forwarding-proxy/test/testproc"
)

// externalMetrics are the only series the kit reads that neither the proxy
// nor the PingSource adapter exports, and where they come from.
var externalMetrics = map[string]string{
	"container_memory_working_set_bytes": "cAdvisor (the kubelet)",
	"kube_pod_container_resource_limits": "kube-state-metrics",
	"up":                                 "Prometheus (one series per scrape target)",
}

// targetLabels are the labels Prometheus attaches to every series of a
// Kubernetes pod target. A metric label of the same name is renamed
// exported_<name> (honor_labels: false).
var targetLabels = []string{"namespace", "pod", "job", "instance"}

// catalog is what a query may name: the series of the families the proxy
// and the adapter export, as scraped, the rules' recorded series, and
// externalMetrics.
type catalog struct {
	series   map[string]*dto.MetricFamily // series name (a histogram's _bucket, _sum, _count) -> family
	recorded map[string]bool
}

func newCatalog(fams map[string]*dto.MetricFamily, rules ruleFile) catalog {
	c := catalog{series: map[string]*dto.MetricFamily{}, recorded: map[string]bool{}}
	for name, f := range fams {
		switch f.GetType() {
		case dto.MetricType_HISTOGRAM, dto.MetricType_GAUGE_HISTOGRAM:
			for _, suffix := range []string{"_bucket", "_sum", "_count"} {
				c.series[name+suffix] = f
			}
		case dto.MetricType_SUMMARY:
			c.series[name], c.series[name+"_sum"], c.series[name+"_count"] = f, f, f
		default:
			c.series[name] = f
		}
	}
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			if r.Record != "" {
				c.recorded[r.Record] = true
			}
		}
	}
	return c
}

// labels returns the labels a series of the named family may carry once
// scraped: its own (clashes renamed), the target's, and le for buckets.
func (c catalog) labels(series string) map[string]bool {
	f := c.series[series]
	out := map[string]bool{}
	for _, l := range targetLabels {
		out[l] = true
	}
	for _, m := range f.GetMetric() {
		for _, l := range m.GetLabel() {
			if slices.Contains(targetLabels, l.GetName()) {
				out["exported_"+l.GetName()] = true
			} else {
				out[l.GetName()] = true
			}
		}
	}
	if strings.HasSuffix(series, "_bucket") {
		out["le"] = true
	}
	return out
}

// check parses expr and returns a problem for each series name the
// catalog does not know, and for each label that an exported series (or an
// aggregation over exported series only) cannot carry.
func (c catalog) check(expr string) []string {
	e, err := parser.ParseExpr(expr)
	if err != nil {
		return []string{fmt.Sprintf("does not parse: %v", err)}
	}
	var problems []string
	parser.Inspect(e, func(n parser.Node, _ []parser.Node) error {
		switch n := n.(type) {
		case *parser.VectorSelector:
			problems = append(problems, c.checkSelector(n)...)
		case *parser.AggregateExpr:
			if n.Without {
				return nil
			}
			for _, l := range n.Grouping {
				if !c.mayCarry(n.Expr, l) {
					problems = append(problems, fmt.Sprintf("%s groups by %q, which none of its series carries", n.Op, l))
				}
			}
		}
		return nil
	})
	return problems
}

func (c catalog) checkSelector(vs *parser.VectorSelector) []string {
	name := vs.Name
	for _, m := range vs.LabelMatchers {
		if m.Name == "__name__" {
			name = m.Value
		}
	}
	switch {
	case c.series[name] != nil:
		var problems []string
		allowed := c.labels(name)
		for _, m := range vs.LabelMatchers {
			if m.Name != "__name__" && !allowed[m.Name] {
				problems = append(problems, fmt.Sprintf("%s has no label %q (it has %v)", name, m.Name, keys(allowed)))
			}
		}
		return problems
	case c.recorded[name]:
		return nil
	case externalMetrics[name] != "":
		return nil
	default:
		return []string{fmt.Sprintf("%s is exported by neither the proxy nor the adapter, nor recorded by %s, nor a known external metric", name, rulesFile)}
	}
}

// mayCarry reports whether some series selected under e may carry label:
// always true if e selects a recorded or external series.
func (c catalog) mayCarry(e parser.Expr, label string) bool {
	found := false
	parser.Inspect(e, func(n parser.Node, _ []parser.Node) error {
		vs, ok := n.(*parser.VectorSelector)
		if !ok {
			return nil
		}
		name := vs.Name
		if c.series[name] == nil || c.labels(name)[label] {
			found = true
		}
		return nil
	})
	return found
}

// mergeFamilies returns the families of several processes as one set: a
// family both export (go_*, process_*) has the series of both.
func mergeFamilies(sets ...map[string]*dto.MetricFamily) map[string]*dto.MetricFamily {
	out := map[string]*dto.MetricFamily{}
	for _, fams := range sets {
		for name, f := range fams {
			if have := out[name]; have != nil {
				f = &dto.MetricFamily{Name: have.Name, Help: have.Help, Type: have.Type, Unit: have.Unit,
					Metric: slices.Concat(have.Metric, f.Metric)}
			}
			out[name] = f
		}
	}
	return out
}

func keys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// exercise drives the proxy through each kind of call so that every
// metric family it exports has at least one series: a synchronous call, an
// async call retried once, and a refused call.
func exercise(t *testing.T, p *proxyProc) map[string]*dto.MetricFamily {
	t.Helper()
	ok := newSink(t, false, 0)
	if code := p.post(t, ok.URL, "Kn-Namespace", "tenant-a"); code != http.StatusOK {
		t.Fatalf("sync call: status %d, want 200", code)
	}
	flaky := newSink(t, false, 1)
	code := p.post(t, flaky.URL, "Prefer", "respond-async", "Kn-Namespace", "tenant-b",
		"Kn-Forward-Retry", "2", "Kn-Forward-Backoff-Delay", "PT0.01S")
	if code != http.StatusAccepted {
		t.Fatalf("async call: status %d, want 202", code)
	}
	if code := p.post(t, "http://192.0.2.1/", "Kn-Namespace", "tenant-a"); code != http.StatusForbidden {
		t.Fatalf("call to a denied destination: status %d, want 403", code)
	}
	var fams map[string]*dto.MetricFamily
	testproc.EventuallyState(t, 30*time.Second, "the async call is delivered on its retry", func() (bool, string) {
		fams = p.scrape(t)
		n := testproc.Value(fams, "kn_forward_async_deliveries_total", map[string]string{"outcome": "delivered"})
		return n == 1, fmt.Sprintf("%v delivered, sink got %d calls", n, flaky.Count())
	})
	return fams
}

// TestQueriesNameExportedMetrics checks every expression of the dashboard,
// the rules and the adapter rules against what the proxy binary and the
// PingSource adapter binary (against a real API server, sending through
// that proxy and directly) export: each series name is exported (or
// recorded, or a known external metric), and each label matched or
// grouped by exists on it.
func TestQueriesNameExportedMetrics(t *testing.T) {
	p := startProxy(t)
	proxyFams := exercise(t, p)
	mtpingFams := exerciseMtping(t, p)
	rules := loadRules(t)
	c := newCatalog(mergeFamilies(proxyFams, mtpingFams), rules)

	var qs []query
	qs = append(qs, ruleQueries(t)...)
	qs = append(qs, dashboardQueries(t, nil)...)
	qs = append(qs, adapterQueries(t)...)
	for _, q := range qs {
		t.Run(q.where, func(t *testing.T) {
			for _, problem := range c.check(q.expr) {
				t.Errorf("%s\n  in: %s", problem, q.expr)
			}
		})
	}

	// The checker itself: each of these must be caught.
	for _, tc := range []struct {
		name, expr string
	}{
		{name: "unknown metric", expr: `sum(kn_forward_inflight)`},
		{name: "unknown label", expr: `sum(kn_forward_rejected_total{reasons="timeout"})`},
		{name: "unknown grouping label", expr: `sum by (destination) (kn_forward_active_requests)`},
		{name: "histogram without suffix", expr: `kn_forward_request_duration_seconds`},
		{name: "syntax error", expr: `sum(rate(kn_forward_requests_total[5m])`},
		{name: "unknown adapter metric", expr: `sum(kn_forward_mtping_leases)`},
		{name: "unknown adapter label", expr: `sum(kn_forward_sender_fallbacks_total{cause="busy"})`},
		{name: "unknown adapter grouping label", expr: `sum by (bucket) (kn_forward_mtping_leases_held)`},
		{name: "adapter histogram without suffix", expr: `kn_forward_mtping_tick_lateness_seconds`},
	} {
		t.Run("checker catches "+tc.name, func(t *testing.T) {
			if problems := c.check(tc.expr); len(problems) == 0 {
				t.Errorf("%s: no problem found", tc.expr)
			}
		})
	}

	// The adapter's families come from the adapter's scrape, not the
	// proxy's: without it, the kit's adapter queries would fail.
	proxyOnly := newCatalog(proxyFams, rules)
	for _, expr := range []string{`kn_forward_mtping_leases_held`, `kn_forward_sender_sends_total`, `kn_forward_sender_handoff_duration_seconds_bucket`} {
		t.Run("adapter family "+expr, func(t *testing.T) {
			if len(proxyOnly.check(expr)) == 0 {
				t.Errorf("the proxy exports %s", expr)
			}
			if problems := c.check(expr); len(problems) != 0 {
				t.Errorf("the adapter does not export it: %v", problems)
			}
		})
	}
}
