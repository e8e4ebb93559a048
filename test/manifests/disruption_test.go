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
	"testing"

	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"knative.dev/serving/pkg/apis/serving"
)

const budgetsFile = "config/500-disruption-budgets.yaml"

// TestDisruptionBudgets checks that each budget lets one pod go at a time
// and selects exactly the pods it is for: every revision's pods of the
// proxy Service (Knative labels them with the Service's name), and the
// pods of Eventing's adapter Deployment, as its own selector does.
func TestDisruptionBudgets(t *testing.T) {
	docs := loadConfig(t)
	budget := func(name string) *policyv1.PodDisruptionBudget {
		t.Helper()
		obj, err := decodeStrict(scheme(t), find(t, docs, budgetsFile, policyv1.SchemeGroupVersion.WithKind("PodDisruptionBudget"), name))
		if err != nil {
			t.Fatal(err)
		}
		return obj.(*policyv1.PodDisruptionBudget)
	}
	selects := func(t *testing.T, pdb *policyv1.PodDisruptionBudget, pod map[string]string, what string, want bool) {
		t.Helper()
		sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
		if err != nil {
			t.Fatal(err)
		}
		if got := !sel.Empty() && sel.Matches(labels.Set(pod)); got != want {
			t.Errorf("%s (%v) selects %s (labels %v): %v, want %v", pdb.Name, sel, what, pod, got, want)
		}
	}
	one := intstr.FromInt32(1)

	svc := loadService(t, asyncFile)
	proxy := budget(proxyName)
	if proxy.Namespace != svc.Namespace {
		t.Errorf("%s in %s, the proxy in %s", proxy.Name, proxy.Namespace, svc.Namespace)
	}
	selects(t, proxy, map[string]string{serving.ServiceLabelKey: svc.Name}, "the proxy's pods", true)
	selects(t, proxy, map[string]string{serving.ServiceLabelKey: "another"}, "another Service's pods", false)

	_, d := adapterDeployment(t)
	adapter := budget("event-forwarding-pingsource-adapter")
	if adapter.Namespace != d.Namespace {
		t.Errorf("%s in %s, the adapter in %s", adapter.Name, adapter.Namespace, d.Namespace)
	}
	selects(t, adapter, d.Spec.Template.Labels, "the adapter's pods", true)
	if got, want := adapter.Spec.Selector.String(), d.Spec.Selector.String(); got != want {
		t.Errorf("%s selects %s, the adapter Deployment %s", adapter.Name, got, want)
	}
	for _, pdb := range []*policyv1.PodDisruptionBudget{proxy, adapter} {
		if pdb.Spec.MaxUnavailable == nil || *pdb.Spec.MaxUnavailable != one || pdb.Spec.MinAvailable != nil {
			t.Errorf("%s: maxUnavailable %v, minAvailable %v; want one pod at a time", pdb.Name, pdb.Spec.MaxUnavailable, pdb.Spec.MinAvailable)
		}
	}
}
