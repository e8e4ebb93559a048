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
	Rules []struct {
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
	} `json:"rules"`
}

// TestPrometheusAdapterRule checks that the rule serves, for each proxy
// pod, the Pods metric the async profile's HPA asks for.
func TestPrometheusAdapterRule(t *testing.T) {
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
	if len(cfg.Rules) != 1 {
		t.Fatalf("%d rules, want 1", len(cfg.Rules))
	}
	rule := cfg.Rules[0]
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
		"Series": heldCalls, "LabelMatchers": `namespace="knative-eventing",pod=~"p1|p2"`, "GroupBy": "pod",
	})
	if err != nil {
		t.Fatalf("metricsQuery: %v", err)
	}
	resource := func(label string) string { return rule.Resources.Overrides[label].Resource }
	tests := []struct {
		name      string
		got, want any
	}{
		{name: "series", got: strings.HasPrefix(rule.SeriesQuery, heldCalls+"{"), want: true},
		{name: "name matches the series", got: matches.MatchString(heldCalls), want: true},
		{name: "exposed as the HPA's metric", got: rule.Name.As, want: heldCalls},
		{name: "pod label is the pod", got: slices.Contains([]string{"pod", "pods"}, resource("pod")), want: true},
		{name: "namespace label is the namespace", got: slices.Contains([]string{"namespace", "namespaces"}, resource("namespace")), want: true},
		{name: "one value per pod, all destinations", got: query.String(),
			want: `sum(kn_forward_active_requests{namespace="knative-eventing",pod=~"p1|p2"}) by (pod)`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.got != tc.want {
				t.Errorf("got %v, want %v", tc.got, tc.want)
			}
		})
	}
}
