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
	"strconv"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"

	servingv1 "knative.dev/serving/pkg/apis/serving/v1"
	"sigs.k8s.io/yaml"

	"knative.dev/event-forwarding-proxy/config"
)

// clusterScoped are the kinds config/ may hold that have no namespace.
var clusterScoped = map[schema.GroupVersionKind]bool{
	rbacv1.SchemeGroupVersion.WithKind("ClusterRole"):        true,
	rbacv1.SchemeGroupVersion.WithKind("ClusterRoleBinding"): true,
	corev1.SchemeGroupVersion.WithKind("Namespace"):          true,
}

func TestDocumentsDecodeStrictly(t *testing.T) {
	s := scheme(t)
	for _, d := range loadConfig(t) {
		t.Run(d.String(), func(t *testing.T) {
			obj, err := decodeStrict(s, d)
			if err != nil {
				t.Fatalf("strict decoding into %s: %v", d.GVK, err)
			}
			m, err := meta.Accessor(obj)
			if err != nil {
				t.Fatal(err)
			}
			if m.GetName() == "" {
				t.Error("metadata.name is empty")
			}
			// ko apply would put an object without a namespace wherever
			// the operator's kubeconfig points.
			if got := m.GetNamespace(); clusterScoped[d.GVK] != (got == "") {
				t.Errorf("namespace %q for a %s, cluster-scoped: %v", got, d.GVK.Kind, clusterScoped[d.GVK])
			}
			if m.GetLabels()["app.kubernetes.io/name"] != "event-forwarding-proxy" {
				t.Errorf("label app.kubernetes.io/name = %q, want event-forwarding-proxy", m.GetLabels()["app.kubernetes.io/name"])
			}
		})
	}
}

// TestRequiredObjects pins what an install needs, so that a file cannot
// silently drop one.
func TestRequiredObjects(t *testing.T) {
	docs := loadConfig(t)
	cm := corev1.SchemeGroupVersion.WithKind("ConfigMap")
	sa := corev1.SchemeGroupVersion.WithKind("ServiceAccount")
	ksvc := servingv1.SchemeGroupVersion.WithKind("Service")
	tests := []struct {
		name string
		file string
		gvk  schema.GroupVersionKind
		obj  string
	}{
		{name: "proxy service account", file: "config/100-serviceaccounts.yaml", gvk: sa, obj: "event-forwarding-proxy"},
		{name: "adapter role", file: "config/200-rbac.yaml", gvk: rbacv1.SchemeGroupVersion.WithKind("Role"), obj: "event-forwarding-pingsource-adapter"},
		{name: "adapter role binding", file: "config/200-rbac.yaml", gvk: rbacv1.SchemeGroupVersion.WithKind("RoleBinding"), obj: "event-forwarding-pingsource-adapter"},
		{name: "eventing config", file: "config/300-config-event-forwarding.yaml", gvk: cm, obj: "config-event-forwarding"},
		{name: "async profile", file: "config/400-proxy.yaml", gvk: ksvc, obj: "event-forwarding-proxy"},
		{name: "sync profile", file: "config/sync/400-proxy.yaml", gvk: ksvc, obj: "event-forwarding-proxy"},
		{name: "async-kpa profile", file: "config/async-kpa/400-proxy.yaml", gvk: ksvc, obj: "event-forwarding-proxy"},
		{name: "adapter rule", file: "config/async/500-prometheus-adapter.yaml", gvk: cm, obj: "event-forwarding-prometheus-adapter"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			find(t, docs, tc.file, tc.gvk, tc.obj)
		})
	}
}

// TestEventForwardingConfigMap checks the shipped ConfigMap sets no key
// (so re-applying config/ never resets an operator's value), that it reads
// as forwarding off with the default threshold, and that its _example
// block names every key with its default.
func TestEventForwardingConfigMap(t *testing.T) {
	d := find(t, loadConfig(t), "config/300-config-event-forwarding.yaml",
		corev1.SchemeGroupVersion.WithKind("ConfigMap"), "config-event-forwarding")
	obj, err := decodeStrict(scheme(t), d)
	if err != nil {
		t.Fatal(err)
	}
	cm := obj.(*corev1.ConfigMap)
	if cm.Namespace != "knative-eventing" {
		t.Errorf("namespace = %q, want knative-eventing", cm.Namespace)
	}
	for k := range cm.Data {
		if k != "_example" {
			t.Errorf("data sets %q: re-applying config/ would reset an operator's value", k)
		}
	}
	shipped, err := config.NewForwardingFromMap(cm.Data)
	if err != nil {
		t.Fatal(err)
	}
	if shipped.Enabled() || shipped.Threshold != config.DefaultForwardingThreshold {
		t.Errorf("the shipped ConfigMap reads as %v, want off with threshold %d", shipped, config.DefaultForwardingThreshold)
	}
	var example map[string]string
	if err := yaml.UnmarshalStrict([]byte(cm.Data["_example"]), &example); err != nil {
		t.Fatalf("_example: %v", err)
	}
	want := map[string]string{
		config.ForwardingProxyKey:             "",
		config.ForwardingThresholdKey:         strconv.Itoa(config.DefaultForwardingThreshold),
		config.ForwardingInflightThresholdKey: strconv.Itoa(config.DefaultForwardingInflightThreshold),
		config.ForwardingInflightHoldKey:      "5m",
		config.ForwardingDeadLetterSinkKey:    "",
		config.ForwardingBackoffPolicyKey:     "exponential",
		config.ForwardingRetryAfterMaxKey:     "",
	}
	ex, err := config.NewForwardingFromMap(example)
	if err != nil || ex.InflightHold != config.DefaultForwardingInflightHold {
		t.Errorf("the example's hold reads as %v (%v), the default is %s", ex, err, config.DefaultForwardingInflightHold)
	}
	if err == nil && (ex.DeadLetterSink != nil || ex.LinearBackoff || ex.RetryAfterMax != 0 || ex.IgnoreRetryAfter) {
		t.Errorf("the example's delivery keys read as %+v, want the defaults: no dead-letter sink, exponential, the source's own cap", ex)
	}
	if diff := cmp.Diff(want, example); diff != "" {
		t.Errorf("_example (-want +got):\n%s", diff)
	}
}
