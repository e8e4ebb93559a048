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
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"knative.dev/pkg/reconciler"

	"knative.dev/event-forwarding-proxy/adapter/mtping"
	"knative.dev/event-forwarding-proxy/test/cluster/ticks"
)

// bucketHolders maps each bucket's Lease to its holder's pod ("" if
// none).
func bucketHolders(ctx context.Context, t testing.TB, buckets []reconciler.Bucket) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, b := range buckets {
		out[b.Name()] = ""
		l, err := cluster.kube.CoordinationV1().Leases(systemNamespace).Get(ctx, b.Name(), metav1.GetOptions{})
		if err == nil && l.Spec.HolderIdentity != nil {
			out[b.Name()] = podOf(*l.Spec.HolderIdentity)
		}
	}
	return out
}

// podOf is the pod a Lease holder identity names: the adapter holds
// Leases as its pod's name and mtping.IdentitySuffix.
func podOf(holder string) string {
	return strings.TrimSuffix(holder, mtping.IdentitySuffix)
}

func bucketCounts(holders map[string]string) map[string]int {
	counts := map[string]int{}
	for _, h := range holders {
		counts[h]++
	}
	return counts
}

// evenShares reports whether every bucket is held by one of pods, each
// pod holding ⌊B/R⌋ to ⌈B/R⌉ of them.
func evenShares(holders map[string]string, pods []corev1.Pod) bool {
	counts := bucketCounts(holders)
	lo, hi := len(holders)/len(pods), (len(holders)+len(pods)-1)/len(pods)
	held := 0
	for _, p := range pods {
		n := counts[p.Name]
		if n < lo || n > hi {
			return false
		}
		held += n
	}
	return held == len(holders)
}

// checkTicks checks each PingSource's ticks (every period) since since
// (ticks.Check): none twice, none missed, a violation listed with the
// moves of its bucket around it (moves, by Lease name). It logs each
// bucket's moves and the ticks missed in all.
func checkTicks(t *testing.T, rs []record, since time.Time, buckets []reconciler.Bucket, moves map[string][]ticks.Move, period time.Duration) {
	t.Helper()
	moved := 0
	for _, b := range buckets {
		var ms []string
		for _, m := range moves[b.Name()] {
			if m.End.After(since) {
				ms = append(ms, m.String())
			}
		}
		if len(ms) > 0 {
			moved++
			t.Logf("bucket %s moved %d times since %v: %s", b.Name()[strings.LastIndex(b.Name(), ".")+1:], len(ms),
				since.Format(time.TimeOnly), strings.Join(ms, ", "))
		}
	}
	if moved == 0 {
		t.Logf("no bucket moved since %v", since.Format(time.TimeOnly))
	}
	fired, missed, violated := 0, 0, false
	defer func() {
		t.Logf("since %v: %d ticks fired, %d missed", since.Format(time.TimeOnly), fired, missed)
		if violated {
			// What the adapter saw tells a replica that woke late from
			// one that never led the bucket.
			dumpLogsSince(context.Background(), t, systemNamespace, adapterSelector, since)
		}
	}()
	for src, tks := range ticksBySource(rs) {
		var kept []time.Time
		for _, tk := range tks {
			if tk.After(since) {
				kept = append(kept, tk)
			}
		}
		fired += len(kept)
		key := sourceKey(src)
		var bucketMoves []ticks.Move
		for _, b := range buckets {
			if b.Has(key) {
				bucketMoves = moves[b.Name()]
			}
		}
		n, violations := ticks.Check(kept, bucketMoves, ticks.Params{Period: period, Margin: moveMargin})
		missed += n
		for _, v := range violations {
			violated = true
			t.Errorf("%s %v", src, v)
		}
	}
}

// sourceKey is the PingSource of a CloudEvent source
// (/apis/v1/namespaces/<ns>/pingsources/<name>).
func sourceKey(source string) types.NamespacedName {
	_, rest, _ := strings.Cut(source, "/namespaces/")
	ns, name, _ := strings.Cut(rest, "/pingsources/")
	return types.NamespacedName{Namespace: ns, Name: name}
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
	for _, tks := range out {
		sort.Slice(tks, func(i, j int) bool { return tks[i].Before(tks[j]) })
	}
	return out
}
