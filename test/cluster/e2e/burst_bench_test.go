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
	"fmt"
	"math"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// A burst the min-scale pods are not sized for: 1,200 held async events
// over 2 pods is 600 each, past the HPA's 440 (target 400 plus its 10 %
// tolerance), which then asks for ceil(1200/400) = 3 pods; and below the
// 675 one destination may hold in a pod, so with kube-proxy's random
// spread (600 +/- 17 a pod) none is refused.
const (
	burstCalls = 1200
	burstHold  = 4 * time.Minute
)

// BenchmarkBurstToPods hands off burstCalls async events at once through
// the ingress to a sink that holds each burstHold, and reports how long
// the hand-offs took, when the HorizontalPodAutoscaler first wanted
// burstPods pods (the metric pipeline: the proxy's gauge, Prometheus,
// Prometheus Adapter, the HPA), and when that many were ready. It runs
// the burst once: `make bench-cluster` passes -benchtime 1x.
func BenchmarkBurstToPods(b *testing.B) {
	if b.N != 1 {
		b.Fatalf("a burst runs once (-benchtime 1x), not %d times", b.N)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	ns := newNamespace(ctx, b, "burst")
	s := newSink(ctx, b, ns)
	auth := "Bearer " + proxyToken(ctx, b, ns)
	eventually(b, 10*time.Minute, 5*time.Second, func() string { return "not back to 2 ready proxy pods" }, func() bool {
		return installed.countReady(ctx, b) == 2 && len(installed.pods(ctx, b)) == 2
	})
	hpas := cluster.kube.AutoscalingV2().HorizontalPodAutoscalers(systemNamespace)
	rev := installed.revision(ctx, b)
	burstPods := int32(math.Ceil(burstCalls / proxyTarget(ctx, b)))
	path := fmt.Sprintf("/burst?hold=%s", burstHold)

	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	statuses := make([]int, burstCalls)
	errs := make([]error, burstCalls)
	for i := range burstCalls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			h := map[string]string{"Kn-Forward-Authorization": auth, "Prefer": "respond-async", "Ce-Specversion": "1.0",
				"Ce-Id": fmt.Sprintf("burst-%d", i), "Ce-Source": "/e2e/burst", "Ce-Type": "e2e.burst", "Content-Type": "application/json"}
			a, err := tryForward(ctx, s.URL+path, h, []byte(`{"burst":true}`))
			statuses[i], errs[i] = a.Status, err
		}()
	}
	wg.Wait()
	handedOff := time.Since(start)
	for i, st := range statuses {
		if errs[i] != nil || st != http.StatusAccepted {
			b.Fatalf("hand-off %d: %d (%v), want 202", i, st, errs[i])
		}
	}
	b.Logf("held calls per proxy pod after the hand-offs: %v", installed.spread(ctx, b))
	var wanted, readyAfter time.Duration
	desired := int32(0)
	eventually(b, burstHold-30*time.Second, 2*time.Second, func() string {
		return fmt.Sprintf("the HPA wants %d pods, %d ready", desired, installed.countReady(ctx, b))
	}, func() bool {
		h, err := hpas.Get(ctx, rev, metav1.GetOptions{})
		if err != nil {
			b.Fatalf("the proxy's HPA: %v", err)
		}
		desired = h.Status.DesiredReplicas
		if wanted == 0 && desired >= burstPods {
			wanted = time.Since(start)
		}
		if readyAfter == 0 && int32(installed.countReady(ctx, b)) >= burstPods {
			readyAfter = time.Since(start)
		}
		return wanted > 0 && readyAfter > 0
	})
	b.StopTimer()
	b.ReportMetric(handedOff.Seconds(), "s-to-hand-off")
	b.ReportMetric(wanted.Seconds(), "s-to-HPA-decision")
	b.ReportMetric(readyAfter.Seconds(), "s-to-pods-ready")
	b.Logf("%d async events handed off in %v; the HPA wanted %d pods after %v, %d were ready after %v",
		burstCalls, handedOff.Round(time.Millisecond), burstPods, wanted.Round(time.Second), burstPods, readyAfter.Round(time.Second))
	b.Logf("held calls per proxy pod once they were ready: %v", installed.spread(ctx, b))

	// Nothing left in the proxy for what runs next.
	answered := 0
	eventually(b, burstHold+2*time.Minute, 5*time.Second, func() string {
		return fmt.Sprintf("%d of %d burst events answered at the sink", answered, burstCalls)
	}, func() bool {
		answered = 0
		for _, r := range s.records(ctx, b) {
			if r.Path == path && r.Outcome == "answered" {
				answered++
			}
		}
		return answered == burstCalls
	})
}

// proxyTarget is the held calls per pod the proxy Service's autoscaler
// aims at, as installed.
func proxyTarget(ctx context.Context, t testing.TB) float64 {
	t.Helper()
	ksvc, err := cluster.dynamic.Resource(ksvcGVR).Namespace(systemNamespace).Get(ctx, proxyService, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	v, _, _ := unstructured.NestedString(ksvc.Object, "spec", "template", "metadata", "annotations", "autoscaling.knative.dev/target")
	target, err := strconv.ParseFloat(v, 64)
	if err != nil || target <= 0 {
		t.Fatalf("the proxy Service's autoscaling target %q: %v", v, err)
	}
	return target
}
