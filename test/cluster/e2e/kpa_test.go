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
	"net/http"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// The async-kpa copy's bounds: it starts at the release's min-scale and
// may add the one pod the seed load asks for (1,140 calls in reports of
// 10, 114 against the KPA's target of 40 a pod: 3 pods), no more: the
// node's CPU is mostly requested.
const (
	kpaMaxScale = "3"
	kpaLoadMax  = 4 * time.Minute // firing, at most, until a third pod is ready
)

// TestAsyncKPAProfile runs the seed scenario's load, sent as the adapter
// sends it (async hand-offs through the ingress, 95 every 3 s, each held
// 36 s by the sink), on a copy of the release's async-kpa profile in a
// namespace of its own (copyProxyProfile), where no HPA exists: Knative's
// KPA, reading the reports the proxy holds open through queue-proxy,
// scales it past min-scale; every event is answered 202 and delivered
// once. It runs beside the Operator scenario, which mostly waits on
// rollouts.
func TestAsyncKPAProfile(t *testing.T) {
	t.Parallel()
	// Not before: the node's CPU is all requested until the adapter
	// scenario is over, and a copy's pods would hold back its replicas.
	after(t, upgradeStage, seedLoadStage, adapterStage)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	ns := newNamespace(ctx, t, "kpa")
	proxy := copyProxyProfile(ctx, t, ns, "async-kpa", kpaMaxScale)
	s := newSink(ctx, t, ns)
	auth := "Bearer " + proxyToken(ctx, t, ns)
	checkAsyncKPAInstall(ctx, t, proxy)
	t.Cleanup(func() {
		if t.Failed() {
			dumpLogs(context.Background(), t, ns, "serving.knative.dev/service="+proxyService)
		}
	})

	// The baseline: min-scale, nothing held.
	eventually(t, 3*time.Minute, 2*time.Second, func() string {
		return fmt.Sprintf("%d ready of %d pods before the load, want %d", proxy.countReady(ctx, t), len(proxy.pods(ctx, t)), proxyMinScale)
	}, func() bool {
		return proxy.countReady(ctx, t) == proxyMinScale && len(proxy.pods(ctx, t)) == proxyMinScale
	})

	path := fmt.Sprintf("/kpa?hold=%ds", int(seedHold/time.Second))
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		statuses = map[int]int{} // status (0: no answer) -> count
		firstErr error
		sent     []string
	)
	callCtx, stopCalls := context.WithCancel(ctx)
	defer func() { stopCalls(); wg.Wait() }()
	fire := func(tick int) {
		for i := range seedSources {
			id := fmt.Sprintf("kpa-%03d-%03d", tick, i)
			sent = append(sent, id)
			wg.Go(func() {
				h := map[string]string{"Kn-Forward-Authorization": auth, "Prefer": "respond-async", "Ce-Specversion": "1.0", "Ce-Id": id,
					"Ce-Source": "/e2e/kpa", "Ce-Type": "e2e.kpa", "Content-Type": "application/json"}
				a, err := proxy.tryForward(callCtx, s.URL+path, h, []byte(`{"kpa":true}`))
				mu.Lock()
				defer mu.Unlock()
				statuses[a.Status]++
				if err != nil && firstErr == nil {
					firstErr = err
				}
			})
		}
	}

	start := time.Now()
	ticker := time.NewTicker(seedTick)
	defer ticker.Stop()
	var scaled time.Time
	for tick := 0; scaled.IsZero(); tick++ {
		if time.Since(start) > kpaLoadMax {
			t.Fatalf("still %d ready pods after %v of load: %s", proxy.countReady(ctx, t), kpaLoadMax, paStatus(ctx, t, proxy))
		}
		fire(tick)
		<-ticker.C
		if proxy.countReady(ctx, t) > proxyMinScale {
			scaled = time.Now()
		}
	}
	stopCalls()
	t.Logf("%d ready pods %v into the load (%s); %d events sent", proxy.countReady(ctx, t), scaled.Sub(start).Round(time.Second),
		paStatus(ctx, t, proxy), len(sent))
	wg.Wait()
	// The hand-offs had returned long before: callCtx cut none.
	if statuses[http.StatusAccepted] != len(sent) {
		t.Errorf("answers %v of %d hand-offs, want every one 202 (first error: %v)", statuses, len(sent), firstErr)
	}

	// Every event delivered once, after its hold.
	answered := map[string]int{}
	eventually(t, seedHold+2*time.Minute, 2*time.Second, func() string {
		return fmt.Sprintf("%d of %d events answered at the sink", len(answered), len(sent))
	}, func() bool {
		clear(answered)
		for _, r := range s.records(ctx, t) {
			if r.Path == path && r.Outcome == "answered" {
				answered[r.ID]++
			}
		}
		return len(answered) == len(sent)
	})
	for _, id := range sent {
		if n := answered[id]; n != 1 {
			t.Errorf("event %s answered %d times at the sink, want once", id, n)
		}
	}
}

// paStatus describes the KPA's view of proxy p: its PodAutoscaler's
// desired and actual scale.
func paStatus(ctx context.Context, t *testing.T, p proxyInstance) string {
	t.Helper()
	pa, err := cluster.dynamic.Resource(paGVR).Namespace(p.namespace).Get(ctx, p.revision(ctx, t), metav1.GetOptions{})
	if err != nil {
		return err.Error()
	}
	desired, _, _ := unstructured.NestedInt64(pa.Object, "status", "desiredScale")
	actual, _, _ := unstructured.NestedInt64(pa.Object, "status", "actualScale")
	return fmt.Sprintf("the KPA's desired scale %d, actual %d", desired, actual)
}
