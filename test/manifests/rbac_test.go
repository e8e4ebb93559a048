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
	"path/filepath"
	"slices"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"
)

// grant is one verb on one resource that an account is given, in a
// namespace or (scope "cluster") everywhere.
type grant struct {
	account, scope, resource, verb string
}

func (g grant) String() string {
	return fmt.Sprintf("%s may %s %s in %s", g.account, g.verb, g.resource, g.scope)
}

// adapterAccount is Eventing's account, which the PingSource adapter runs
// under in Eventing's own Deployment.
const adapterAccount = "pingsource-mt-adapter"

// upstreamRBAC are the files of Eventing's release that give its adapter
// account its ClusterRole.
var upstreamRBAC = []string{"200-pingsource-mt-adapter-serviceaccount.yaml", "roles/pingsource-mt-adapter-clusterrole.yaml"}

// needs is why each grant exists: the code that uses it and the test that
// fails without it (docs/security.md, "What each account can do"). A grant
// of config/ that is not here is unused; one here that neither config/
// nor Eventing's own RBAC gives is missing.
var needs = map[grant]string{
	{"event-forwarding-proxy", "cluster", "nonResource:/.well-known/openid-configuration", "get"}: "proxy/auth: OIDC discovery (test/e2e TestOIDCAgainstARealAPIServer)",
	{"event-forwarding-proxy", "cluster", "nonResource:/openid/v1/jwks", "get"}:                   "proxy/auth: token keys (test/e2e TestOIDCAgainstARealAPIServer)",
	{"event-forwarding-proxy", "knative-eventing", "configmaps", "get"}:                           "trustbundles.Watch (test/cluster TestRealPath, https sinks)",
	{"event-forwarding-proxy", "knative-eventing", "configmaps", "list"}:                          "trustbundles.Watch: the informer's list",
	{"event-forwarding-proxy", "knative-eventing", "configmaps", "watch"}:                         "trustbundles.Watch: the informer's watch",

	{adapterAccount, "cluster", "sources.knative.dev/pingsources", "list"}:       "adapter/mtping: the PingSource informer's list (test/mtping TestOneAdapter)",
	{adapterAccount, "cluster", "sources.knative.dev/pingsources", "watch"}:      "adapter/mtping: the PingSource informer's watch (test/mtping TestOneAdapter)",
	{adapterAccount, "cluster", "serviceaccounts/token", "create"}:               "adapter/kube.TokenRequester: the sources' OIDC tokens (test/mtping TestOneAdapter, test/cluster TestOIDC)",
	{adapterAccount, "knative-eventing", "configmaps", "get"}:                    "adapter/kube.WatchForwarding and mtping.ReadSettings (test/cluster TestAdapter: the settings' drain timeout)",
	{adapterAccount, "knative-eventing", "configmaps", "list"}:                   "adapter/kube.WatchForwarding: the informer's list (test/mtping TestOneAdapter)",
	{adapterAccount, "knative-eventing", "configmaps", "watch"}:                  "adapter/kube.WatchForwarding: the informer's watch (test/mtping threshold)",
	{adapterAccount, "knative-eventing", "coordination.k8s.io/leases", "get"}:    "adapter/mtping: the buckets' resourcelock (test/mtping TestTwoAdapters)",
	{adapterAccount, "knative-eventing", "coordination.k8s.io/leases", "create"}: "adapter/mtping: a bucket's Lease or member slot taken first (test/mtping TestTwoAdapters)",
	{adapterAccount, "knative-eventing", "coordination.k8s.io/leases", "update"}: "adapter/mtping: Leases and member slots renewed, taken over and released (test/mtping TestTwoAdapters)",
	{adapterAccount, "knative-eventing", "coordination.k8s.io/leases", "list"}:   "adapter/mtping.memberSlots.sync (test/mtping TestSharesFollowReplicas), watchGates' list",
	{adapterAccount, "knative-eventing", "coordination.k8s.io/leases", "watch"}:  "adapter/mtping.watchGates: upstream's Leases watched by name (test/cluster TestUpgradeRollbackUninstall)",
	{adapterAccount, "knative-eventing", "pods", "get"}:                          "adapter/kube.PodRoute: its Pod's UID for the Events (test/mtping TestRouteOnThePod)",
	{adapterAccount, "knative-eventing", "events", "create"}:                     "adapter/kube.PodRoute: an Event per switch (test/mtping TestRouteOnThePod)",
	{adapterAccount, "knative-eventing", "events", "patch"}:                      "adapter/kube.PodRoute: a repeat counted (client-go's event broadcaster)",
}

// TestEveryGrantIsNeeded reads the Roles, ClusterRoles and their bindings
// in config/ and Eventing's RBAC for its adapter account, and checks each
// verb config/ gives against needs: every grant of config/ is needed and
// not already Eventing's, and every need is granted by one of them.
func TestEveryGrantIsNeeded(t *testing.T) {
	ours := grantsOf(t, loadConfig(t), false)
	var theirs []Document
	for _, f := range upstreamRBAC {
		docs, err := readFile(filepath.Join(must(eventingDir()), "config", "core", f), "eventing:"+f)
		if err != nil {
			t.Fatal(err)
		}
		theirs = append(theirs, docs...)
	}
	upstream := grantsOf(t, theirs, true)
	for g, doc := range ours {
		if _, ok := needs[g]; !ok {
			t.Errorf("%s (%s): no code needs it; remove it, or say in needs what uses it", g, doc)
		}
		if up, ok := covers(upstream, g); ok {
			t.Errorf("%s (%s): Eventing grants it already (%s); remove it", g, doc, up)
		}
	}
	var missing []grant
	for g := range needs {
		_, inOurs := covers(ours, g)
		_, inTheirs := covers(upstream, g)
		if !inOurs && !inTheirs {
			missing = append(missing, g)
		}
	}
	slices.SortFunc(missing, func(a, b grant) int { return strings.Compare(a.String(), b.String()) })
	for _, g := range missing {
		t.Errorf("%s: needed (%s) but neither config/ nor Eventing grants it", g, needs[g])
	}
}

// covers says which grant of granted allows g: g itself, or the same
// verb on the same resource everywhere.
func covers(granted map[grant]string, g grant) (string, bool) {
	if doc, ok := granted[g]; ok {
		return doc, true
	}
	g.scope = "cluster"
	doc, ok := granted[g]
	return doc, ok
}

// grantsOf returns what the roles and bindings of docs give, each with the
// document that binds it. Only the release's accounts (or, for Eventing's
// RBAC, its adapter's) may be bound.
func grantsOf(t *testing.T, docs []Document, upstream bool) map[grant]string {
	t.Helper()
	granted := map[grant]string{}
	roles := map[string][]rbacv1.PolicyRule{}
	type binding struct {
		doc      string
		role     string // kind/name, namespace-qualified for a Role
		scope    string
		subjects []rbacv1.Subject
	}
	var bindings []binding
	for _, d := range docs {
		switch d.GVK.Kind {
		case "Role", "ClusterRole":
			var r rbacv1.ClusterRole // a Role's fields are a subset
			if err := yaml.Unmarshal(d.YAML, &r); err != nil {
				t.Fatalf("%s: %v", d, err)
			}
			if r.AggregationRule != nil {
				t.Errorf("%s aggregates other roles: what it grants is not in the file", d)
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
	accounts := []string{"event-forwarding-proxy", adapterAccount}
	if upstream {
		accounts = []string{adapterAccount}
	}
	for _, b := range bindings {
		rules, ok := roles[b.role]
		if !ok {
			if upstream || !strings.HasPrefix(b.role, "ClusterRole//system:") {
				t.Errorf("%s binds %s, which its files do not define", b.doc, b.role)
				continue
			}
			// Kubernetes' own role: only the discovery one is bound.
			rules = []rbacv1.PolicyRule{{NonResourceURLs: []string{"/.well-known/openid-configuration", "/openid/v1/jwks"}, Verbs: []string{"get"}}}
		}
		for _, s := range b.subjects {
			if s.Kind != "ServiceAccount" || s.Namespace != "knative-eventing" || !slices.Contains(accounts, s.Name) {
				t.Errorf("%s binds %s %s/%s: only %v are expected", b.doc, s.Kind, s.Namespace, s.Name, accounts)
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
	return granted
}

// must returns v, panicking on err: for values a test cannot go on without
// and that other helpers already checked.
func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
