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
	"fmt"
	"slices"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"
)

// grant is one verb on one resource that config/ gives one account, in a
// namespace or (scope "cluster") everywhere.
type grant struct {
	account, scope, resource, verb string
}

func (g grant) String() string {
	return fmt.Sprintf("%s may %s %s in %s", g.account, g.verb, g.resource, g.scope)
}

// needs is why each grant of config/ exists: the code that uses it and the
// test that fails without it (docs/security.md, "What each account can
// do"). A grant config/ gives that is not here is unused; one here that
// config/ does not give is missing.
var needs = map[grant]string{
	{"event-forwarding-proxy", "cluster", "nonResource:/.well-known/openid-configuration", "get"}: "proxy/auth: OIDC discovery (test/e2e TestOIDCAgainstARealAPIServer)",
	{"event-forwarding-proxy", "cluster", "nonResource:/openid/v1/jwks", "get"}:                   "proxy/auth: token keys (test/e2e TestOIDCAgainstARealAPIServer)",
	{"event-forwarding-proxy", "knative-eventing", "configmaps", "get"}:                           "trustbundles.Watch (test/cluster TestRealPath, https sinks)",
	{"event-forwarding-proxy", "knative-eventing", "configmaps", "list"}:                          "trustbundles.Watch: the informer's list",
	{"event-forwarding-proxy", "knative-eventing", "configmaps", "watch"}:                         "trustbundles.Watch: the informer's watch",

	{"event-forwarding-pingsource-adapter", "cluster", "sources.knative.dev/pingsources", "list"}:       "adapter/mtping: the PingSource informer's list (test/mtping TestOneAdapter)",
	{"event-forwarding-pingsource-adapter", "cluster", "sources.knative.dev/pingsources", "watch"}:      "adapter/mtping: the PingSource informer's watch (test/mtping TestOneAdapter)",
	{"event-forwarding-pingsource-adapter", "cluster", "serviceaccounts/token", "create"}:               "adapter/kube.TokenRequester: the sources' OIDC tokens (test/mtping TestOneAdapter, test/cluster TestOIDC)",
	{"event-forwarding-pingsource-adapter", "knative-eventing", "configmaps", "get"}:                    "adapter/kube.WatchForwarding and mtping.ReadSettings (test/cluster TestAdapter: the settings' drain timeout)",
	{"event-forwarding-pingsource-adapter", "knative-eventing", "configmaps", "list"}:                   "adapter/kube.WatchForwarding: the informer's list (test/mtping TestOneAdapter)",
	{"event-forwarding-pingsource-adapter", "knative-eventing", "configmaps", "watch"}:                  "adapter/kube.WatchForwarding: the informer's watch (test/mtping threshold)",
	{"event-forwarding-pingsource-adapter", "knative-eventing", "coordination.k8s.io/leases", "get"}:    "adapter/mtping: the buckets' resourcelock (test/mtping TestTwoAdapters)",
	{"event-forwarding-pingsource-adapter", "knative-eventing", "coordination.k8s.io/leases", "create"}: "adapter/mtping: a bucket's Lease or member slot taken first (test/mtping TestTwoAdapters)",
	{"event-forwarding-pingsource-adapter", "knative-eventing", "coordination.k8s.io/leases", "update"}: "adapter/mtping: Leases and member slots renewed, taken over and released (test/mtping TestTwoAdapters)",
	{"event-forwarding-pingsource-adapter", "knative-eventing", "coordination.k8s.io/leases", "list"}:   "adapter/mtping.memberSlots.sync (test/mtping TestSharesFollowReplicas), watchGates' list",
	{"event-forwarding-pingsource-adapter", "knative-eventing", "coordination.k8s.io/leases", "watch"}:  "adapter/mtping.watchGates: upstream's Leases watched by name (test/cluster TestUpgradeRollbackUninstall)",
	{"event-forwarding-pingsource-adapter", "knative-eventing", "pods", "get"}:                          "adapter/kube.PodRoute: its Pod's UID for the Events (test/mtping TestRouteOnThePod)",
	{"event-forwarding-pingsource-adapter", "knative-eventing", "events", "create"}:                     "adapter/kube.PodRoute: an Event per switch (test/mtping TestRouteOnThePod)",
	{"event-forwarding-pingsource-adapter", "knative-eventing", "events", "patch"}:                      "adapter/kube.PodRoute: a repeat counted (client-go's event broadcaster)",
}

// TestEveryGrantIsNeeded reads the Roles, ClusterRoles and their bindings
// in config/ and checks each verb they give an account against needs.
func TestEveryGrantIsNeeded(t *testing.T) {
	granted := map[grant]string{} // where config/ gives it
	roles := map[string][]rbacv1.PolicyRule{}
	type binding struct {
		doc      string
		role     string // kind/name, namespace-qualified for a Role
		scope    string
		subjects []rbacv1.Subject
	}
	var bindings []binding
	for _, d := range loadConfig(t) {
		switch d.GVK.Kind {
		case "Role", "ClusterRole":
			var r rbacv1.ClusterRole // a Role's fields are a subset
			if err := yaml.Unmarshal(d.YAML, &r); err != nil {
				t.Fatalf("%s: %v", d, err)
			}
			if r.AggregationRule != nil {
				t.Errorf("%s aggregates other roles: what it grants is not in config/", d)
			}
			roles[d.GVK.Kind+"/"+d.Namespace+"/"+d.Name] = r.Rules
		case "RoleBinding", "ClusterRoleBinding":
			var b rbacv1.RoleBinding
			if err := yaml.Unmarshal(d.YAML, &b); err != nil {
				t.Fatalf("%s: %v", d, err)
			}
			scope, ns := "cluster", ""
			if d.GVK.Kind == "RoleBinding" {
				scope = d.Namespace
				if b.RoleRef.Kind == "Role" {
					ns = d.Namespace
				}
			}
			bindings = append(bindings, binding{d.String(), b.RoleRef.Kind + "/" + ns + "/" + b.RoleRef.Name, scope, b.Subjects})
		}
	}
	for _, b := range bindings {
		rules, ok := roles[b.role]
		if !ok {
			if !strings.HasPrefix(b.role, "ClusterRole//system:") {
				t.Errorf("%s binds %s, which config/ does not define", b.doc, b.role)
				continue
			}
			// Kubernetes' own role: only the discovery one is bound.
			rules = []rbacv1.PolicyRule{{NonResourceURLs: []string{"/.well-known/openid-configuration", "/openid/v1/jwks"}, Verbs: []string{"get"}}}
		}
		for _, s := range b.subjects {
			if s.Kind != "ServiceAccount" || s.Namespace != "knative-eventing" {
				t.Errorf("%s binds %s %s/%s: only the release's service accounts are expected", b.doc, s.Kind, s.Namespace, s.Name)
				continue
			}
			for _, r := range rules {
				if len(r.ResourceNames) > 0 {
					t.Errorf("%s: rule %v names resources; needs has no entry for it", b.doc, r)
				}
				var things []string
				for _, u := range r.NonResourceURLs {
					things = append(things, "nonResource:"+u)
				}
				for _, g := range r.APIGroups {
					for _, res := range r.Resources {
						things = append(things, strings.TrimPrefix(g+"/"+res, "/"))
					}
				}
				for _, thing := range things {
					for _, v := range r.Verbs {
						granted[grant{s.Name, b.scope, thing, v}] = b.doc
					}
				}
			}
		}
	}
	for g, doc := range granted {
		if _, ok := needs[g]; !ok {
			t.Errorf("%s (%s): no code needs it; remove it, or say in needs what uses it", g, doc)
		}
	}
	var missing []grant
	for g := range needs {
		if _, ok := granted[g]; !ok {
			missing = append(missing, g)
		}
	}
	slices.SortFunc(missing, func(a, b grant) int { return strings.Compare(a.String(), b.String()) })
	for _, g := range missing {
		t.Errorf("%s: needed (%s) but config/ does not grant it", g, needs[g])
	}
}
