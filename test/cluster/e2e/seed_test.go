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
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// The seed scenario, compressed in time: PingSources firing every 3 s to
// one sink that holds each call 36 s, more of them in the cluster than the
// threshold, which counts them all: 95 against 60, where each of the 2
// adapter replicas fires about 47, under it. At the steady state the proxy
// holds sources x 12 calls; 95 sources make 1,140: more than the 2 x 440
// at which the HPA scales the default profile's min-scale pods out (target
// 400, tolerance 10 %), reached 28 s into the load, and less than the
// 2 x 675 one destination may hold in them, so the proxy always has room
// and no event should go direct. The short tick and hold keep the climb
// and the drain, which the scenarios after it wait for, short.
const (
	seedSources   = 95
	seedThreshold = "60"
	seedTick      = 3 * time.Second
	seedHold      = 36 * time.Second
	seedLoad      = 4 * time.Minute // firing, after every source is Ready: at most, until the proxy scaled out
	adapterPort   = 9090            // the adapter's /metrics
	proxyMetrics  = 9095            // the proxy's /metrics in its pods
	proxyMinScale = 2               // the default install's min-scale
)

// seedSource is the manifest of seed PingSource name, firing every tick
// (whole seconds, dividing a minute) to e2esink, which holds each call for
// hold.
func seedSource(name string, tick, hold time.Duration) string {
	return fmt.Sprintf(`
apiVersion: sources.knative.dev/v1
kind: PingSource
metadata: {name: %q, namespace: "{{NAMESPACE}}"}
spec:
  schedule: "*/%d * * * * *"
  contentType: application/json
  data: '{"seed":%q}'
  sink:
    ref: {apiVersion: serving.knative.dev/v1, kind: Service, name: e2esink}
    uri: /seed?hold=%ds
`, name, int(tick/time.Second), name, int(hold/time.Second))
}

// TestSeedScenario runs the seed scenario on the default install: the
// adapter switches to the proxy, the proxy scales out on the calls it holds
// and back in, a proxy pod that leaves with calls held finishes them, and
// every event reaches its sink exactly once.
func TestSeedScenario(t *testing.T) {
	seedLoadStage.begin(t) // before t.Parallel: see stages_test.go
	seedSourcesStage.begin(t)
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	ns := newNamespace(ctx, t, "seed")
	s := newSink(ctx, t, ns)
	after(t, upgradeStage, oidcStage, heartbeatsStage)
	t.Cleanup(func() {
		if t.Failed() {
			dumpLogs(context.Background(), t, systemNamespace, "serving.knative.dev/service="+proxyService)
			dumpLogs(context.Background(), t, systemNamespace, adapterSelector)
		}
	})
	// The load in a subtest of its own, so that its sources and settings
	// are gone when the adapter's scenario starts.
	var loadStopped time.Time
	loaded := t.Run("load", func(t *testing.T) { loadStopped = seedScenarioLoad(ctx, t, s) })
	seedSourcesStage.end()
	seedLoadStage.end()
	if !loaded {
		return
	}

	// Back in: the HPA's default five minutes of stabilization, then down to
	// min-scale.
	eventually(t, 9*time.Minute, 10*time.Second, func() string { return fmt.Sprintf("%d proxy pods", installed.countReady(ctx, t)) }, func() bool {
		return installed.countReady(ctx, t) == proxyMinScale && len(installed.pods(ctx, t)) == proxyMinScale
	})
	t.Logf("back to %d proxy pods %v after the load stopped", proxyMinScale, time.Since(loadStopped).Round(time.Second))
}

// seedScenarioLoad runs the seed scenario's load, its sources in s's
// namespace, until every event it sent is accounted for, and returns when
// the load stopped.
func seedScenarioLoad(ctx context.Context, t *testing.T, s *sink) time.Time {
	ns := s.namespace
	setThreshold(ctx, t, seedThreshold)
	adapters := adapterPods(ctx, t)
	before := quietCounts(ctx, t, adapters)
	// The baseline the scale-out is judged against: the proxy back at
	// min-scale, an earlier scenario's pods gone (the HPA's five minutes
	// of stabilization at most).
	eventually(t, 9*time.Minute, 10*time.Second, func() string {
		return fmt.Sprintf("%d ready of %d proxy pods before the load, want min-scale %d", installed.countReady(ctx, t), len(installed.pods(ctx, t)), proxyMinScale)
	}, func() bool {
		return installed.countReady(ctx, t) == proxyMinScale && len(installed.pods(ctx, t)) == proxyMinScale
	})
	basePods := installed.countReady(ctx, t)

	start := time.Now()
	for i := range seedSources {
		m := seedSource(fmt.Sprintf("seed-%03d", i), seedTick, seedHold)
		apply(ctx, t, ns, m)
	}
	for i := range seedSources {
		waitReady(ctx, t, pingSourceGVR, ns, fmt.Sprintf("seed-%03d", i), 2*time.Minute)
	}
	t.Logf("%d PingSources Ready after %v", seedSources, time.Since(start).Round(time.Second))
	seedSourcesStage.end()

	// Load: watch the proxy's pods and held calls while the sources fire,
	// until a pod beyond min-scale is ready.
	w := watchProxy(ctx, t, seedLoad, basePods)
	loadStopped := time.Now()
	t.Logf("load %v: ready proxy pods %d before, %d at first, at most %d; held calls at most %.0f; first pod beyond min-scale ready %v after the first held call",
		w.ran, basePods, w.firstPods, w.maxPods, w.maxHeld, w.scaleOutAfter)
	if w.maxPods <= basePods {
		t.Errorf("the proxy never scaled out past the %d pods it had before the load (held calls at most %.0f)", basePods, w.maxHeld)
	}
	// Traefik's connections to the revision's ClusterIP were opened before
	// the new pod: it gets calls only as the others offer them to it.
	sp := installed.watchSpread(ctx, t, 2*time.Minute, w.maxPods)
	if total := sumHeld(sp.held); sp.min < total/float64(len(sp.held))/2 {
		t.Errorf("calls not spread over the proxy's pods: %v, want the least busy at half the mean or more", sp)
	}

	// A pod that leaves with calls held: delete one (as a scale-in does)
	// and check below that none of its calls was cut. The scenarios
	// running beside the load end first: their calls are not this check's.
	after(t, installStage, realPathStage)
	victim, held := installed.busiestPod(ctx, t)
	t.Logf("deleting proxy pod %s holding %.0f calls", victim, held)
	if held < 1 {
		t.Errorf("proxy pod %s, the busiest, holds no call: its delete shows no pod leaving with calls held", victim)
	}
	if err := cluster.kube.CoreV1().Pods(systemNamespace).Delete(ctx, victim, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}

	// Stop the load; every call the sink holds ends within seedHold.
	for i := range seedSources {
		name := fmt.Sprintf("seed-%03d", i)
		if err := cluster.dynamic.Resource(pingSourceGVR).Namespace(ns).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Fatalf("delete %s: %v", name, err)
		}
	}
	// Settled: nothing held at the sink, and as many events there as the
	// adapter delivered (an event still on its way is in neither).
	var rs []record
	var after counts
	stillHeld, arrived, delivered := 0, 0, 0.0
	eventually(t, seedHold+2*time.Minute, 5*time.Second, func() string {
		return fmt.Sprintf("the sink holds %d calls and got %d events, the adapter delivered %v", stillHeld, arrived, delivered)
	}, func() bool {
		rs = s.records(ctx, t)
		after = senderCounts(ctx, t, adapterPods(ctx, t))
		stillHeld = 0
		for _, r := range rs {
			if r.Outcome == "held" {
				stillHeld++
			}
		}
		d := growth(before, after)
		arrived, delivered = len(seedIDs(rs, ns)), d["direct/delivered"]+d["proxy/delivered"]
		return stillHeld == 0 && float64(arrived) == delivered
	})
	checkAccounted(t, rs, ns, before, after, adapters)
	return loadStopped
}

// setThreshold sets event-forwarding-threshold for the test, restoring the
// value it had afterwards.
func setThreshold(ctx context.Context, t testing.TB, v string) {
	t.Helper()
	setForwardingKey(ctx, t, "event-forwarding-threshold", v)
}

// setForwardingKey sets one key of config-event-forwarding for the test,
// restoring the value it had afterwards.
func setForwardingKey(ctx context.Context, t testing.TB, key, v string) {
	t.Helper()
	cm, err := cluster.kube.CoreV1().ConfigMaps(systemNamespace).Get(ctx, forwardingCM, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	old, had := cm.Data[key]
	patch := func(v any) {
		b, _ := json.Marshal(map[string]any{"data": map[string]any{key: v}})
		if _, err := cluster.kube.CoreV1().ConfigMaps(systemNamespace).Patch(context.Background(), forwardingCM, types.MergePatchType, b, metav1.PatchOptions{}); err != nil {
			t.Errorf("%s: %v", key, err)
		}
	}
	patch(v)
	t.Cleanup(func() {
		if had {
			patch(old)
		} else {
			patch(nil)
		}
	})
}

func adapterPods(ctx context.Context, t testing.TB) []corev1.Pod {
	t.Helper()
	var out []corev1.Pod
	for _, p := range podsOf(ctx, t, systemNamespace, adapterSelector) {
		if ready(p) {
			out = append(out, p)
		}
	}
	if len(out) == 0 {
		t.Fatal("no ready adapter pod")
	}
	return out
}

// quietCounts waits until no PingSource is left and no send of an earlier
// test is in flight (a send to a sink whose namespace is being deleted
// can wait minutes for its answer, then retry), and returns the adapter's
// counts: what the test's own sends then grow.
func quietCounts(ctx context.Context, t testing.TB, pods []corev1.Pod) counts {
	t.Helper()
	left, inflight := 0, 0.0
	eventually(t, 12*time.Minute, 2*time.Second, func() string {
		return fmt.Sprintf("%d PingSources of earlier tests left, %v of their sends in flight", left, inflight)
	}, func() bool {
		list, err := cluster.dynamic.Resource(pingSourceGVR).Namespace("").List(ctx, metav1.ListOptions{})
		if err != nil {
			return false
		}
		if left = len(list.Items); left > 0 {
			return false
		}
		inflight = 0
		for _, p := range pods {
			n, err := gauge(ctx, p, adapterPort, "kn_forward_mtping_inflight_sends")
			if err != nil {
				t.Fatal(err)
			}
			inflight += n
		}
		return inflight == 0
	})
	return senderCounts(ctx, t, pods)
}

// senderCounts are the adapter's sends by route/outcome and fallbacks,
// summed over its pods, keyed by pod name then counter.
type counts map[string]map[string]float64

func senderCounts(ctx context.Context, t testing.TB, pods []corev1.Pod) counts {
	t.Helper()
	out := counts{}
	for _, p := range pods {
		f := scrape(ctx, t, p, adapterPort)
		c := map[string]float64{"fallbacks": sum(f, "kn_forward_sender_fallbacks_total", nil)}
		for _, route := range []string{"direct", "proxy"} {
			for _, outcome := range []string{"delivered", "failed"} {
				c[route+"/"+outcome] = sum(f, "kn_forward_sender_sends_total", map[string]string{"route": route, "outcome": outcome})
			}
		}
		out[p.Name] = c
	}
	return out
}

// checkAccounted checks every event the adapter sent during the test
// arrived at the sink exactly once, and none went direct for want of room.
func checkAccounted(t testing.TB, rs []record, ns string, before, after counts, adapters []corev1.Pod) {
	t.Helper()
	for pod := range after {
		if _, ok := before[pod]; !ok {
			t.Errorf("adapter pod %s was not there at the start: its counts started during the test", pod)
		}
	}
	if len(after) != len(adapters) {
		t.Errorf("adapter pods changed during the test: %d then %d", len(adapters), len(after))
	}
	delta := growth(before, after)
	ids := seedIDs(rs, ns)
	canceled := 0
	for _, r := range rs {
		if strings.HasPrefix(r.Source, seedSourcePrefix(ns)) && r.Outcome != "answered" {
			canceled++
		}
	}
	dups := 0
	for _, n := range ids {
		if n > 1 {
			dups++
		}
	}
	sent := delta["direct/delivered"] + delta["proxy/delivered"]
	t.Logf("adapter sends: %v; sink: %d events, %d ids twice, %d not answered", delta, len(ids), dups, canceled)
	if dups > 0 || canceled > 0 {
		t.Errorf("%d events arrived more than once, %d were cut", dups, canceled)
	}
	if delta["fallbacks"] > 0 || delta["proxy/failed"] > 0 || delta["direct/failed"] > 0 {
		t.Errorf("fallbacks %v, failed sends %v (proxy) %v (direct)", delta["fallbacks"], delta["proxy/failed"], delta["direct/failed"])
	}
	if float64(len(ids)) != sent {
		t.Errorf("the sink got %d events, the adapter delivered %v", len(ids), sent)
	}
	if delta["proxy/delivered"] == 0 {
		t.Error("nothing went through the proxy")
	}
}

// growth sums, over the adapter's pods, how much each counter grew.
func growth(before, after counts) map[string]float64 {
	d := map[string]float64{}
	for pod, c := range after {
		for k, v := range c {
			d[k] += v - before[pod][k]
		}
	}
	return d
}

func seedSourcePrefix(ns string) string { return "/apis/v1/namespaces/" + ns + "/pingsources/" }

// seedIDs counts the sink's records of the test's sources by event id.
func seedIDs(rs []record, ns string) map[string]int {
	ids := map[string]int{}
	for _, r := range rs {
		if strings.HasPrefix(r.Source, seedSourcePrefix(ns)) {
			ids[r.ID]++
		}
	}
	return ids
}

// proxyWatch is what watchProxy saw.
type proxyWatch struct {
	firstPods, maxPods int
	maxHeld            float64
	scaleOutAfter      time.Duration // from the first held call to the first ready pod beyond the baseline
	ran                time.Duration
}

// watchProxy polls the proxy's ready pods and their held calls every 5 s
// until a pod beyond basePods is ready, or for d at most.
func watchProxy(ctx context.Context, t testing.TB, d time.Duration, basePods int) proxyWatch {
	t.Helper()
	var w proxyWatch
	var firstHeld time.Time
	end := time.Now().Add(d)
	for time.Now().Before(end) {
		pods, held := 0, 0.0
		for _, p := range installed.pods(ctx, t) {
			if ready(p) {
				pods++
				held += sum(scrape(ctx, t, p, proxyMetrics), "kn_forward_active_requests", nil)
			}
		}
		if w.firstPods == 0 {
			w.firstPods = pods
		}
		if held > 0 && firstHeld.IsZero() {
			firstHeld = time.Now()
		}
		if pods > basePods && w.scaleOutAfter == 0 && !firstHeld.IsZero() {
			w.scaleOutAfter = time.Since(firstHeld).Round(time.Second)
		}
		w.maxPods = max(w.maxPods, pods)
		w.maxHeld = max(w.maxHeld, held)
		if w.scaleOutAfter > 0 {
			break
		}
		time.Sleep(5 * time.Second)
	}
	w.ran = time.Since(end.Add(-d)).Round(time.Second)
	return w
}
