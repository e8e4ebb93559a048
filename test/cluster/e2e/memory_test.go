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
)

// heldCalls is how many calls TestMemoryPerHeldCall holds at once, spread
// over the proxy's min-scale pods: well inside their admission limit.
const (
	heldCalls = 600
)

// perCallCeilingKB bounds the per-call figures TestMemoryPerHeldCall
// checks, by container: about four times the most seen at 600 calls
// (docs/benchmarks.md, "On a Knative cluster": 17.8 to 46.7 KB in the
// proxy, up to 68.8 KB in queue-proxy), so that the working sets' spread
// from run to run passes and a cost several times today's fails. The
// activator, out of the path, has none: its figure is only reported.
var perCallCeilingKB = map[string]float64{"proxy": 200, "queue-proxy": 280}

// heldFor is how long the sink holds each call, by mode. Sync calls outlive
// queue-proxy's fixed h2c drain (30 s, then 60 s) after their pod is told
// to stop, so a port speaking h2c would show as cut calls.
var heldFor = map[string]time.Duration{"sync": 150 * time.Second, "async": 45 * time.Second}

// TestMemoryPerHeldCall holds heldCalls calls in a copy of the release's
// proxy in its own namespace (copyProxy), async then sync, and reports what each costs per pod in the proxy container and
// in queue-proxy beside it (the kubelet's working-set figures), and in the
// activator. It checks every call ended as it should, synchronous ones
// too when the pod holding most of them is deleted while they are held
// (a scale-in); the figures are reported, for docs/benchmarks.md, and
// checked: sampled while every call was held, above zero where the
// container holds the calls, below perCallCeilingKB.
func TestMemoryPerHeldCall(t *testing.T) {
	t.Parallel()
	after(t, upgradeStage, seedLoadStage)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	ns := newNamespace(ctx, t, "memory")
	proxy := copyProxy(ctx, t, ns)
	s := newSink(ctx, t, ns)
	auth := "Bearer " + proxyToken(ctx, t, ns)

	// Async first: the sync round ends with a pod replaced, and a new
	// pod's baseline would hide what the other pod still keeps.
	for _, mode := range []string{"async", "sync"} {
		t.Run(mode, func(t *testing.T) {
			hold := heldFor[mode]
			path := fmt.Sprintf("/%s?hold=%s", mode, hold)
			eventually(t, 3*time.Minute, 2*time.Second, func() string { return "not 2 ready proxy pods" }, func() bool { return proxy.countReady(ctx, t) == 2 })
			idle := workingSetsSince(ctx, t, proxy, time.Now())
			// The calls' goroutines never touch t: they leave their status
			// or error, read once they all ended (calls end when the sink
			// answers, or at once when callCtx is cancelled).
			callCtx, cancelCalls := context.WithCancel(ctx)
			var wg sync.WaitGroup
			defer func() { cancelCalls(); wg.Wait() }()
			statuses := make([]int, heldCalls)
			errs := make([]error, heldCalls)
			for i := range heldCalls {
				wg.Add(1)
				go func() {
					defer wg.Done()
					h := map[string]string{"Kn-Forward-Authorization": auth, "Ce-Specversion": "1.0", "Ce-Id": fmt.Sprintf("%s-%d", mode, i),
						"Ce-Source": "/e2e/memory", "Ce-Type": "e2e.memory", "Content-Type": "application/json"}
					if mode == "async" {
						h["Prefer"] = "respond-async"
					}
					a, err := proxy.tryForward(callCtx, s.URL+path, h, []byte(`{"held":true}`))
					statuses[i], errs[i] = a.Status, err
				}()
			}
			// Held: every call at the sink.
			heldAtSink := func() int {
				n := 0
				for _, r := range s.records(ctx, t) {
					if r.Path == path && r.Outcome == "held" {
						n++
					}
				}
				return n
			}
			eventually(t, hold/2, time.Second, func() string { return "calls not all at the sink" }, func() bool { return heldAtSink() == heldCalls })
			held := workingSetsSince(ctx, t, proxy, time.Now())
			// Every call still held once the samples were read: they were
			// held when the kubelet took them.
			if n := heldAtSink(); n != heldCalls {
				t.Errorf("%d of %d calls held at the sink once the kubelet had sampled the proxy's pods: its figures are not of the calls held", n, heldCalls)
			}
			for _, c := range []string{"proxy", "queue-proxy", "activator"} {
				perCall := (held[c] - idle[c]) / heldCalls / 1000
				t.Logf("%s, %d calls held: %s %.1f KB per call (%.1f -> %.1f MiB over its pods)", mode, heldCalls, c,
					perCall, idle[c]/(1<<20), held[c]/(1<<20))
				ceiling, checked := perCallCeilingKB[c]
				if !checked {
					continue
				}
				if perCall >= ceiling {
					t.Errorf("%s: %s costs %.1f KB per held call, at or above its ceiling of %.0f KB", mode, c, perCall, ceiling)
				}
				// The proxy holds every call for its whole hold; queue-proxy
				// only a sync one (an async call ends there at the 202).
				if holdsCalls := c == "proxy" || mode == "sync"; holdsCalls && perCall <= 0 {
					t.Errorf("%s: %s grew %.1f KB per held call: no cost of the calls it holds was measured", mode, c, perCall)
				}
			}
			if mode == "sync" {
				victim, n := proxy.busiestPod(ctx, t)
				t.Logf("deleting proxy pod %s holding %.0f sync calls", victim, n)
				if n < 1 {
					t.Errorf("proxy pod %s, the busiest, holds no sync call: its delete shows no call finishing as its pod leaves", victim)
				}
				if err := cluster.kube.CoreV1().Pods(ns).Delete(ctx, victim, metav1.DeleteOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			wg.Wait()
			// Every call answered at the sink, async ones included, so none
			// is left in the proxy for the next test.
			answered := 0
			eventually(t, hold+time.Minute, 2*time.Second, func() string { return fmt.Sprintf("%d of %d calls answered at the sink", answered, heldCalls) }, func() bool {
				answered = 0
				for _, r := range s.records(ctx, t) {
					if r.Path == path && r.Outcome == "answered" {
						answered++
					}
				}
				return answered == heldCalls
			})
			want := http.StatusOK
			if mode == "async" {
				want = http.StatusAccepted
			}
			for i, st := range statuses {
				if errs[i] != nil || st != want {
					t.Errorf("call %d: %d (%v), want %d", i, st, errs[i], want)
				}
			}
		})
	}
}

// workingSetsSince returns workingSets once the kubelet has sampled every
// container of proxy's ready pods since since (it samples every 10 to
// 15 s), so that the figures are of that moment, not an earlier one.
func workingSetsSince(ctx context.Context, t testing.TB, proxy proxyInstance, since time.Time) map[string]float64 {
	t.Helper()
	var out map[string]float64
	var oldest time.Time
	eventually(t, time.Minute, time.Second, func() string {
		return fmt.Sprintf("working sets %v, the proxy's oldest sampled at %v, not since %v", out, oldest, since)
	}, func() bool {
		out, oldest = workingSets(ctx, t, proxy)
		return !oldest.Before(since) && out["proxy"] > 0 && out["queue-proxy"] > 0 && out["activator"] > 0
	})
	return out
}

// workingSets sums the kubelet's working sets of the containers of
// proxy's ready pods (by container name) and of the activator, and returns
// when the oldest of proxy's was sampled (zero if none, or undated).
func workingSets(ctx context.Context, t testing.TB, proxy proxyInstance) (map[string]float64, time.Time) {
	t.Helper()
	readyPods := map[string]bool{}
	for _, p := range proxy.pods(ctx, t) {
		if ready(p) {
			readyPods[p.Name] = true
		}
	}
	out := map[string]float64{}
	var oldest time.Time
	seen := false
	for _, c := range containerUsages(ctx, t) {
		switch {
		case c.namespace == proxy.namespace && (c.container == "proxy" || c.container == "queue-proxy") && readyPods[c.pod]:
			out[c.container] += c.workingSet
			if !seen || c.workingSetAt.Before(oldest) {
				oldest, seen = c.workingSetAt, true
			}
		case c.namespace == "knative-serving" && c.container == "activator":
			out["activator"] += c.workingSet
		}
	}
	return out, oldest
}
