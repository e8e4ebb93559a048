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

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"

	"knative.dev/event-forwarding-proxy/adapter/mtping"
)

// heldSends is the adapter's gauge its HPA scales on.
const heldSends = mtping.MetricInflightSends

// TestAdapterHPA checks the PingSource adapter's HPA against what it
// scales: Eventing's adapter Deployment, from its replicas up to no more
// replicas than buckets, on the adapter's own gauge, which the Prometheus
// Adapter rule serves and Prometheus scrapes from the adapter's metrics
// port; scale-in one pod at a time, since each moves buckets.
func TestAdapterHPA(t *testing.T) {
	docs := loadConfig(t)
	s := scheme(t)
	obj, err := decodeStrict(s, find(t, docs, "config/async/600-pingsource-adapter-hpa.yaml",
		autoscalingv2.SchemeGroupVersion.WithKind("HorizontalPodAutoscaler"), "event-forwarding-pingsource-adapter"))
	if err != nil {
		t.Fatal(err)
	}
	hpa := obj.(*autoscalingv2.HorizontalPodAutoscaler)
	_, d := adapterDeployment(t)
	obj, err = decodeStrict(s, find(t, docs, adapterSettings, corev1.SchemeGroupVersion.WithKind("ConfigMap"), settingsName))
	if err != nil {
		t.Fatal(err)
	}
	buckets, err := strconv.Atoi(obj.(*corev1.ConfigMap).Data["buckets"])
	if err != nil {
		t.Fatal(err)
	}
	served := map[string]bool{}
	for _, r := range loadAdapterConfig(t).Rules {
		served[r.Name.As] = true
	}
	metricsPort := ""
	for _, p := range d.Spec.Template.Spec.Containers[0].Ports {
		if p.Name == "metrics" {
			metricsPort = strconv.Itoa(int(p.ContainerPort))
		}
	}
	ref := hpa.Spec.ScaleTargetRef
	var metric autoscalingv2.MetricSpec
	if len(hpa.Spec.Metrics) == 1 {
		metric = hpa.Spec.Metrics[0]
	}
	if hpa.Spec.Behavior == nil || hpa.Spec.Behavior.ScaleDown == nil {
		t.Fatal("no scale-down behavior: Kubernetes' default removes pods by the hundred percent")
	}
	scaleDown := hpa.Spec.Behavior.ScaleDown
	tests := []struct {
		name      string
		got, want any
	}{
		{name: "scales the adapter Deployment", got: ref.APIVersion + " " + ref.Kind + " " + hpa.Namespace + "/" + ref.Name,
			want: "apps/v1 Deployment " + d.Namespace + "/" + d.Name},
		// Upstream's controller raises 0 to 1 at the first PingSource; the
		// HPA (which leaves a Deployment at 0 alone) keeps a standby.
		{name: "from upstream's replicas", got: *d.Spec.Replicas, want: int32(0)},
		{name: "with a standby", got: *hpa.Spec.MinReplicas >= 2, want: true},
		{name: "no more replicas than buckets", got: hpa.Spec.MaxReplicas <= int32(buckets), want: true},
		{name: "on the held sends, per pod", got: metric.Type == autoscalingv2.PodsMetricSourceType && metric.Pods != nil &&
			metric.Pods.Metric.Name == heldSends && metric.Pods.Target.Type == autoscalingv2.AverageValueMetricType, want: true},
		{name: "served by the Prometheus Adapter rule", got: served[heldSends], want: true},
		{name: "on the port the adapter serves metrics on", got: metricsPort, want: strconv.Itoa(mtping.DefaultMetricsPort)},
		{name: "scale-in one pod at a time", got: len(scaleDown.Policies) == 1 && scaleDown.Policies[0].Type == autoscalingv2.PodsScalingPolicy &&
			scaleDown.Policies[0].Value == 1, want: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.got != tc.want {
				t.Errorf("got %v, want %v", tc.got, tc.want)
			}
		})
	}
}
