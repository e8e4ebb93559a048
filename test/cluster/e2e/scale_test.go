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
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
)

// The sources TestAdapter keeps firing every minute while it scales the
// adapter, as a cluster with thousands of PingSources does: Eventing
// rewrites every source's status at each change of the adapter's
// Deployment, and marks them all Deployed Unknown while a replica is
// unavailable.
const (
	scaleSources  = 2000
	scaleTick     = time.Minute
	scaleSchedule = "* * * * *"
	// scaleCreators create and switch the sources side by side, beside
	// other scenarios.
	scaleCreators = 8
	// scaleDeleters delete them side by side, with nothing else running:
	// the deletion is on the way to the Operator scenario, and each
	// request waits mostly on Eventing's webhook.
	scaleDeleters = 32
	// bulkDeleteQPS bounds the requests that delete the scale sources and
	// remove their finalizers, two per source, above the scenarios' 50 a
	// second: the deleters' round trips bound them first.
	bulkDeleteQPS = 400
	// scaleReadyBound is how long Eventing's controller may take to make
	// every source Ready: 2 to 6 minutes here, from their creation, with
	// both cores busy; longer on a cold machine, whose other lane compiles
	// and runs the integration tests beside the scenarios.
	scaleReadyBound = 12 * time.Minute
)

// scaleSource is one of the minute PingSources, created on idleSchedule
// (startScaleSources switches it), to s by its URL rather than by a
// reference: Eventing makes an EventType for every source whose sink is a
// reference (the source duck reconciler), three more writes per source
// and 2,000 objects for the garbage collector, which would double what its
// controller does before they are Ready. Either way the adapter sends to
// the same URL.
func scaleSource(s *sink, name string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "sources.knative.dev/v1",
		"kind":       "PingSource",
		"metadata":   map[string]any{"name": name, "namespace": s.namespace},
		"spec": map[string]any{
			"schedule": idleSchedule,
			"data":     fmt.Sprintf(`{"scale":%q}`, name),
			"sink":     map[string]any{"uri": s.URL + "/scale"},
		},
	}}
}

// startScaleSources starts creating the n scale sources of s's namespace,
// on idleSchedule, a few at a time. It returns a wait for the creation to
// end.
func startScaleSources(ctx context.Context, t *testing.T, s *sink, n int) (created func(testing.TB)) {
	t.Helper()
	return forEachScaleSource(ctx, t, s.namespace, n, scaleCreators, "created", func(ctx context.Context, name string) error {
		_, err := cluster.dynamic.Resource(pingSourceGVR).Namespace(s.namespace).Create(ctx, scaleSource(s, name), metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			return nil
		}
		return err
	})
}

// deleteScaleSources deletes the n scale sources of namespace and returns
// once they are gone. Eventing's controller finalizes a deleted PingSource
// in a reconcile of its own, one after the other, 2,000 in over a minute
// that the Operator scenario would wait for; its finalizer only clears the
// status's EventType attributes, and no EventType is made for a sink named
// by its URL (scaleSource). So the test deletes each source and then
// removes its finalizers itself, through a client of its own whose rate is
// not the scenarios' (bulkDeleteQPS). One request per source: a
// DeleteCollection of 2,000 can outlast the API server's request timeout
// on a loaded node.
func deleteScaleSources(ctx context.Context, t *testing.T, namespace string, n int) {
	t.Helper()
	cfg := rest.CopyConfig(cluster.config)
	cfg.QPS, cfg.Burst = bulkDeleteQPS, bulkDeleteQPS
	bulk, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	sources := bulk.Resource(pingSourceGVR).Namespace(namespace)
	unfinalize := []byte(`{"metadata":{"finalizers":null}}`)
	forEachScaleSource(ctx, t, namespace, n, scaleDeleters, "deleted", func(ctx context.Context, name string) error {
		err := sources.Delete(ctx, name, metav1.DeleteOptions{})
		if err == nil {
			_, err = sources.Patch(ctx, name, types.MergePatchType, unfinalize, metav1.PatchOptions{})
		}
		if apierrors.IsNotFound(err) {
			return nil // finalized by Eventing meanwhile
		}
		return err
	})(t)
}

// startScaleSchedules starts switching the n scale sources of namespace
// to every minute. The adapter reads a source's schedule from its spec:
// each fires from the minute after its switch, whatever Eventing's
// controller has made of it yet. It returns a wait for the switch to end.
func startScaleSchedules(ctx context.Context, t *testing.T, namespace string, n int) (switched func(testing.TB)) {
	t.Helper()
	patch, _ := json.Marshal(map[string]any{"spec": map[string]any{"schedule": scaleSchedule}})
	return forEachScaleSource(ctx, t, namespace, n, scaleCreators, "switched to every minute", func(ctx context.Context, name string) error {
		_, err := cluster.dynamic.Resource(pingSourceGVR).Namespace(namespace).Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{})
		return err
	})
}

// forEachScaleSource calls do for each of the n scale sources' names,
// workers at a time, in the background. It returns a wait for the
// calls to end, which fails the test it is given if any call failed. The
// test's cleanup waits too, should it end first.
func forEachScaleSource(ctx context.Context, t *testing.T, namespace string, n, workers int, what string, do func(context.Context, string) error) (wait func(testing.TB)) {
	t.Helper()
	var (
		mu       sync.Mutex
		failures []string
		wg       sync.WaitGroup
		took     time.Duration
	)
	started := time.Now()
	names := make(chan string)
	for range workers {
		wg.Go(func() {
			for name := range names {
				if err := do(ctx, name); err != nil {
					mu.Lock()
					failures = append(failures, fmt.Sprintf("%s/%s: %v", namespace, name, err))
					mu.Unlock()
				}
			}
		})
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		sent := 0
	send:
		for i := range n {
			select {
			case names <- fmt.Sprintf("scale-%04d", i):
				sent++
			case <-ctx.Done():
				break send
			}
		}
		close(names)
		wg.Wait()
		if sent == n {
			took = time.Since(started)
		}
	}()
	t.Cleanup(func() { <-done })
	return func(t testing.TB) {
		t.Helper()
		<-done
		if len(failures) > 0 {
			t.Fatalf("%d of %d PingSources not %s; first: %s", len(failures), n, what, failures[0])
		}
		if took == 0 {
			t.Fatalf("%d PingSources not all %s: %v", n, what, ctx.Err())
		}
		t.Logf("%d PingSources %s in %v", n, what, took.Round(time.Second))
	}
}

// waitScaleReady waits until the n PingSources of namespace are Ready.
func waitScaleReady(ctx context.Context, t *testing.T, namespace string, n int) {
	t.Helper()
	started := time.Now()
	ready := 0
	eventually(t, scaleReadyBound, 5*time.Second, func() string { return fmt.Sprintf("%d of %d PingSources Ready", ready, n) }, func() bool {
		list, err := cluster.dynamic.Resource(pingSourceGVR).Namespace(namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false
		}
		ready = 0
		for i := range list.Items {
			if conditionTrue(&list.Items[i], "Ready") {
				ready++
			}
		}
		return ready == n
	})
	t.Logf("%d PingSources Ready after a wait of %v", n, time.Since(started).Round(time.Second))
}

// deployedNotTrue counts the PingSources of namespace whose Deployed
// condition is not True.
func deployedNotTrue(ctx context.Context, t *testing.T, namespace string) int {
	t.Helper()
	list, err := cluster.dynamic.Resource(pingSourceGVR).Namespace(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for i := range list.Items {
		if !conditionTrue(&list.Items[i], "Deployed") {
			n++
		}
	}
	return n
}

// tickCount is what the sink got of one minute tick of the scale sources.
type tickCount struct {
	tick          time.Time
	fired, twice  int
	p50, p99, max time.Duration // arrival after the tick
}

// scaleTicks counts the ticks of the scale sources from first to last
// (minute ticks, both included): per tick, the sources that fired, the
// events beyond one per source, and how late they arrived.
func scaleTicks(rs []record, first, last time.Time) []tickCount {
	type key struct {
		tick   time.Time
		source string
	}
	seen := map[key]int{}
	lateness := map[int64][]time.Duration{} // by the tick's Unix time
	for _, r := range rs {
		if !strings.Contains(r.Source, "/pingsources/scale-") {
			continue
		}
		tk, err := time.Parse(time.RFC3339Nano, r.EventTime)
		if err != nil {
			continue
		}
		tk = tk.Truncate(scaleTick)
		seen[key{tk, r.Source}]++
		lateness[tk.Unix()] = append(lateness[tk.Unix()], r.Time.Sub(tk))
	}
	var out []tickCount
	for tk := first; !tk.After(last); tk = tk.Add(scaleTick) {
		c := tickCount{tick: tk}
		for k, n := range seen {
			if k.tick.Equal(tk) {
				c.fired++
				c.twice += n - 1
			}
		}
		if l := lateness[tk.Unix()]; len(l) > 0 {
			slices.Sort(l)
			c.p50, c.p99, c.max = l[len(l)/2], l[len(l)*99/100], l[len(l)-1]
		}
		out = append(out, c)
	}
	return out
}

// waitTick waits for the first minute tick after from to fire from every
// scale source and returns it. Unless complete, a tick still short of
// some after its bound is only logged: the final check matches each
// missed tick to the moves of its source's bucket.
func waitTick(ctx context.Context, t *testing.T, s *sink, from time.Time, complete bool) time.Time {
	t.Helper()
	tick := from.Truncate(scaleTick).Add(scaleTick)
	fired := 0
	count := func() bool {
		fired = scaleTicks(s.records(ctx, t), tick, tick)[0].fired
		return fired >= scaleSources
	}
	// The tick itself, then the sends of 2,000 sources and their spread.
	bound := time.Until(tick) + 45*time.Second
	if complete {
		eventually(t, bound, 5*time.Second, func() string {
			return fmt.Sprintf("tick %v: %d of %d sources fired", tick.Format(time.TimeOnly), fired, scaleSources)
		}, count)
	} else {
		for end := time.Now().Add(bound); time.Now().Before(end) && !count(); {
			select {
			case <-ctx.Done():
				t.Fatalf("waiting for the tick of %v: %v", tick.Format(time.TimeOnly), ctx.Err())
			case <-time.After(5 * time.Second):
			}
		}
	}
	t.Logf("tick %v: %d of %d sources fired by %v", tick.Format(time.TimeOnly), fired, scaleSources, time.Now().Format(time.TimeOnly))
	return tick
}

// completeTick is the last minute tick that every scale source has
// fired, or else the next one, once it has: the first tick of a check
// need not be waited for if one already came.
func completeTick(ctx context.Context, t *testing.T, s *sink) time.Time {
	t.Helper()
	rs := s.records(ctx, t)
	now := time.Now().Truncate(scaleTick)
	for tk := now; tk.After(now.Add(-5 * scaleTick)); tk = tk.Add(-scaleTick) {
		if scaleTicks(rs, tk, tk)[0].fired >= scaleSources {
			t.Logf("tick %v: all %d sources fired", tk.Format(time.TimeOnly), scaleSources)
			return tk
		}
	}
	return waitTick(ctx, t, s, time.Now(), true)
}

// stepLog is when each step of a scenario began, to name the ticks.
type stepLog struct {
	mu    sync.Mutex
	at    []time.Time
	names []string
}

func newStepLog() *stepLog { return &stepLog{} }

func (l *stepLog) mark(name string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.at, l.names = append(l.at, time.Now()), append(l.names, name)
}

// during names the steps begun since the tick before tick, or else the
// last step begun before it.
func (l *stepLog) during(tick time.Time) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var since []string
	last := ""
	for i, at := range l.at {
		if at.After(tick) {
			break
		}
		last = l.names[i]
		if at.After(tick.Add(-scaleTick)) {
			since = append(since, l.names[i])
		}
	}
	if len(since) > 0 {
		return strings.Join(since, ", ")
	}
	return last
}

// last names the last step begun at or before tick.
func (l *stepLog) last(tick time.Time) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	name := ""
	for i, at := range l.at {
		if at.After(tick) {
			break
		}
		name = l.names[i]
	}
	return name
}

// logTickTable logs counts as a table, each tick with its step.
func logTickTable(t *testing.T, steps *stepLog, counts []tickCount) {
	t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "%d PingSources, every minute:\n| tick | step | fired | missed | twice | late p50 | p99 | max |\n|---|---|---|---|---|---|---|---|\n", scaleSources)
	for _, c := range counts {
		fmt.Fprintf(&b, "| %s | %s | %d | %d | %d | %v | %v | %v |\n", c.tick.Format(time.TimeOnly), steps.during(c.tick), c.fired,
			scaleSources-c.fired, c.twice, c.p50.Round(time.Millisecond), c.p99.Round(time.Millisecond), c.max.Round(time.Millisecond))
	}
	t.Log(b.String())
}

// unavailable reports the adapter Deployment's unavailable replicas and
// whether its ReplicaSet failed to create a Pod.
func unavailable(ctx context.Context, t *testing.T) (int32, bool) {
	t.Helper()
	d, err := cluster.kube.AppsV1().Deployments(systemNamespace).Get(ctx, adapterName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	failed := false
	for _, c := range d.Status.Conditions {
		if c.Type == "ReplicaFailure" && c.Status == "True" {
			failed = true
		}
	}
	return d.Status.UnavailableReplicas, failed
}

// nudgeAdapterReplicaSets annotates the adapter's ReplicaSets, so that
// Kubernetes' ReplicaSet controller, backing off after each refused Pod,
// tries again at once.
func nudgeAdapterReplicaSets(ctx context.Context, t *testing.T) {
	t.Helper()
	rss, err := cluster.kube.AppsV1().ReplicaSets(systemNamespace).List(ctx, metav1.ListOptions{LabelSelector: adapterSelector})
	if err != nil {
		t.Fatal(err)
	}
	patch := fmt.Sprintf(`{"metadata":{"annotations":{"e2e.event-forwarding.knative.dev/nudged":%q}}}`, time.Now().Format(time.RFC3339Nano))
	for _, rs := range rss.Items {
		if _, err := cluster.kube.AppsV1().ReplicaSets(systemNamespace).Patch(ctx, rs.Name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			t.Fatalf("nudging %s: %v", rs.Name, err)
		}
	}
}
