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
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"text/template"

	"github.com/prometheus/prometheus/promql/parser"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// query is one PromQL expression that an operator's tools evaluate.
type query struct {
	where string // file and rule, panel or variable
	expr  string
}

// ruleFile is a Prometheus rules file; the PrometheusRule's spec has the
// same shape. Strict decoding rejects any field Prometheus does not know.
type ruleFile struct {
	Groups []ruleGroup `json:"groups"`
}

type ruleGroup struct {
	Name     string `json:"name"`
	Interval string `json:"interval,omitempty"`
	Rules    []rule `json:"rules"`
}

type rule struct {
	Record      string            `json:"record,omitempty"`
	Alert       string            `json:"alert,omitempty"`
	Expr        string            `json:"expr"`
	For         string            `json:"for,omitempty"`
	Labels      map[string]string `json:"labels,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

// name is the rule's record or alert name.
func (r rule) name() string { return r.Record + r.Alert }

func loadRules(t *testing.T) ruleFile {
	t.Helper()
	var rf ruleFile
	if err := yaml.UnmarshalStrict(readRepoFile(t, rulesFile), &rf); err != nil {
		t.Fatalf("%s: %v", rulesFile, err)
	}
	return rf
}

// ruleQueries returns the expression of every rule in rules.yaml.
func ruleQueries(t *testing.T) []query {
	t.Helper()
	var qs []query
	for _, g := range loadRules(t).Groups {
		for _, r := range g.Rules {
			qs = append(qs, query{where: rulesFile + " " + r.name(), expr: r.Expr})
		}
	}
	return qs
}

// dashboard is the part of Grafana's dashboard model the tests read.
type dashboard struct {
	ID         *int    `json:"id"`
	UID        string  `json:"uid"`
	Title      string  `json:"title"`
	Panels     []panel `json:"panels"`
	Inputs     []any   `json:"__inputs"`
	Templating struct {
		List []variable `json:"list"`
	} `json:"templating"`
}

type panel struct {
	ID         int                      `json:"id"`
	Type       string                   `json:"type"`
	Title      string                   `json:"title"`
	Datasource *datasourceRef           `json:"datasource"`
	GridPos    struct{ H, W, X, Y int } `json:"gridPos"`
	Targets    []target                 `json:"targets"`
	Panels     []panel                  `json:"panels"` // a collapsed row's panels
}

type target struct {
	Datasource *datasourceRef `json:"datasource"`
	Expr       string         `json:"expr"`
	RefID      string         `json:"refId"`
}

type datasourceRef struct {
	Type string `json:"type"`
	UID  string `json:"uid"`
}

type variable struct {
	Name       string          `json:"name"`
	Type       string          `json:"type"`
	Query      json.RawMessage `json:"query"` // a string, or {"query": "..."}
	Datasource *datasourceRef  `json:"datasource"`
}

// queryText is a query variable's query, in either of Grafana's forms.
func (v variable) queryText() string {
	var s string
	if json.Unmarshal(v.Query, &s) == nil {
		return s
	}
	var o struct {
		Query string `json:"query"`
	}
	_ = json.Unmarshal(v.Query, &o)
	return o.Query
}

func loadDashboard(t *testing.T) dashboard {
	t.Helper()
	var d dashboard
	dec := json.NewDecoder(bytes.NewReader(readRepoFile(t, dashboardFile)))
	if err := dec.Decode(&d); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	return d
}

// allPanels flattens rows: top-level panels and those of collapsed rows.
func (d dashboard) allPanels() []panel {
	var out []panel
	for _, p := range d.Panels {
		out = append(out, p)
		out = append(out, p.Panels...)
	}
	return out
}

// grafanaBuiltins are the interval variables Grafana substitutes, and the
// range they stand for when a test evaluates the query.
var grafanaBuiltins = regexp.MustCompile(`\$(__rate_interval|__interval|__range)\b|\$\{(__rate_interval|__interval|__range)\}`)

// labelValues matches a variable query label_values(selector, label).
var labelValues = regexp.MustCompile(`^\s*label_values\((.*),\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*\)\s*$`)

// dashboardQueries returns every panel target's expression and every query
// variable's selector (as an aggregation by its label), with Grafana's
// interval variables replaced by 5m and vars substituted ($name and
// ${name}); variables not in vars are left as they are.
func dashboardQueries(t *testing.T, vars map[string]string) []query {
	t.Helper()
	d := loadDashboard(t)
	subst := func(expr string) string { return substVars(expr, vars) }
	var qs []query
	for _, p := range d.allPanels() {
		for _, tg := range p.Targets {
			qs = append(qs, query{where: fmt.Sprintf("%s panel %q %s", dashboardFile, p.Title, tg.RefID), expr: subst(tg.Expr)})
		}
	}
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		m := labelValues.FindStringSubmatch(v.queryText())
		if m == nil {
			t.Fatalf("%s variable %s: want label_values(selector, label), got %q", dashboardFile, v.Name, v.queryText())
		}
		qs = append(qs, query{where: dashboardFile + " variable " + v.Name, expr: subst(fmt.Sprintf("count by (%s) (%s)", m[2], m[1]))})
	}
	return qs
}

// substVars replaces Grafana's interval variables in expr by 5m and the
// variables of vars ($name and ${name}); others are left as they are.
func substVars(expr string, vars map[string]string) string {
	expr = grafanaBuiltins.ReplaceAllString(expr, "5m")
	for name, value := range vars {
		expr = strings.ReplaceAll(expr, "${"+name+"}", value)
		expr = regexp.MustCompile(`\$`+name+`\b`).ReplaceAllString(expr, value)
	}
	return expr
}

// adapterRule is one Prometheus Adapter custom-metrics rule.
type adapterRule struct {
	SeriesQuery string `json:"seriesQuery"`
	Resources   struct {
		Overrides map[string]struct {
			Resource string `json:"resource"`
		} `json:"overrides"`
	} `json:"resources"`
	Name struct {
		Matches string `json:"matches"`
		As      string `json:"as"`
	} `json:"name"`
	MetricsQuery string `json:"metricsQuery"`
}

// loadAdapterRule returns the adapter rule that serves metric.
func loadAdapterRule(t *testing.T, metric string) adapterRule {
	t.Helper()
	var cm corev1.ConfigMap
	if err := yaml.Unmarshal(readRepoFile(t, adapterFile), &cm); err != nil {
		t.Fatalf("%s: %v", adapterFile, err)
	}
	var cfg struct {
		Rules []adapterRule `json:"rules"`
	}
	if err := yaml.UnmarshalStrict([]byte(cm.Data["config.yaml"]), &cfg); err != nil {
		t.Fatalf("%s config.yaml: %v", adapterFile, err)
	}
	for _, r := range cfg.Rules {
		if r.Name.As == metric {
			return r
		}
	}
	t.Fatalf("%s: no rule serves %s", adapterFile, metric)
	return adapterRule{}
}

// render expands the rule's metricsQuery the way Prometheus Adapter does
// for a Pods metric request: the series found by seriesQuery, the label
// matchers of the requested namespace and pods, grouped by the pod label.
func (r adapterRule) render(t *testing.T, namespace, pod string) string {
	t.Helper()
	sel, err := parser.ParseMetricSelector(r.SeriesQuery)
	if err != nil {
		t.Fatalf("%s seriesQuery %q: %v", adapterFile, r.SeriesQuery, err)
	}
	var series string
	for _, m := range sel {
		if m.Name == "__name__" {
			series = m.Value
		}
	}
	tmpl, err := template.New("metricsQuery").Delims("<<", ">>").Parse(r.MetricsQuery)
	if err != nil {
		t.Fatalf("%s metricsQuery: %v", adapterFile, err)
	}
	var b strings.Builder
	err = tmpl.Execute(&b, struct {
		Series        string
		LabelMatchers string
		GroupBy       string
		GroupBySlice  []string
	}{
		Series:        series,
		LabelMatchers: fmt.Sprintf(`namespace=%q,pod=~%q`, namespace, pod),
		GroupBy:       "pod",
		GroupBySlice:  []string{"pod"},
	})
	if err != nil {
		t.Fatalf("%s metricsQuery: %v", adapterFile, err)
	}
	return b.String()
}

// adapterQueries returns the queries of the adapter rules (the proxy's
// held calls, the PingSource adapter's held sends), rendered.
func adapterQueries(t *testing.T) []query {
	t.Helper()
	var qs []query
	for _, tc := range []struct{ metric, namespace, pod string }{
		{metric: "kn_forward_active_requests", namespace: targetNamespace, pod: targetPod},
		{metric: "kn_forward_mtping_inflight_sends", namespace: mtpingNamespace, pod: mtpingPod},
	} {
		r := loadAdapterRule(t, tc.metric)
		qs = append(qs,
			query{where: adapterFile + " " + tc.metric + " seriesQuery", expr: r.SeriesQuery},
			query{where: adapterFile + " " + tc.metric + " metricsQuery", expr: r.render(t, tc.namespace, tc.pod)})
	}
	return qs
}
