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
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The adapter's Lease (one bucket: config/300-config-leader-election.yaml)
// and the bound docs/mtping.md gives for a graceful stop of its holder:
// a standby holds it within 2.2 retry-periods (2 s) of the release, so
// sources firing every 10 s lose no tick and none fires twice.
const (
	adapterLease    = "pingsource-mt-adapter.knative.dev.eventing.pkg.adapter.mtping.reconciler.00-of-01"
	haSources       = 5
	haSchedule      = "*/10 * * * * *"
	haTick          = 10 * time.Second
	leaseMoveBound  = 4400 * time.Millisecond // 2.2 x retry-period
	haObservedTicks = 6                       // per source, after the move
)

const haSourceManifest = `
apiVersion: sources.knative.dev/v1
kind: PingSource
metadata: {name: "{{NAME}}", namespace: "{{NAMESPACE}}"}
spec:
  schedule: "` + haSchedule + `"
  data: '{"ha":"{{NAME}}"}'
  sink:
    ref: {apiVersion: serving.knative.dev/v1, kind: Service, name: e2esink}
    uri: /ha
`

// TestAdapter checks the adapter as it runs under upstream's controller:
// the controller's reconciles leave it with the operator's settings, and
// deleting the pod that fires moves its sources to the standby within the
// documented bound, with no tick lost or fired twice.
func TestAdapter(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	ns := newNamespace(ctx, t, "ha")
	s := newSink(ctx, t, ns)
	setThreshold(ctx, t, "0") // always through the proxy
	for i := range haSources {
		apply(ctx, t, ns, strings.ReplaceAll(haSourceManifest, "{{NAME}}", fmt.Sprintf("ha-%d", i)))
	}
	for i := range haSources {
		waitReady(ctx, t, pingSourceGVR, ns, fmt.Sprintf("ha-%d", i), 2*time.Minute)
	}
	// The controller's first reconcile after an install writes its env into
	// the pod template: one rollout (docs/mtping.md). Wait until it is over.
	waitAdapter(ctx, t, "dev.local/event-forwarding-mtping:", "event-forwarding-pingsource-adapter", 2)

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
		if len(c.EnvFrom) != 1 || c.EnvFrom[0].ConfigMapRef == nil || c.EnvFrom[0].ConfigMapRef.Name != "event-forwarding-pingsource-adapter" {
			t.Errorf("envFrom %v: the settings' ConfigMap is gone", c.EnvFrom)
		}
		if *d.Spec.Replicas != 2 || !strings.HasPrefix(c.Image, "dev.local/event-forwarding-mtping:") {
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

	t.Run("leader deleted", func(t *testing.T) {
		// Ticks before the move, so every source is known to fire.
		eventually(t, 2*haTick+time.Minute, time.Second, func() string { return "sources not all firing" }, func() bool {
			return len(ticksBySource(s.records(ctx, t))) == haSources
		})
		// The leader is a ready pod of the Deployment: after the rollout
		// the Lease may still name a replaced pod until its successor
		// takes it.
		var leader string
		eventually(t, time.Minute, time.Second, func() string { return "the Lease is held by " + leader + ", not a ready adapter pod" }, func() bool {
			leader = leaseHolder(ctx, t)
			for _, p := range adapterPods(ctx, t) {
				if p.Name == leader {
					return true
				}
			}
			return false
		})
		deleted := time.Now()
		if err := cluster.kube.CoreV1().Pods(systemNamespace).Delete(ctx, leader, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		var holder string
		eventually(t, time.Minute, 200*time.Millisecond, func() string { return "Lease still held by " + holder }, func() bool {
			holder = leaseHolder(ctx, t)
			return holder != "" && holder != leader
		})
		moved := time.Since(deleted)
		t.Logf("Lease moved from %s to %s %v after the delete", leader, holder, moved.Round(100*time.Millisecond))

		// Then every source keeps its 10 s rhythm: no gap, no twin. Wait
		// until each has fired haObservedTicks times after the delete.
		eventually(t, (haObservedTicks+3)*haTick, time.Second, func() string { return "sources stopped firing after the move" }, func() bool {
			by := ticksBySource(s.records(ctx, t))
			for _, ticks := range by {
				if n := len(ticks); n == 0 || !ticks[n-1].After(deleted.Add(haObservedTicks*haTick-haTick)) {
					return false
				}
			}
			return len(by) == haSources
		})
		since := deleted.Add(-2 * haTick)
		for src, ticks := range ticksBySource(s.records(ctx, t)) {
			var kept []time.Time
			for _, tk := range ticks {
				if tk.After(since) {
					kept = append(kept, tk)
				}
			}
			for i := 1; i < len(kept); i++ {
				switch gap := kept[i].Sub(kept[i-1]); {
				case gap == 0:
					t.Errorf("%s fired twice for the tick of %v", src, kept[i])
				case gap > haTick:
					t.Errorf("%s lost %d ticks between %v and %v", src, int(gap/haTick)-1, kept[i-1], kept[i])
				}
			}
			if len(kept) < haObservedTicks {
				t.Errorf("%s: %d ticks since %v, want at least %d", src, len(kept), since, haObservedTicks)
			}
		}
		if moved > time.Minute {
			t.Errorf("the Lease took %v to move (graceful stop; bound %v after the release)", moved, leaseMoveBound)
		}
	})
}

// leaseHolder is the pod holding the adapter's Lease ("" if none).
func leaseHolder(ctx context.Context, t testing.TB) string {
	t.Helper()
	l, err := cluster.kube.CoordinationV1().Leases(systemNamespace).Get(ctx, adapterLease, metav1.GetOptions{})
	if err != nil || l.Spec.HolderIdentity == nil {
		return ""
	}
	return *l.Spec.HolderIdentity
}

// ticksBySource returns, per PingSource, the tick times (Ce-Time) of the
// events the sink got, sorted.
func ticksBySource(rs []record) map[string][]time.Time {
	out := map[string][]time.Time{}
	for _, r := range rs {
		if !strings.Contains(r.Source, "/pingsources/") {
			continue
		}
		tk, err := time.Parse(time.RFC3339Nano, r.EventTime)
		if err != nil {
			continue
		}
		out[r.Source] = append(out[r.Source], tk.Truncate(time.Second))
	}
	for _, ticks := range out {
		sort.Slice(ticks, func(i, j int) bool { return ticks[i].Before(ticks[j]) })
	}
	return out
}

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
