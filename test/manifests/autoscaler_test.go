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
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	"knative.dev/serving/pkg/apis/autoscaling"
	autoscalingv1alpha1 "knative.dev/serving/pkg/apis/autoscaling/v1alpha1"
	autoscalerconfig "knative.dev/serving/pkg/autoscaler/config"
	"knative.dev/serving/pkg/reconciler/autoscaling/hpa/resources"
	kparesources "knative.dev/serving/pkg/reconciler/autoscaling/kpa/resources"
	cfgresources "knative.dev/serving/pkg/reconciler/configuration/resources"
	revresources "knative.dev/serving/pkg/reconciler/revision/resources"
	svcresources "knative.dev/serving/pkg/reconciler/service/resources"
)

// makePA builds the PodAutoscaler Knative would create for a profile,
// with serving's own reconciler code: Service → Configuration → Revision →
// PodAutoscaler, each defaulted as the webhook would.
func makePA(t *testing.T, file string) *autoscalingv1alpha1.PodAutoscaler {
	t.Helper()
	ctx := servingContext()
	svc := loadService(t, file)
	cfg := svcresources.MakeConfiguration(svc)
	cfg.Generation = 1
	rev := cfgresources.MakeRevision(ctx, cfg, time.Unix(1700000000, 0))
	rev.SetDefaults(ctx)
	pa := revresources.MakePA(rev, nil)
	pa.SetDefaults(ctx)
	return pa
}

// hpaTolerance is kube-controller-manager's default
// --horizontal-pod-autoscaler-tolerance.
const hpaTolerance = 0.1

func TestAutoscalerTargetsHeldCalls(t *testing.T) {
	tests := []struct {
		name       string
		file       string
		wantClass  string
		wantMetric string
		wantTarget float64
	}{{
		name:       "sync: KPA on inbound concurrency",
		file:       syncFile,
		wantClass:  autoscaling.KPA,
		wantMetric: autoscaling.Concurrency,
		wantTarget: 400,
	}, {
		name:       "async: HPA on the held-call gauge",
		file:       asyncFile,
		wantClass:  autoscaling.HPA,
		wantMetric: heldCalls,
		wantTarget: 400,
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pa := makePA(t, tc.file)
			if got := pa.Class(); got != tc.wantClass {
				t.Errorf("class = %q, want %q", got, tc.wantClass)
			}
			if got := pa.Metric(); got != tc.wantMetric {
				t.Errorf("metric = %q, want %q", got, tc.wantMetric)
			}
			target, ok := pa.Target()
			if !ok || target != tc.wantTarget {
				t.Errorf("target = %v (set: %v), want %v", target, ok, tc.wantTarget)
			}
			// A pod must be able to hold its target: the target is below
			// both queue-proxy's limit and the proxy's own.
			if cc := pa.Spec.ContainerConcurrency; cc == 0 || int64(target) > cc {
				t.Errorf("target %v above containerConcurrency %d", target, cc)
			}
			asCfg, err := autoscalerconfig.NewConfigFromMap(nil)
			if err != nil {
				t.Fatal(err)
			}
			if min, _ := pa.ScaleBounds(asCfg); min != 2 {
				t.Errorf("min scale = %d, want 2", min)
			}
			// One destination or tenant at its cap in every pod must still
			// scale the pods out: the HPA acts only when the average is
			// more than its tolerance (10 %) above the target; the KPA
			// needs it above the target at all.
			proxy := proxyConfig(t, loadService(t, tc.file))
			for name, limit := range map[string]int{
				"FORWARD_MAX_INFLIGHT_PER_DESTINATION": proxy.MaxInflightPerDestination,
				"FORWARD_MAX_INFLIGHT_PER_TENANT":      proxy.MaxInflightPerTenant,
			} {
				if float64(limit) <= target*(1+hpaTolerance) {
					t.Errorf("%s = %d: a destination held at it never scales the pods out past target %v", name, limit, target)
				}
			}
		})
	}
}

// TestSyncProfileKPA checks, with the KPA's own decider, the numbers the
// sync profile's comments promise.
func TestSyncProfileKPA(t *testing.T) {
	cfg, err := autoscalerconfig.NewConfigFromMap(nil)
	if err != nil {
		t.Fatal(err)
	}
	spec := kparesources.MakeDecider(makePA(t, syncFile), cfg).Spec
	// The activator leaves the path while the excess burst capacity
	// (ready pods x total per pod - burst capacity - load) is not negative.
	idleExcess := 2*spec.TotalValue - spec.TargetBurstCapacity
	tests := []struct {
		name      string
		got, want float64
	}{
		{name: "effective target: the annotation, not 70% of it", got: spec.TargetValue, want: 400},
		{name: "capacity counted per pod", got: spec.TotalValue, want: 400},
		{name: "burst capacity: one pod's target", got: spec.TargetBurstCapacity, want: spec.TargetValue},
		{name: "two idle pods: activator out of the path", got: idleExcess, want: 400},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.got != tc.want {
				t.Errorf("got %v, want %v", tc.got, tc.want)
			}
		})
	}
}

// TestAsyncProfileHPA checks the HPA serving's own code makes for the
// async profile.
func TestAsyncProfileHPA(t *testing.T) {
	cfg, err := autoscalerconfig.NewConfigFromMap(nil)
	if err != nil {
		t.Fatal(err)
	}
	hpa := resources.MakeHPA(makePA(t, asyncFile), cfg)
	if len(hpa.Spec.Metrics) != 1 || hpa.Spec.Metrics[0].Pods == nil {
		t.Fatalf("metrics = %+v, want one Pods metric", hpa.Spec.Metrics)
	}
	m := hpa.Spec.Metrics[0]
	var avg int64 = -1
	if m.Pods.Target.AverageValue != nil {
		avg = m.Pods.Target.AverageValue.Value()
	}
	var minReplicas int32
	if hpa.Spec.MinReplicas != nil {
		minReplicas = *hpa.Spec.MinReplicas
	}
	tests := []struct {
		name      string
		got, want any
	}{
		{name: "metric type", got: m.Type, want: autoscalingv2.PodsMetricSourceType},
		{name: "metric name", got: m.Pods.Metric.Name, want: heldCalls},
		{name: "target type", got: m.Pods.Target.Type, want: autoscalingv2.AverageValueMetricType},
		{name: "held calls per pod", got: avg, want: int64(400)},
		{name: "min replicas", got: minReplicas, want: int32(2)},
		// No window annotation: the HPA's defaults, scale-up not delayed.
		{name: "behavior", got: hpa.Spec.Behavior == nil, want: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.got != tc.want {
				t.Errorf("got %v, want %v", tc.got, tc.want)
			}
		})
	}
}
