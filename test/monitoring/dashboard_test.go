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
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestDashboardImportable checks what makes the dashboard import unchanged
// into any Grafana: the Prometheus data source is a template variable (no
// data source uid of the exporting Grafana, no __inputs to fill in), every
// variable a query uses is defined, and the layout is well formed.
func TestDashboardImportable(t *testing.T) {
	d := loadDashboard(t)
	vars := map[string]variable{}
	for _, v := range d.Templating.List {
		vars[v.Name] = v
	}
	const dsRef = "${datasource}"
	var panelProblems []string
	ids := map[int]bool{}
	used := regexp.MustCompile(`\$\{?([a-zA-Z_][a-zA-Z0-9_]*)`)
	for _, p := range d.allPanels() {
		if ids[p.ID] {
			panelProblems = append(panelProblems, p.Title+": duplicate id")
		}
		ids[p.ID] = true
		if g := p.GridPos; g.W <= 0 || g.H <= 0 || g.X < 0 || g.X+g.W > 24 {
			panelProblems = append(panelProblems, p.Title+": bad gridPos")
		}
		if p.Type == "row" {
			continue
		}
		if p.Datasource == nil || p.Datasource.UID != dsRef || p.Datasource.Type != "prometheus" {
			panelProblems = append(panelProblems, p.Title+": panel data source is not "+dsRef)
		}
		if len(p.Targets) == 0 {
			panelProblems = append(panelProblems, p.Title+": no query")
		}
		for _, tg := range p.Targets {
			if tg.Datasource == nil || tg.Datasource.UID != dsRef {
				panelProblems = append(panelProblems, p.Title+" "+tg.RefID+": target data source is not "+dsRef)
			}
			for _, m := range used.FindAllStringSubmatch(tg.Expr, -1) {
				if _, ok := vars[m[1]]; !ok && !strings.HasPrefix(m[1], "__") {
					panelProblems = append(panelProblems, p.Title+" "+tg.RefID+": undefined variable $"+m[1])
				}
			}
		}
	}
	var varProblems []string
	for _, name := range []string{"namespace", "pod", "adapter_namespace", "adapter_pod"} {
		if _, ok := vars[name]; !ok {
			varProblems = append(varProblems, name+" undefined")
		}
	}
	for _, v := range d.Templating.List {
		if v.Type == "query" && (v.Datasource == nil || v.Datasource.UID != dsRef) {
			varProblems = append(varProblems, v.Name)
		}
	}

	tests := []struct {
		name string
		ok   bool
	}{
		{name: "id is null, so import creates the dashboard", ok: d.ID == nil},
		{name: "a stable uid", ok: d.UID == "kn-event-forwarding-proxy"},
		{name: "no __inputs to fill in at import", ok: len(d.Inputs) == 0},
		{name: "a datasource variable of type prometheus", ok: vars["datasource"].Type == "datasource" && strings.Contains(string(vars["datasource"].Query), "prometheus")},
		{name: "query variables use the datasource variable: " + strings.Join(varProblems, "; "), ok: len(varProblems) == 0},
		{name: "panels well formed: " + strings.Join(panelProblems, "; "), ok: len(panelProblems) == 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if !tc.ok {
				t.Error("not so")
			}
		})
	}
}

// TestDashboardShowsWhatOperatorsWatch checks that some panel reads each
// series an operator needs to run the proxy: held calls against
// capacity, per pod and tenant, refusals by reason, latency by outcome,
// admission latency, async backlog and final failures, memory per pod;
// and the PingSource adapter: its sends by route and outcome, whether it
// forwards, its sources, sends in flight, fallbacks by reason, hand-off
// time, tick lateness and Leases per pod.
func TestDashboardShowsWhatOperatorsWatch(t *testing.T) {
	tests := []struct {
		name string
		expr string // a fragment some panel's query has
	}{
		{name: "held calls per pod", expr: "sum by (pod) (kn_forward_active_requests"},
		{name: "held calls in total", expr: "sum(kn_forward_active_requests"},
		{name: "capacity", expr: "sum(kn_forward_capacity"},
		{name: "held calls by tenant", expr: "sum by (tenant) (kn_forward_tenant_active_requests"},
		{name: "held calls by destination namespace, renamed by the label clash", expr: "sum by (exported_namespace) (kn_forward_active_requests"},
		{name: "refusals by reason", expr: "sum by (reason) (rate(kn_forward_rejected_total"},
		{name: "latency percentiles by outcome", expr: "sum by (outcome, le) (rate(kn_forward_request_duration_seconds_bucket"},
		{name: "admission latency", expr: "sum by (le) (rate(kn_forward_admission_duration_seconds_bucket"},
		{name: "async backlog", expr: "sum by (pod) (kn_forward_async_pending"},
		{name: "async final failures", expr: `kn_forward_async_deliveries_total{outcome=~"failed|abandoned"`},
		{name: "memory per pod", expr: "max by (pod) (container_memory_working_set_bytes"},
		{name: "memory limit", expr: `kube_pod_container_resource_limits{resource="memory"`},
		{name: "adapter sends by route and outcome", expr: "sum by (route, outcome) (rate(kn_forward_sender_sends_total"},
		{name: "adapter forwards or not, per pod", expr: "max by (pod) (kn_forward_sender_forwarding"},
		{name: "adapter direct sources", expr: "(kn_forward_sender_direct_sources"},
		{name: "adapter sends in flight by route", expr: "sum by (route) (kn_forward_sender_inflight"},
		{name: "adapter fallbacks by reason", expr: "sum by (reason) (rate(kn_forward_sender_fallbacks_total"},
		{name: "adapter hand-off p99 by route", expr: "histogram_quantile(0.99, sum by (route, le) (rate(kn_forward_sender_handoff_duration_seconds_bucket"},
		{name: "adapter tick lateness p99 per pod", expr: "histogram_quantile(0.99, sum by (pod, le) (rate(kn_forward_mtping_tick_lateness_seconds_bucket"},
		{name: "adapter leases per pod", expr: "sum by (pod) (kn_forward_mtping_leases_held"},
		{name: "adapter in-flight sends per pod", expr: "sum by (pod) (kn_forward_mtping_inflight_sends"},
	}
	all := dashboardQueries(t, nil)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if !slices.ContainsFunc(all, func(q query) bool { return strings.Contains(q.expr, tc.expr) }) {
				t.Errorf("no query contains %q", tc.expr)
			}
		})
	}
}
