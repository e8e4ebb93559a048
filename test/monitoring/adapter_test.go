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

import "testing"

// TestAdapterRuleAgreesWithRules checks the async profile's Prometheus
// Adapter rule against the kit's label choice: it maps the target's
// namespace and pod labels (not the proxy's destination namespace, which
// Prometheus renamed exported_namespace) to the Kubernetes resources, and
// sums over everything else, as namespace_pod:kn_forward_active_requests:sum
// does. TestPrometheusSeesHeldCalls evaluates both against a real scrape.
func TestAdapterRuleAgreesWithRules(t *testing.T) {
	r := loadAdapterRule(t, "kn_forward_active_requests")
	var recorded string
	for _, g := range loadRules(t).Groups {
		for _, rl := range g.Rules {
			if rl.Record == "namespace_pod:kn_forward_active_requests:sum" {
				recorded = rl.Expr
			}
		}
	}
	tests := []struct {
		name      string
		got, want string
	}{
		{name: "namespace label is the namespace resource", got: r.Resources.Overrides["namespace"].Resource, want: "namespace"},
		{name: "pod label is the pod resource", got: r.Resources.Overrides["pod"].Resource, want: "pod"},
		{name: "series", got: r.Name.As, want: "kn_forward_active_requests"},
		{name: "rendered query", got: r.render(t, "ns", "p"), want: `sum(kn_forward_active_requests{namespace="ns",pod=~"p"}) by (pod)`},
		{name: "recording rule", got: recorded, want: "sum by (namespace, pod) (kn_forward_active_requests)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.got != tc.want {
				t.Errorf("got %q, want %q", tc.got, tc.want)
			}
		})
	}
}
