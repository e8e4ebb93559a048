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
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The benchmark's load is the seed scenario's before it was compressed
// further, as docs/benchmarks.md records it: every 10 s, each call held
// 100 s, 950 held at the steady state.
const (
	benchSeedTick = 10 * time.Second
	benchSeedHold = 100 * time.Second
)

// idleSourceManifest is a PingSource that fires once a year: with it,
// upstream's controller scales its adapter (shipped with replicas 0) to
// one replica before the load starts, so its figures at rest are taken
// at rest.
const idleSourceManifest = `
apiVersion: sources.knative.dev/v1
kind: PingSource
metadata: {name: idle, namespace: "{{NAMESPACE}}"}
spec:
  schedule: "0 0 1 1 *"
  data: '{"idle":true}'
  sink:
    ref: {apiVersion: serving.knative.dev/v1, kind: Service, name: e2esink}
`

// BenchmarkSeedAdapters runs the seed scenario's load twice in the same
// cluster, to the same sink: first with upstream's adapter sending
// directly (docs/mtping.md's way back), then with the project's adapter
// forwarding through the proxy. For each it reports what the adapter's
// pods cost (working set at rest and at the peak, CPU over the load), the
// sends it had in flight, how late the ticks reached the sink and how
// many never did; and what the proxy's pods cost beside it, since the
// held calls move there. It runs once: `make bench-cluster` passes
// -benchtime 1x.
func BenchmarkSeedAdapters(b *testing.B) {
	if b.N != 1 {
		b.Fatalf("the seed load runs once (-benchtime 1x), not %d times", b.N)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Minute)
	defer cancel()
	ns := newNamespace(ctx, b, "adapters")
	s := newSink(ctx, b, ns)
	apply(ctx, b, ns, idleSourceManifest)
	waitReady(ctx, b, pingSourceGVR, ns, "idle", 2*time.Minute)
	var rows []seedFigures

	b.Run("adapter=upstream", func(b *testing.B) {
		// Upstream's adapter as upstream runs it: the way back's block (the
		// HPA deleted, upstream's image), then one replica; the install
		// block puts the project's back.
		core := filepath.Join(b.TempDir(), "eventing-core.yaml")
		if err := os.WriteFile(core, []byte(upstreamEventing(b, "deployments/pingsource-mt-adapter.yaml")), 0o644); err != nil {
			b.Fatal(err)
		}
		docBlock(b, "rollback", "EVENTING_CORE="+core)
		if out, err := kubectl("-n", systemNamespace, "scale", "deployment/"+adapterName, "--replicas=1"); err != nil {
			b.Fatalf("scaling upstream's adapter to 1: %v\n%s", err, out)
		}
		b.Cleanup(func() {
			docBlock(b, "install")
			waitAdapter(ctx, b, projectAdapterImage, adapterAccount, 2)
		})
		waitAdapter(ctx, b, upstreamAdapterImage, adapterAccount, 1)
		rows = append(rows, runSeedLoad(ctx, b, ns, s, "upstream"))
	})
	b.Run("adapter=forwarding", func(b *testing.B) {
		setThreshold(ctx, b, seedThreshold)
		rows = append(rows, runSeedLoad(ctx, b, ns, s, "forwarding"))
	})
	b.Logf("%d PingSources firing every %v for %v, the sink holding each call %v:\n%s",
		seedSources, benchSeedTick, seedLoad, benchSeedHold, seedTable(rows))
}

// seedFigures are what one adapter cost under the seed load.
type seedFigures struct {
	adapter                   string
	adapterRest, adapterPeak  float64 // working set of the adapter's pods, bytes
	adapterCPU                float64 // core-seconds over the load
	proxyRest, proxyPeak      float64 // working set of the proxy's pods (proxy and queue-proxy), bytes
	inFlight, heldAtSink      float64 // peaks: the adapter's sends in flight, calls held at the sink
	events, missed, twice     int
	lateP50, lateP99, lateMax time.Duration
}

// runSeedLoad fires seedSources PingSources named <name>-NNN at the sink
// for seedLoad, sampling every 5 s, then deletes them and waits until the
// sink holds none of their calls.
func runSeedLoad(ctx context.Context, b *testing.B, ns string, s *sink, name string) seedFigures {
	b.Helper()
	adapters := adapterPods(ctx, b)
	f := seedFigures{adapter: name}
	f.adapterRest, _ = podUsage(ctx, b, adapters)
	f.proxyRest, _ = podUsage(ctx, b, installed.pods(ctx, b))
	for i := range seedSources {
		apply(ctx, b, ns, seedSource(fmt.Sprintf("%s-%03d", name, i), benchSeedTick, benchSeedHold))
	}
	for i := range seedSources {
		waitReady(ctx, b, pingSourceGVR, ns, fmt.Sprintf("%s-%03d", name, i), 2*time.Minute)
	}
	prefix := seedSourcePrefix(ns) + name + "-"
	held := func() float64 {
		n := 0
		for _, r := range s.records(ctx, b) {
			if strings.HasPrefix(r.Source, prefix) && r.Outcome == "held" {
				n++
			}
		}
		return float64(n)
	}

	b.ResetTimer()
	_, cpuStart := podUsage(ctx, b, adapters)
	for end := time.Now().Add(seedLoad); time.Now().Before(end); time.Sleep(5 * time.Second) {
		mem, _ := podUsage(ctx, b, adapters)
		proxyMem, _ := podUsage(ctx, b, installed.pods(ctx, b))
		atSink := held()
		// Upstream's adapter exports no in-flight gauge: every call it has
		// in flight is one the sink holds, as it sends directly.
		inFlight := atSink
		if name != "upstream" {
			inFlight = 0
			for _, p := range adapters {
				n, err := gauge(ctx, p, adapterPort, "kn_forward_mtping_inflight_sends")
				if err != nil {
					b.Fatal(err)
				}
				inFlight += n
			}
		}
		f.adapterPeak, f.proxyPeak = max(f.adapterPeak, mem), max(f.proxyPeak, proxyMem)
		f.inFlight, f.heldAtSink = max(f.inFlight, inFlight), max(f.heldAtSink, atSink)
	}
	_, cpuEnd := podUsage(ctx, b, adapters)
	b.StopTimer()
	f.adapterCPU = cpuEnd - cpuStart

	for i := range seedSources {
		if err := cluster.dynamic.Resource(pingSourceGVR).Namespace(ns).Delete(ctx, fmt.Sprintf("%s-%03d", name, i), metav1.DeleteOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	stillHeld := 0.0
	eventually(b, benchSeedHold+2*time.Minute, 5*time.Second, func() string { return fmt.Sprintf("the sink still holds %v calls", stillHeld) }, func() bool {
		stillHeld = held()
		return stillHeld == 0
	})
	tickFigures(&f, s.records(ctx, b), prefix)
	b.ReportMetric(f.adapterPeak/(1<<20), "adapter-MiB-peak")
	b.ReportMetric(f.adapterCPU, "adapter-CPU-s")
	b.ReportMetric(f.inFlight, "adapter-in-flight-peak")
	b.ReportMetric(float64(f.lateP99.Milliseconds()), "late-ms-p99")
	b.ReportMetric(float64(f.missed), "ticks-missed")
	return f
}

// podUsage sums the working set (bytes) and CPU used (core-seconds) of
// every container of pods, from the kubelet.
func podUsage(ctx context.Context, t testing.TB, pods []corev1.Pod) (workingSet, cpu float64) {
	t.Helper()
	names := map[string]bool{}
	for _, p := range pods {
		names[p.Namespace+"/"+p.Name] = true
	}
	for _, c := range containerUsages(ctx, t) {
		if names[c.namespace+"/"+c.pod] {
			workingSet += c.workingSet
			cpu += c.cpu
		}
	}
	return workingSet, cpu
}

// tickFigures reads, from the sink's records of the sources whose name
// starts with prefix, how late each tick arrived after its 10 s boundary
// (the sink's clock is the adapter's: one node), the ticks missing
// between a source's first and last arrival, and the events that arrived
// twice.
func tickFigures(f *seedFigures, rs []record, prefix string) {
	arrivals := map[string][]time.Time{}
	ids := map[string]int{}
	var late []time.Duration
	for _, r := range rs {
		if !strings.HasPrefix(r.Source, prefix) {
			continue
		}
		arrivals[r.Source] = append(arrivals[r.Source], r.Time)
		ids[r.ID]++
		late = append(late, r.Time.Sub(r.Time.Truncate(benchSeedTick)))
	}
	for _, n := range ids {
		if n > 1 {
			f.twice++
		}
	}
	for _, ts := range arrivals {
		slices.SortFunc(ts, func(a, b time.Time) int { return a.Compare(b) })
		for i := 1; i < len(ts); i++ {
			f.missed += int(math.Round(float64(ts[i].Sub(ts[i-1]))/float64(benchSeedTick))) - 1
		}
	}
	f.events = len(ids)
	if len(late) > 0 {
		slices.Sort(late)
		f.lateP50, f.lateP99, f.lateMax = late[len(late)/2], late[min(len(late)-1, len(late)*99/100)], late[len(late)-1]
	}
}

// seedTable is the figures side by side, as Markdown.
func seedTable(rows []seedFigures) string {
	var b strings.Builder
	b.WriteString("| adapter | adapter MiB rest / peak | adapter CPU s | sends in flight (peak) | held at the sink (peak) | events | missed ticks | twice | late p50 / p99 / max ms | proxy pods MiB rest / peak |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|---|\n")
	mib := func(v float64) string { return fmt.Sprintf("%.1f", v/(1<<20)) }
	for _, f := range rows {
		fmt.Fprintf(&b, "| %s | %s / %s | %.1f | %.0f | %.0f | %d | %d | %d | %d / %d / %d | %s / %s |\n", f.adapter,
			mib(f.adapterRest), mib(f.adapterPeak), f.adapterCPU, f.inFlight, f.heldAtSink, f.events, f.missed, f.twice,
			f.lateP50.Milliseconds(), f.lateP99.Milliseconds(), f.lateMax.Milliseconds(), mib(f.proxyRest), mib(f.proxyPeak))
	}
	return b.String()
}
