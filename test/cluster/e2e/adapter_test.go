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
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	kle "knative.dev/pkg/leaderelection"

	"knative.dev/event-forwarding-proxy/adapter/mtping"
)

// The adapter's buckets (config/300-pingsource-adapter-settings.yaml: 10
// Leases, 15 s lease duration, 2 s retry period) and what docs/mtping.md
// promises of them: each of R replicas holds ⌊10/R⌋ to ⌈10/R⌉ buckets
// once the shares settle, a bucket never fires from two replicas, and a
// source misses no tick when its bucket moves, to even the shares or at a
// replica's graceful stop (the hand-over mark).
const (
	adapterBuckets  = 10
	haSources       = 30
	haSchedule      = "*/10 * * * * *"
	haTick          = 10 * time.Second
	shareBound      = 90 * time.Second // a pod's start, its first Lease period and the hand-overs
	haObservedTicks = 3                // per source, after each change
	hpaLoadSources  = 40
	// The HPA's bound: the held sends' ramp (30 s), Prometheus' scrape,
	// Prometheus Adapter's relist and the HPA's sync (10 s, 15 s, 15 s
	// here), with room for a slow node.
	hpaBound = 4 * time.Minute
	// moveMargin widens a gap between two ticks of a source when the moves
	// of its bucket are listed with it (ticks.Params). A move's sampled
	// span already holds its hand-over; what sampling does not see is a
	// tick's time: its send's, up to the 500 ms spread late, truncated to
	// the second. 2 s covers that with room, and stays well under half a
	// period, so a move is listed only for the gaps next to it.
	moveMargin = 2 * time.Second
)

// The scenario's sources are created early, on a schedule that fires
// once a year, during the seed load once its own sources are Ready (no
// send of theirs may count in its checks), and switched to theirs when a step needs
// them: Eventing readies sources one after the other, 2,000 of them over
// minutes. The adapter reads a source's schedule from its spec, so a
// switch takes effect without the controller.
const (
	idleSchedule    = "0 0 1 1 *"
	hpaLoadSchedule = "* * * * * *"
)

const hpaLoadManifest = `
apiVersion: sources.knative.dev/v1
kind: PingSource
metadata: {name: "{{NAME}}", namespace: "{{NAMESPACE}}"}
spec:
  schedule: "` + idleSchedule + `"
  data: '{"load":"{{NAME}}"}'
  sink:
    ref: {apiVersion: serving.knative.dev/v1, kind: Service, name: e2esink}
    uri: /load?hold=30s
`

const haSourceManifest = `
apiVersion: sources.knative.dev/v1
kind: PingSource
metadata: {name: "{{NAME}}", namespace: "{{NAMESPACE}}"}
spec:
  schedule: "` + idleSchedule + `"
  data: '{"ha":"{{NAME}}"}'
  sink:
    ref: {apiVersion: serving.knative.dev/v1, kind: Service, name: e2esink}
    uri: /ha
`

// TestAdapter checks the adapter as it runs under upstream's controller
// and its HPA: the controller's reconciles leave it with the operator's
// settings; from 1 replica, sends held by slow sinks make the HPA scale it
// to 3, each firing about a third of the sources; deleting one moves its
// share to the others and then to its replacement; a replica that cannot
// start (every PingSource Deployed Unknown meanwhile) pauses none; the
// HPA scales it back in. Through all of it, for 30 sources every 10 s and
// 2,000 every minute, no tick fires twice and none is missed, however its
// bucket moves; the minute ticks are logged as a table.
func TestAdapter(t *testing.T) {
	adapterStage.begin(t) // before t.Parallel: see stages_test.go
	t.Parallel()          // beside the seed scenario's scale-in
	ctx, cancel := context.WithTimeout(context.Background(), 35*time.Minute)
	defer cancel()
	// Sinks and idle sources during the seed load, its sources Ready.
	after(t, upgradeStage, oidcStage, heartbeatsStage, seedSourcesStage)
	ns := newNamespace(ctx, t, "ha")
	s := newSink(ctx, t, ns)
	loadNS := newNamespace(ctx, t, "hpa")
	newSink(ctx, t, loadNS)
	scaleNS := newNamespace(ctx, t, "scale")
	scaleSink := newSink(ctx, t, scaleNS)
	var sources []types.NamespacedName
	for i := range haSources {
		name := fmt.Sprintf("ha-%d", i)
		apply(ctx, t, ns, strings.ReplaceAll(haSourceManifest, "{{NAME}}", name))
		sources = append(sources, types.NamespacedName{Namespace: ns, Name: name})
	}
	var loads []string
	for i := range hpaLoadSources {
		name := fmt.Sprintf("load-%d", i)
		apply(ctx, t, loadNS, strings.ReplaceAll(hpaLoadManifest, "{{NAME}}", name))
		loads = append(loads, name)
	}
	// Thousands of sources firing every minute, in their own namespace and
	// sink (scale_test.go), created after the 70 above (Eventing readies
	// sources in turn) and switched to every minute once the seed load is
	// over, beside the first steps below. The last steps (a replica that
	// cannot start, the scale-up it holds back, the scale-in) run with
	// every one of them firing.
	scaleCreated := startScaleSources(ctx, t, scaleSink, scaleSources)
	after(t, seedLoadStage)
	buckets := mtping.Buckets(kle.ComponentConfig{Component: mtping.Component, Buckets: adapterBuckets})
	// From the start, so that the moves of the install's rollout are known
	// too, should they fall in a window settle checks.
	moves := recordMoves(ctx, t, buckets)
	for _, src := range sources {
		waitReady(ctx, t, pingSourceGVR, ns, src.Name, 2*time.Minute)
		setSchedule(ctx, t, ns, src.Name, haSchedule)
	}
	for _, name := range loads {
		waitReady(ctx, t, pingSourceGVR, loadNS, name, 2*time.Minute)
	}
	scaleCreated(t)
	scaleSwitched := startScaleSchedules(ctx, t, scaleNS, scaleSources)
	setThreshold(ctx, t, "0") // always through the proxy
	// The controller's first reconcile after an install writes its env into
	// the pod template: one rollout (docs/mtping.md). Wait until it is over.
	waitAdapter(ctx, t, projectAdapterImage, adapterAccount, 2)
	steps := newStepLog()
	t.Cleanup(func() {
		// Back to the installed 2 replicas (restoreHPA has run); ctx is
		// cancelled by now.
		ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
		defer cancel()
		waitAdapter(ctx, t, projectAdapterImage, adapterAccount, 2)
	})

	t.Run("settings survive the controller", func(t *testing.T) {
		// Every PingSource reconcile runs the controller's adapter
		// reconcile, which rewrites the container's env when it differs.
		d, err := cluster.kube.AppsV1().Deployments(systemNamespace).Get(ctx, adapterName, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		c := d.Spec.Template.Spec.Containers[0]
		names := map[string]bool{}
		for _, e := range c.Env {
			names[e.Name] = true
		}
		if !names["K_SINK_TIMEOUT"] || !names["SYSTEM_NAMESPACE"] {
			t.Errorf("env %v: the controller has not written its list", c.Env)
		}
		if *d.Spec.Replicas != 2 || !strings.HasPrefix(c.Image, projectAdapterImage) {
			t.Errorf("replicas %d, image %s", *d.Spec.Replicas, c.Image)
		}
		cm, err := cluster.kube.CoreV1().ConfigMaps(systemNamespace).Get(ctx, "event-forwarding-pingsource-adapter", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		want := fmt.Sprintf(`"drainTimeout":"%s"`, cm.Data["DRAIN_TIMEOUT"])
		for _, p := range adapterPods(ctx, t) {
			if log := startLine(ctx, t, p); !strings.Contains(log, want) {
				t.Errorf("%s started with %s, want %s", p.Name, log, want)
			}
		}
	})

	// settle waits until the adapter runs replicas (0: as many as it
	// has), the ready pods share the buckets evenly, then until every
	// source has fired haObservedTicks more times, and checks the ticks
	// since from. It returns when the shares were even.
	settle := func(t *testing.T, replicas int32, from time.Time) time.Time {
		t.Helper()
		if replicas > 0 {
			waitAdapter(ctx, t, projectAdapterImage, adapterAccount, replicas)
		}
		var holders map[string]string
		eventually(t, shareBound, 500*time.Millisecond, func() string { return fmt.Sprintf("shares not even: %v", holders) }, func() bool {
			holders = bucketHolders(ctx, t, buckets)
			return evenShares(holders, adapterPods(ctx, t))
		})
		owners := map[string]int{}
		for _, src := range sources {
			for _, b := range buckets {
				if b.Has(src) {
					owners[holders[b.Name()]]++
				}
			}
		}
		t.Logf("%d replicas: buckets %v, sources %v, %v after the change", len(adapterPods(ctx, t)), bucketCounts(holders), owners,
			time.Since(from).Round(100*time.Millisecond))
		settled := time.Now()
		eventually(t, (haObservedTicks+2)*haTick, time.Second, func() string { return "sources stopped firing" }, func() bool {
			by := ticksBySource(s.records(ctx, t))
			for _, tks := range by {
				if n := len(tks); n == 0 || !tks[n-1].After(settled.Add(haObservedTicks*haTick-haTick)) {
					return false
				}
			}
			return len(by) == haSources
		})
		since := from.Add(-2 * haTick)
		if since.Before(moves.started) {
			// Moves before the recording are unknown: ticks there could not
			// be matched to them.
			t.Logf("ticks checked from %v, when the moves' recording began", moves.started.Format(time.TimeOnly))
			since = moves.started
		}
		checkTicks(t, s.records(ctx, t), since, buckets, moves.byBucket(), haTick)
		return settled
	}

	// Sends the adapter holds: sources firing every second, directly, to a
	// sink that holds each call 30 s, 1,200 sends in all, 600 a pod at the
	// HPA's minimum of 2, above its target (500): the HPA asks for 3. Held
	// at 1 replica first, then let go. Both switches to the proxy are off:
	// the sources' threshold is out of reach, the in-flight one is 0. The
	// load sources, Ready since the start, begin to fire now.
	hpa := adapterHPA(ctx, t)
	t.Cleanup(func() { restoreHPA(t, hpa) })
	t.Cleanup(func() {
		// The load gone before the HPA's bounds are restored (cleanups
		// run last first), or the HPA would scale the adapter out again.
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		stopLoad(ctx, t, loadNS)
		if err := waitSourcesGone(ctx, loadNS); err != nil {
			t.Logf("the HPA's load sources: %v", err)
		}
	})
	setHPABounds(ctx, t, 1, 1)
	steps.mark("to 1 replica")
	setThreshold(ctx, t, "100000")
	setForwardingKey(ctx, t, "event-forwarding-inflight-threshold", "0")
	for _, name := range loads {
		setSchedule(ctx, t, loadNS, name, hpaLoadSchedule)
	}

	t.Run("from 1 to 3 replicas, by the HPA", func(t *testing.T) {
		// Ticks first, so every source is known to fire.
		eventually(t, 2*haTick+time.Minute, time.Second, func() string { return "sources not all firing" }, func() bool {
			return len(ticksBySource(s.records(ctx, t))) == haSources
		})
		settle(t, 1, time.Now())
		from := time.Now()
		setHPABounds(ctx, t, *hpa.Spec.MinReplicas, hpa.Spec.MaxReplicas)
		steps.mark("HPA scale-up")
		var last string
		eventually(t, hpaBound, 2*time.Second, func() string { return "the HPA: " + last }, func() bool {
			h := adapterHPA(ctx, t)
			last = fmt.Sprintf("desired %d, current %d, metrics %+v, conditions %+v", h.Status.DesiredReplicas, h.Status.CurrentReplicas,
				h.Status.CurrentMetrics, h.Status.Conditions)
			return h.Status.DesiredReplicas >= 3
		})
		t.Logf("the HPA asked for %d replicas %v after it was let go", adapterHPA(ctx, t).Status.DesiredReplicas,
			time.Since(from).Round(time.Second))
		eventually(t, shareBound, time.Second, func() string { return "fewer than 3 ready adapter pods" }, func() bool {
			return len(adapterPods(ctx, t)) >= 3
		})
		settle(t, 0, from)
	})

	t.Run("a replica deleted", func(t *testing.T) {
		pods := adapterPods(ctx, t)
		victim := pods[0].Name
		deleted := time.Now()
		steps.mark("replica deleted")
		if err := cluster.kube.CoreV1().Pods(systemNamespace).Delete(ctx, victim, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		// Its buckets go to the others at once; its replacement, once
		// ready, takes its share back from them.
		var holders map[string]string
		eventually(t, time.Minute, 200*time.Millisecond, func() string { return fmt.Sprintf("%s still holds buckets: %v", victim, holders) }, func() bool {
			holders = bucketHolders(ctx, t, buckets)
			for _, h := range holders {
				if h == victim || h == "" {
					return false
				}
			}
			return true
		})
		t.Logf("%s's buckets moved %v after the delete", victim, time.Since(deleted).Round(100*time.Millisecond))
		eventually(t, shareBound, time.Second, func() string { return "no replacement pod ready" }, func() bool {
			n := 0
			for _, p := range adapterPods(ctx, t) {
				if p.Name != victim {
					n++
				}
			}
			return n >= 3
		})
		settle(t, 0, deleted)
	})

	var firstTick time.Time // the first minute tick checked
	t.Run("a replica that cannot start", func(t *testing.T) {
		// One more replica, which an admission policy refuses: the
		// Deployment has an unavailable replica, Eventing marks every
		// PingSource Deployed Unknown, and the running replicas must fire
		// them all the same.
		scaleSwitched(t)
		waitScaleReady(ctx, t, scaleNS, scaleSources)
		steps.mark(fmt.Sprintf("%d replicas", len(adapterPods(ctx, t))))
		firstTick = completeTick(ctx, t, scaleSink)
		release := holdBackAdapterPods(ctx, t)
		// Read once the policy holds: the HPA may have added a replica
		// since the last step (a minute tick raises the sends it reads),
		// whose Pod got in. One more than the Deployment now asks for
		// cannot.
		n := adapterReplicas(ctx, t)
		from := time.Now()
		setHPABounds(ctx, t, n+1, n+1)
		steps.mark("replica cannot start")
		var short int32
		var failed bool
		eventually(t, time.Minute, time.Second, func() string {
			return fmt.Sprintf("the adapter Deployment has %d unavailable replicas (replica failure %v)", short, failed)
		}, func() bool {
			short, failed = unavailable(ctx, t)
			return short > 0 && failed
		})
		// Eventing rewrites the sources' status one by one: half of them
		// marked is enough to see whether they keep firing.
		notDeployed := 0
		eventually(t, 3*time.Minute, 5*time.Second, func() string {
			return fmt.Sprintf("%d of %d PingSources not Deployed", notDeployed, scaleSources)
		}, func() bool {
			notDeployed = deployedNotTrue(ctx, t, scaleNS)
			return notDeployed >= scaleSources/2
		})
		t.Logf("%d PingSources not Deployed %v after the replica was refused", notDeployed, time.Since(from).Round(time.Second))
		// No bucket moves while the new replica cannot start: the whole
		// tick fires.
		waitTick(ctx, t, scaleSink, time.Now(), true)
		t.Logf("%d PingSources not Deployed after the tick", deployedNotTrue(ctx, t, scaleNS))
		release()
		steps.mark("held-back replica let in")
		nudgeAdapterReplicaSets(ctx, t)
		settle(t, n+1, from)
	})

	var scaledIn time.Time // when the scale-in's shares were even
	t.Run("HPA scale-in", func(t *testing.T) {
		// The HPA's load has done its part (the bounds hold the replicas
		// from here): its sends, each held 30 s, drain during the
		// scale-in rather than at the cleanup.
		stopLoad(ctx, t, loadNS)
		from := time.Now()
		lo := *hpa.Spec.MinReplicas
		setHPABounds(ctx, t, lo, lo)
		steps.mark("scale-in")
		scaledIn = settle(t, lo, from)
	})

	t.Run("thousands of sources", func(t *testing.T) {
		if firstTick.IsZero() || scaledIn.IsZero() {
			t.Fatal("no minute tick was checked: the sources were not all Ready, or the scale-in did not settle")
		}
		// The last tick checked is the first after the scale-in settled:
		// it may have come while its ticks were counted.
		lastTick := waitTick(ctx, t, scaleSink, scaledIn, true)
		rs := scaleSink.records(ctx, t)
		counts := scaleTicks(rs, firstTick, lastTick)
		logTickTable(t, steps, counts)
		checkTicks(t, rs, firstTick.Add(-time.Second), buckets, moves.byBucket(), scaleTick)
	})
	// Before the cleanups: the Operator scenario waits for them all.
	deleteScaleSources(ctx, t, scaleNS, scaleSources)
}

// stopLoad deletes the HPA's load sources.
func stopLoad(ctx context.Context, t *testing.T, namespace string) {
	t.Helper()
	err := cluster.dynamic.Resource(pingSourceGVR).Namespace(namespace).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
	if err != nil {
		t.Errorf("deleting the HPA's load sources: %v", err)
	}
}

// projectAdapterImage is how the release names this project's adapter
// image on the cluster (docs/install.md): by digest.
const projectAdapterImage = "dev.local/event-forwarding-mtping@sha256:"

// upstreamAdapterImage is the start of upstream's adapter image on the
// cluster, of the Eventing release applied or of the upgrade's.
const upstreamAdapterImage = "dev.local/eventing-mtping:"

// adapterAccount is the adapter's service account: Eventing's, since the
// install changes only the Deployment's image.
const adapterAccount = "pingsource-mt-adapter"

// startLine is the adapter's "Starting" log line of pod p.
func startLine(ctx context.Context, t testing.TB, p corev1.Pod) string {
	t.Helper()
	b, err := cluster.kube.CoreV1().Pods(p.Namespace).GetLogs(p.Name, &corev1.PodLogOptions{Container: "dispatcher"}).DoRaw(ctx)
	if err != nil {
		t.Fatalf("logs of %s: %v", p.Name, err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if strings.Contains(line, `"Starting"`) {
			return line
		}
	}
	return "(no Starting line)"
}
