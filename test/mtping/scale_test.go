//go:build integration

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

package mtping

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	kle "knative.dev/pkg/leaderelection"
	"knative.dev/pkg/reconciler"

	sourcesv1 "knative.dev/eventing/pkg/apis/sources/v1"

	adapter "knative.dev/event-forwarding-proxy/adapter/mtping"
)

// Timings of TestSharesFollowReplicas: knative.dev/pkg's most buckets,
// ticks every 5 s (moves take under one; a dead replica's Leases expire
// within takeoverBound).
const (
	scaleBuckets = 10
	scaleSources = 300
	scaleTick    = 5 * time.Second
)

// TestSharesFollowReplicas runs 3, then 4, then 2 adapter processes
// started one after the other on 10 buckets: after each change every
// replica leads between ⌊10/R⌋ and ⌈10/R⌉ buckets, no tick fires twice,
// a source whose bucket moved misses at most one tick (a dead replica's,
// those due until its Leases expire) and the others miss none.
func TestSharesFollowReplicas(t *testing.T) {
	t.Parallel()
	c := newCluster(t, map[string]string{
		"buckets": fmt.Sprint(scaleBuckets), "lease-duration": leaseDuration.String(),
		"renew-deadline": "4s", "retry-period": retryPeriod.String(),
	}, "tenant")
	sk := newSink(t)
	var sources []string
	for i := range scaleSources {
		name := fmt.Sprintf("scale-%03d", i)
		sources = append(sources, name)
		c.createSource(t, "tenant", name, sourcesv1.PingSourceSpec{Schedule: "*/5 * * * * *", Data: name}, sk.url(name), sourceStatus{})
	}
	buckets := adapter.Buckets(kle.ComponentConfig{Component: adapter.Component, Buckets: scaleBuckets})
	procs := map[string]*proc{}
	var holders map[string]string // at the end of the last step
	step := func(what string, running []string, change func(), dead ...string) {
		t.Helper()
		from := time.Now()
		moves := watchMoves(t, c)
		change()
		changed := time.Now()
		eventually(t, 60*time.Second, what+": the shares are even", func() bool {
			h := c.leaseHolders(t)
			if !evenShares(h, running) {
				return false
			}
			// Even and still so after the quiet time of a release.
			time.Sleep(4 * retryPeriod)
			if h2 := c.leaseHolders(t); !maps.Equal(h, h2) {
				return false
			}
			holders = h
			return true
		})
		settled := time.Since(changed)
		eventually(t, 3*scaleTick, what+": every source fired twice since", firedSince(sk, sources, time.Now(), 2))
		history := moves()
		owners := sourceOwners(buckets, holders, sources)
		counts := map[string]int{}
		for _, o := range owners {
			counts[o]++
		}
		movedSources, movedBuckets, missing, duplicates := 0, 0, 0, 0
		for _, seq := range history {
			movedBuckets += len(seq) - 1
		}
		for _, s := range sources {
			tl := countTicks(sk.sent(s, from), scaleTick)
			// Each move may cost the tick due while the Lease is free; a
			// dead holder's, those due until its Lease expires.
			seq := history[bucketOf(buckets, s)]
			allowed := 0
			for i := 1; i < len(seq); i++ {
				allowed++
				if slices.Contains(dead, seq[i-1]) {
					allowed += int(math.Ceil(float64(takeoverBound)/float64(scaleTick))) - 1
				}
			}
			if len(seq) > 1 {
				movedSources++
			}
			missing += tl.missing
			duplicates += tl.duplicates
			if tl.duplicates != 0 || tl.missing > allowed {
				t.Errorf("%s, %s: %d duplicates, %d missing ticks (at most %d allowed: holders %v)", what, s, tl.duplicates, tl.missing, allowed, seq)
			}
		}
		t.Logf("%s: even %v after the change; buckets %v; sources %v; %d bucket moves, %d sources moved; %d missing ticks, %d duplicates in all",
			what, settled.Round(10*time.Millisecond), bucketCounts(holders), counts, movedBuckets, movedSources, missing, duplicates)
	}

	step("3 replicas", []string{"adapter-a", "adapter-b", "adapter-c"}, func() {
		for _, name := range []string{"adapter-a", "adapter-b", "adapter-c"} {
			procs[name] = startAdapter(t, c, name)
		}
	})
	step("a 4th replica", []string{"adapter-a", "adapter-b", "adapter-c", "adapter-d"}, func() {
		procs["adapter-d"] = startAdapter(t, c, "adapter-d")
	})
	step("2 replicas: one stopped, one killed", []string{"adapter-a", "adapter-b"}, func() {
		procs["adapter-d"].Signal(syscall.SIGTERM)
		procs["adapter-c"].Signal(syscall.SIGKILL)
	}, "adapter-c")
	if err := procs["adapter-d"].Wait(10 * time.Second); err != nil {
		t.Errorf("adapter-d after SIGTERM: %v", err)
	}
	// The stopped replica released its member slot; the killed one's is
	// left for a replica to take over, never deleted: the member Leases
	// stay as many as the buckets at most, held by the running replicas
	// and the dead one.
	eventually(t, 2*leaseDuration, "the stopped replica's member slot released", func() bool {
		leases, err := c.kube.CoordinationV1().Leases(systemNamespace).List(c.ctx, metav1.ListOptions{LabelSelector: adapter.MemberLabel})
		if err != nil {
			t.Fatal(err)
		}
		if len(leases.Items) > scaleBuckets {
			t.Fatalf("%d member Leases for %d buckets", len(leases.Items), scaleBuckets)
		}
		var holders []string
		for _, l := range leases.Items {
			if h := replicaOf(l.Spec.HolderIdentity); h != "" {
				holders = append(holders, h)
			}
		}
		slices.Sort(holders)
		return slices.Equal(holders, []string{"adapter-a", "adapter-b", "adapter-c"})
	})
}

// evenShares reports whether every bucket is held by one of running and
// each leads between ⌊B/R⌋ and ⌈B/R⌉.
func evenShares(holders map[string]string, running []string) bool {
	counts := bucketCounts(holders)
	if len(holders) != scaleBuckets {
		return false
	}
	for holder := range counts {
		if !slices.Contains(running, holder) {
			return false
		}
	}
	r := len(running)
	for _, m := range running {
		if n := counts[m]; n < scaleBuckets/r || n > (scaleBuckets+r-1)/r {
			return false
		}
	}
	return true
}

func bucketCounts(holders map[string]string) map[string]int {
	counts := map[string]int{}
	for _, h := range holders {
		counts[h]++
	}
	return counts
}

// watchMoves samples the bucket Leases' holders every 100 ms until the
// function it returns is called, which returns each bucket's successive
// holders (free spells left out).
func watchMoves(t *testing.T, c *cluster) func() map[string][]string {
	t.Helper()
	history := map[string][]string{}
	for b, h := range c.leaseHolders(t) {
		if h != "" {
			history[b] = []string{h}
		}
	}
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			leases, err := c.kube.CoordinationV1().Leases(systemNamespace).List(c.ctx, metav1.ListOptions{})
			if err != nil {
				continue // the next sample
			}
			for _, l := range leases.Items {
				h := replicaOf(l.Spec.HolderIdentity)
				if _, member := l.Labels[adapter.MemberLabel]; member || h == "" || !strings.HasSuffix(l.Name, c.bucketLeases) {
					continue
				}
				if seq := history[l.Name]; len(seq) == 0 || seq[len(seq)-1] != h {
					history[l.Name] = append(seq, h)
				}
			}
		}
	}()
	return func() map[string][]string {
		close(stop)
		<-done
		return history
	}
}

// bucketOf is the Lease name of the bucket of source s (tenant namespace).
func bucketOf(buckets []reconciler.Bucket, s string) string {
	for _, b := range buckets {
		if b.Has(types.NamespacedName{Namespace: "tenant", Name: s}) {
			return b.Name()
		}
	}
	return ""
}

// sourceOwners maps each source of the tenant namespace to the holder of
// its bucket's Lease.
func sourceOwners(buckets []reconciler.Bucket, holders map[string]string, sources []string) map[string]string {
	owners := make(map[string]string, len(sources))
	for _, s := range sources {
		for _, b := range buckets {
			if b.Has(types.NamespacedName{Namespace: "tenant", Name: s}) {
				owners[s] = holders[b.Name()]
			}
		}
	}
	return owners
}

// firedSince reports whether every source reached the sink n times since
// from.
func firedSince(sk *sink, sources []string, from time.Time, n int) func() bool {
	return func() bool {
		for _, s := range sources {
			if len(sk.got(s, from)) < n {
				return false
			}
		}
		return true
	}
}
