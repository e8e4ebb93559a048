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

package manifests

import (
	"regexp"
	"slices"
	"strings"
	"testing"
	"text/template"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// adapterConfig is the part of Prometheus Adapter's configuration file
// (sigs.k8s.io/prometheus-adapter/pkg/config) the rule uses; decoding it
// strictly catches a misspelt field, which the adapter would ignore.
type adapterConfig struct {
	Rules []adapterRuleConfig `json:"rules"`
}

// adapterRuleConfig is one rule of adapterConfig.
type adapterRuleConfig struct {
	SeriesQuery   string `json:"seriesQuery"`
	SeriesFilters []struct {
		Is    string `json:"is,omitempty"`
		IsNot string `json:"isNot,omitempty"`
	} `json:"seriesFilters,omitempty"`
	Resources struct {
		Template  string `json:"template,omitempty"`
		Overrides map[string]struct {
			Group    string `json:"group,omitempty"`
			Resource string `json:"resource"`
		} `json:"overrides,omitempty"`
	} `json:"resources"`
	Name struct {
		Matches string `json:"matches"`
		As      string `json:"as"`
	} `json:"name"`
	MetricsQuery string `json:"metricsQuery"`
}

// TestPrometheusAdapterRule checks that the rules serve, for each pod, the
// Pods metrics the async profile's two HPAs ask for: the proxy's held
// calls and the PingSource adapter's held sends.
func TestPrometheusAdapterRule(t *testing.T) {
	cfg := loadAdapterConfig(t)
	served := map[string]bool{}
	for _, rule := range cfg.Rules {
		served[rule.Name.As] = true
	}
	for _, metric := range []string{heldCalls, heldSends} {
		t.Run(metric, func(t *testing.T) {
			i := slices.IndexFunc(cfg.Rules, func(r adapterRuleConfig) bool { return r.Name.As == metric })
			if i < 0 {
				t.Fatalf("no rule serves %s (served: %v)", metric, served)
			}
			checkAdapterRule(t, cfg.Rules[i], metric)
		})
	}
	if len(cfg.Rules) != 2 {
		t.Errorf("%d rules, want the 2 the HPAs use", len(cfg.Rules))
	}
}

// loadAdapterConfig is the rules' configuration file, strictly decoded.
func loadAdapterConfig(t *testing.T) adapterConfig {
	t.Helper()
	d := find(t, loadConfig(t), "config/async/500-prometheus-adapter.yaml",
		corev1.SchemeGroupVersion.WithKind("ConfigMap"), "event-forwarding-prometheus-adapter")
	obj, err := decodeStrict(scheme(t), d)
	if err != nil {
		t.Fatal(err)
	}
	var cfg adapterConfig
	if err := yaml.UnmarshalStrict([]byte(obj.(*corev1.ConfigMap).Data["config.yaml"]), &cfg); err != nil {
		t.Fatalf("config.yaml: %v", err)
	}
	return cfg
}

// checkAdapterRule checks rule serves metric as one value per pod of the
// series' namespace, summed over the series' own labels.
func checkAdapterRule(t *testing.T, rule adapterRuleConfig, metric string) {
	t.Helper()
	matches, err := regexp.Compile(rule.Name.Matches)
	if err != nil {
		t.Fatalf("name.matches: %v", err)
	}
	// The adapter renders metricsQuery with these delimiters and fields.
	tmpl, err := template.New("metricsQuery").Delims("<<", ">>").Parse(rule.MetricsQuery)
	if err != nil {
		t.Fatalf("metricsQuery: %v", err)
	}
	var query strings.Builder
	err = tmpl.Execute(&query, map[string]string{
		"Series": metric, "LabelMatchers": `namespace="knative-eventing",pod=~"p1|p2"`, "GroupBy": "pod",
	})
	if err != nil {
		t.Fatalf("metricsQuery: %v", err)
	}
	resource := func(label string) string { return rule.Resources.Overrides[label].Resource }
	tests := []struct {
		name      string
		got, want any
	}{
		{name: "series", got: strings.HasPrefix(rule.SeriesQuery, metric+"{"), want: true},
		{name: "name matches the series", got: matches.MatchString(metric), want: true},
		{name: "pod label is the pod", got: slices.Contains([]string{"pod", "pods"}, resource("pod")), want: true},
		{name: "namespace label is the namespace", got: slices.Contains([]string{"namespace", "namespaces"}, resource("namespace")), want: true},
		{name: "one value per pod, all labels", got: query.String(),
			want: `sum(` + metric + `{namespace="knative-eventing",pod=~"p1|p2"}) by (pod)`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.got != tc.want {
				t.Errorf("got %v, want %v", tc.got, tc.want)
			}
		})
	}
}
