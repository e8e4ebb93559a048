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

package manifests

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/restmapper"
	"sigs.k8s.io/yaml"

	"knative.dev/pkg/configmap/informer"
	"knative.dev/serving/pkg/apis/autoscaling"

	"knative.dev/event-forwarding-proxy/test/apiserver"
)

const fieldManager = "event-forwarding-manifests-test"

// TestAPIServer applies everything under config/ to a real API server, in
// the order `ko apply -f config/ -f config/async/ -f config/sync/ -f
// config/async-kpa/` would (the default install, then the switch to the
// sync profile, then to the async-kpa one), then checks what the objects
// grant and that sources see ConfigMap edits.
func TestAPIServer(t *testing.T) {
	docs := loadConfig(t)
	s := apiserver.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	client := kubernetes.NewForConfigOrDie(s.Config)

	// Namespaces first: knative-eventing exists in a Knative install, the
	// others (monitoring) where their components run.
	namespaces := map[string]bool{"knative-eventing": true}
	for _, d := range docs {
		if d.Namespace != "" {
			namespaces[d.Namespace] = true
		}
	}
	for ns := range namespaces {
		_, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}

	t.Run("apply", func(t *testing.T) { applyAll(ctx, t, s, docs) })
	t.Run("each profile replaced the one before", func(t *testing.T) { testProfileSwitch(ctx, t, s) })
	if t.Failed() {
		return
	}
	t.Run("access", func(t *testing.T) { testAccess(ctx, t, client, configAccess) })
	t.Run("ConfigMap watcher sees edits", func(t *testing.T) { testConfigWatcher(ctx, t, client) })
	// Eventing's own RBAC for its adapter account, as its release has it.
	var eventing []Document
	for _, f := range upstreamRBAC {
		docs, err := readFile(filepath.Join(must(eventingDir()), "config", "core", f), "eventing:"+f)
		if err != nil {
			t.Fatal(err)
		}
		eventing = append(eventing, docs...)
	}
	t.Run("apply Eventing's adapter RBAC", func(t *testing.T) { applyAll(ctx, t, s, eventing) })
	t.Run("access with Eventing's RBAC", func(t *testing.T) { testAccess(ctx, t, client, adapterAccess) })
}

// access is one question to the API server: may user do this, and the
// answer expected.
type access struct {
	name    string
	user    string
	res     *authorizationv1.ResourceAttributes
	nonRes  *authorizationv1.NonResourceAttributes
	allowed bool
}

const (
	adapterUser = "system:serviceaccount:knative-eventing:" + adapterAccount
	proxyUser   = "system:serviceaccount:knative-eventing:event-forwarding-proxy"
)

func res(verb, group, resource, sub, ns string) *authorizationv1.ResourceAttributes {
	return &authorizationv1.ResourceAttributes{Verb: verb, Group: group, Resource: resource, Subresource: sub, Namespace: ns}
}

// configAccess is what config/ alone gives: the proxy's account all it
// needs, Eventing's adapter account the reading of Pods in
// knative-eventing and nothing else.
var configAccess = []access{
	{name: "adapter reads its pod", user: adapterUser, res: res("get", "", "pods", "", "knative-eventing"), allowed: true},
	{name: "adapter reads no pod elsewhere", user: adapterUser, res: res("get", "", "pods", "", "tenant")},
	{name: "adapter changes no pod", user: adapterUser, res: res("patch", "", "pods", "", "knative-eventing")},
	{name: "adapter updates no pod", user: adapterUser, res: res("update", "", "pods", "", "knative-eventing")},
	{name: "adapter lists no pods", user: adapterUser, res: res("list", "", "pods", "", "knative-eventing")},
	{name: "config/ gives the adapter no pingsources", user: adapterUser, res: res("list", "sources.knative.dev", "pingsources", "", "")},
	{name: "config/ gives the adapter no leases", user: adapterUser, res: res("create", "coordination.k8s.io", "leases", "", "knative-eventing")},
	{name: "config/ gives the adapter no configmaps", user: adapterUser, res: res("get", "", "configmaps", "", "knative-eventing")},
	{name: "config/ gives the adapter no events", user: adapterUser, res: res("create", "", "events", "", "knative-eventing")},
	{name: "config/ gives the adapter no tokens", user: adapterUser, res: res("create", "", "serviceaccounts", "token", "tenant")},
	{name: "control: another account reads no pods", user: "system:serviceaccount:knative-eventing:other", res: res("get", "", "pods", "", "knative-eventing")},
	{name: "proxy reads OIDC discovery", user: proxyUser, nonRes: &authorizationv1.NonResourceAttributes{Verb: "get", Path: "/.well-known/openid-configuration"}, allowed: true},
	{name: "proxy reads the JWKS", user: proxyUser, nonRes: &authorizationv1.NonResourceAttributes{Verb: "get", Path: "/openid/v1/jwks"}, allowed: true},
	{name: "proxy reads no pingsources", user: proxyUser, res: res("list", "sources.knative.dev", "pingsources", "", "")},
	{name: "proxy watches the trust bundles", user: proxyUser, res: res("watch", "", "configmaps", "", "knative-eventing"), allowed: true},
	{name: "proxy reads no tenant's configmaps", user: proxyUser, res: res("list", "", "configmaps", "", "tenant")},
	{name: "proxy writes no configmaps", user: proxyUser, res: res("update", "", "configmaps", "", "knative-eventing")},
	{name: "proxy reads no pods", user: proxyUser, res: res("get", "", "pods", "", "knative-eventing")},
}

// adapterAccess is what the adapter does, with Eventing's RBAC and
// config/'s together, and what it still may not.
var adapterAccess = []access{
	{name: "adapter watches pingsources everywhere", user: adapterUser, res: res("watch", "sources.knative.dev", "pingsources", "", ""), allowed: true},
	{name: "adapter lists pingsources everywhere", user: adapterUser, res: res("list", "sources.knative.dev", "pingsources", "", ""), allowed: true},
	{name: "adapter watches eventing configmaps", user: adapterUser, res: res("watch", "", "configmaps", "", "knative-eventing"), allowed: true},
	{name: "adapter takes leases", user: adapterUser, res: res("create", "coordination.k8s.io", "leases", "", "knative-eventing"), allowed: true},
	{name: "adapter renews leases", user: adapterUser, res: res("update", "coordination.k8s.io", "leases", "", "knative-eventing"), allowed: true},
	{name: "adapter watches upstream's leases", user: adapterUser, res: res("watch", "coordination.k8s.io", "leases", "", "knative-eventing"), allowed: true},
	{name: "adapter deletes no leases", user: adapterUser, res: res("delete", "coordination.k8s.io", "leases", "", "knative-eventing")},
	{name: "adapter records events about its pod", user: adapterUser, res: res("create", "", "events", "", "knative-eventing"), allowed: true},
	{name: "adapter counts repeated events", user: adapterUser, res: res("patch", "", "events", "", "knative-eventing"), allowed: true},
	{name: "adapter reads its pod", user: adapterUser, res: res("get", "", "pods", "", "knative-eventing"), allowed: true},
	{name: "adapter changes no pod", user: adapterUser, res: res("patch", "", "pods", "", "knative-eventing")},
	{name: "adapter updates no pod", user: adapterUser, res: res("update", "", "pods", "", "knative-eventing")},
	{name: "adapter deletes no pod", user: adapterUser, res: res("delete", "", "pods", "", "knative-eventing")},
	{name: "adapter mints OIDC tokens", user: adapterUser, res: res("create", "", "serviceaccounts", "token", "tenant"), allowed: true},
	{name: "adapter reads no secrets", user: adapterUser, res: res("get", "", "secrets", "", "knative-eventing")},
	{name: "adapter changes no deployment", user: adapterUser, res: res("patch", "apps", "deployments", "", "knative-eventing")},
}

// applyAll server-side applies each document with strict field validation:
// the API server's schemas (built-in and the Knative CRDs) must accept
// every field.
func applyAll(ctx context.Context, t *testing.T, s *apiserver.Server, docs []Document) {
	dyn := dynamic.NewForConfigOrDie(s.Config)
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(kubernetes.NewForConfigOrDie(s.Config).Discovery()))
	for _, d := range docs {
		t.Run(d.String(), func(t *testing.T) {
			mapping, err := mapper.RESTMapping(d.GVK.GroupKind(), d.GVK.Version)
			if err != nil {
				t.Fatal(err)
			}
			body, err := yaml.YAMLToJSON(d.YAML)
			if err != nil {
				t.Fatal(err)
			}
			var ri dynamic.ResourceInterface = dyn.Resource(mapping.Resource)
			if d.Namespace != "" {
				ri = dyn.Resource(mapping.Resource).Namespace(d.Namespace)
			}
			force := true
			_, err = ri.Patch(ctx, d.Name, types.ApplyPatchType, body, metav1.PatchOptions{
				FieldManager:    fieldManager,
				Force:           &force,
				FieldValidation: metav1.FieldValidationStrict,
			})
			if err != nil {
				t.Fatalf("apply: %v", err)
			}
		})
	}
}

// testProfileSwitch checks that applying config/sync/ over config/, then
// config/async-kpa/, left the Service with the async-kpa profile's
// autoscaling only: annotations only the profiles before set are gone.
func testProfileSwitch(ctx context.Context, t *testing.T, s *apiserver.Server) {
	ksvc := schema.GroupVersionResource{Group: "serving.knative.dev", Version: "v1", Resource: "services"}
	got, err := dynamic.NewForConfigOrDie(s.Config).Resource(ksvc).Namespace("knative-eventing").Get(ctx, proxyName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	annotations, _, _ := unstructured.NestedStringMap(got.Object, "spec", "template", "metadata", "annotations")
	// The last applied: its autoscaling annotations, none left of the
	// profiles before.
	want := loadService(t, asyncKPAFile).Spec.Template.Annotations
	for k, v := range annotations {
		if strings.HasPrefix(k, autoscaling.GroupName+"/") && want[k] != v {
			t.Errorf("annotation %s = %q, want %q", k, v, want[k])
		}
	}
	for k, v := range want {
		if annotations[k] != v {
			t.Errorf("annotation %s = %q, want %q", k, annotations[k], v)
		}
	}
	if annotations[autoscaling.ClassAnnotationKey] != autoscaling.KPA {
		t.Errorf("class = %q, want %q", annotations[autoscaling.ClassAnnotationKey], autoscaling.KPA)
	}
}

// rbacSyncBound is how long the API server's RBAC authorizer may take
// to see roles and bindings just applied: it reads them from informers,
// which a loaded machine delays.
const rbacSyncBound = 30 * time.Second

// testAccess asks the API server each question of tests, once its RBAC
// authorizer answers yes to every question expected to be allowed: until
// its informers have the roles and bindings just applied, it denies what
// they grant, so a denial read earlier could hide a grant too wide.
func testAccess(ctx context.Context, t *testing.T, client kubernetes.Interface, tests []access) {
	for _, tc := range tests {
		if !tc.allowed {
			continue
		}
		deadline := time.Now().Add(rbacSyncBound)
		for {
			got, err := review(ctx, client, tc)
			if err != nil {
				t.Fatal(err)
			}
			if got.Allowed {
				break
			}
			if time.Now().After(deadline) {
				break // the subtest below reports it
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := review(ctx, client, tc)
			if err != nil {
				t.Fatal(err)
			}
			if got.Allowed != tc.allowed {
				t.Errorf("allowed = %v, want %v (%s)", got.Allowed, tc.allowed, got.Reason)
			}
		})
	}
}

// review asks the API server the question of tc.
func review(ctx context.Context, client kubernetes.Interface, tc access) (authorizationv1.SubjectAccessReviewStatus, error) {
	sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User:                  tc.user,
		Groups:                []string{"system:serviceaccounts", "system:serviceaccounts:knative-eventing", "system:authenticated"},
		ResourceAttributes:    tc.res,
		NonResourceAttributes: tc.nonRes,
	}}
	got, err := client.AuthorizationV1().SubjectAccessReviews().Create(ctx, sar, metav1.CreateOptions{})
	if err != nil {
		return authorizationv1.SubjectAccessReviewStatus{}, err
	}
	return got.Status, nil
}

// testConfigWatcher edits config-event-forwarding through the API server
// and waits for knative.dev/pkg's ConfigMap watcher, which sources use, to
// report the new value.
func testConfigWatcher(ctx context.Context, t *testing.T, client kubernetes.Interface) {
	const (
		name = "config-event-forwarding"
		key  = "event-forwarding-proxy"
		url  = "http://event-forwarding-proxy.knative-eventing.svc.cluster.local"
	)
	seen := make(chan string, 16)
	w := informer.NewInformedWatcher(client, "knative-eventing")
	w.Watch(name, func(cm *corev1.ConfigMap) { seen <- cm.Data[key] })
	stop := make(chan struct{})
	defer close(stop)
	if err := w.Start(stop); err != nil {
		t.Fatal(err)
	}
	waitValue(ctx, t, seen, "") // the applied value: off

	cms := client.CoreV1().ConfigMaps("knative-eventing")
	cm, err := cms.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cm.Data[key] = url
	if _, err := cms.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitValue(ctx, t, seen, url)
}

// waitValue reads values from seen until want arrives or ctx ends.
func waitValue(ctx context.Context, t *testing.T, seen <-chan string, want string) {
	t.Helper()
	deadline, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		select {
		case got := <-seen:
			if got == want {
				return
			}
		case <-deadline.Done():
			t.Fatalf("the watcher did not see %q: %v", want, deadline.Err())
		}
	}
}
