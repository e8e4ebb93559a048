//go:build cluster

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

package e2e

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// adapterHPAName is the async profile's HPA of the adapter.
const adapterHPAName = "event-forwarding-pingsource-adapter"

func adapterHPA(ctx context.Context, t testing.TB) *autoscalingv2.HorizontalPodAutoscaler {
	t.Helper()
	h, err := cluster.kube.AutoscalingV2().HorizontalPodAutoscalers(systemNamespace).Get(ctx, adapterHPAName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// setHPABounds sets the adapter HPA's replica bounds.
func setHPABounds(ctx context.Context, t testing.TB, lo, hi int32) {
	t.Helper()
	b, _ := json.Marshal(map[string]any{"spec": map[string]any{"minReplicas": lo, "maxReplicas": hi}})
	if _, err := cluster.kube.AutoscalingV2().HorizontalPodAutoscalers(systemNamespace).Patch(ctx, adapterHPAName, types.MergePatchType, b, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
}

// adapterReplicas is the replicas the adapter's Deployment asks for.
func adapterReplicas(ctx context.Context, t testing.TB) int32 {
	t.Helper()
	d, err := cluster.kube.AppsV1().Deployments(systemNamespace).Get(ctx, adapterName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return *d.Spec.Replicas
}

// restoreHPA brings the adapter back to the installed replicas at once (a
// maximum below the current count applies without the scale-down window)
// and then the HPA's installed bounds.
func restoreHPA(t testing.TB, installed *autoscalingv2.HorizontalPodAutoscaler) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	lo := *installed.Spec.MinReplicas
	setHPABounds(ctx, t, lo, lo)
	waitAdapter(ctx, t, projectAdapterImage, adapterAccount, lo)
	setHPABounds(ctx, t, lo, installed.Spec.MaxReplicas)
}
