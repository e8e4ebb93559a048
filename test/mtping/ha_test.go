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
	"math"
	"regexp"
	"slices"
	"syscall"
	"testing"
	"time"

	sourcesv1 "knative.dev/eventing/pkg/apis/sources/v1"
)

// HA timings of TestTwoAdapters (the adapter's ConfigMap).
const (
	haBuckets     = 3
	leaseDuration = 5 * time.Second
	retryPeriod   = 500 * time.Millisecond
	// tick is the sources' period: "*/2 * * * * *" fires on even seconds,
	// on every replica alike, so a takeover keeps the phase and a lost
	// tick shows as a longer interval.
	tick   = 2 * time.Second
	spread = 500 * time.Millisecond // the adapter's default
	// takeoverBound is the design's bound on a dead leader's buckets moving:
	// the lease expires lease-duration after the standby last saw it
	// renewed, and a standby polls every 1 to 2.2 retry periods, before and
	// after the expiry (docs/mtping.md).
	takeoverBound = leaseDuration + 4400*retryPeriod/1000
	// handoverBound is the same after a graceful stop: the lease is
	// released, so only the standby's poll remains (2.2 retry periods),
	// plus the tick the stopping replica waits for first (at most the
	// handover window, 3.2 retry periods plus the spread).
	handoverBound = (2200+3200)*retryPeriod/1000 + spread
)

// TestTwoAdapters runs two adapter processes: each tick fires once across
// both; a killed leader's sources move to the other within the lease
// duration and lose at most the ticks due meanwhile; a leader stopped with
// SIGTERM hands over at once and loses none.
func TestTwoAdapters(t *testing.T) {
	t.Parallel()
	h := startHA(t, map[string]string{
		"buckets": fmt.Sprint(haBuckets), "lease-duration": leaseDuration.String(),
		"renew-deadline": "4s", "retry-period": retryPeriod.String(),
	}, "ha", 6)
	c, sk, sources, procs, firedSince := h.c, h.sk, h.sources, h.procs, h.firedSince
	heldBy := func(names ...string) func() bool {
		return func() bool {
			h := c.leaseHolders(t)
			for _, holder := range h {
				if !slices.Contains(names, holder) {
					return false
				}
			}
			return len(h) == haBuckets
		}
	}
	eventually(t, 15*time.Second, "every lease is held", heldBy("adapter-a", "adapter-b"))
	steady := time.Now()
	eventually(t, 15*time.Second, "every source fired 3 times", firedSince(steady, 3))
	for _, s := range sources {
		if tl := countTicks(sk.sent(s, steady), tick); tl.duplicates != 0 || tl.missing != 0 {
			t.Errorf("%s in steady state with two replicas: %+v", s, tl)
		}
	}

	// Crash: SIGKILL the replica holding the most leases.
	count := map[string]int{}
	for _, holder := range c.leaseHolders(t) {
		count[holder]++
	}
	victim, survivor := "adapter-a", "adapter-b"
	if count["adapter-b"] > count["adapter-a"] {
		victim, survivor = survivor, victim
	}
	procs[victim].Signal(syscall.SIGKILL)
	killed := time.Now()
	_ = procs[victim].Wait(5 * time.Second)
	eventually(t, 2*takeoverBound, survivor+" holds every lease", heldBy(survivor))
	t.Logf("crash: %s held %d of %d leases; %s held them all %v after the kill (bound %v)",
		victim, count[victim], haBuckets, survivor, time.Since(killed).Round(10*time.Millisecond), takeoverBound)
	eventually(t, 10*time.Second, "every source fired twice after the takeover", firedSince(time.Now(), 2))
	checkGaps(t, "crash", sk, sources, steady, killed, takeoverBound)

	// Graceful stop: a new standby, then SIGTERM to the leader.
	procs["adapter-c"] = startAdapter(t, c, "adapter-c")
	before := time.Now()
	eventually(t, 10*time.Second, "every source fired", firedSince(before, 1))
	procs[survivor].Signal(syscall.SIGTERM)
	stopped := time.Now()
	eventually(t, 2*handoverBound, "adapter-c holds every lease", heldBy("adapter-c"))
	handover := time.Since(stopped)
	t.Logf("graceful stop: adapter-c held every lease %v after SIGTERM (bound %v, lease duration %v)",
		handover.Round(10*time.Millisecond), handoverBound, leaseDuration)
	// Waiting for the lease to expire would take at least lease-duration
	// minus one renewal after the last renewal.
	if handover >= leaseDuration-retryPeriod {
		t.Errorf("graceful handover took %v: the lease expired rather than being released", handover)
	}
	if err := procs[survivor].Wait(10 * time.Second); err != nil {
		t.Errorf("%s after SIGTERM: %v", survivor, err)
	}
	eventually(t, 10*time.Second, "every source fired twice after the handover", firedSince(time.Now(), 2))
	checkGaps(t, "graceful stop", sk, sources, before, stopped, 0)
}

// haRun is an API server holding n sources on "*/2 * * * * *", named
// prefix-i, each to its path of one sink, and two adapter processes,
// adapter-a and adapter-b, with the adapter's ConfigMap set to le.
type haRun struct {
	c       *cluster
	sk      *sink
	sources []string
	procs   map[string]*proc
}

func startHA(t *testing.T, le map[string]string, prefix string, n int) *haRun {
	t.Helper()
	h := &haRun{c: newCluster(t, le, "tenant"), sk: newSink(t), procs: map[string]*proc{}}
	for i := range n {
		name := fmt.Sprintf("%s-%d", prefix, i)
		h.sources = append(h.sources, name)
		h.c.createSource(t, "tenant", name, sourcesv1.PingSourceSpec{Schedule: "*/2 * * * * *", Data: name}, h.sk.url(name), sourceStatus{})
	}
	for _, name := range []string{"adapter-a", "adapter-b"} {
		h.procs[name] = startAdapter(t, h.c, name)
	}
	return h
}

// startOneBucket is startHA with 3 sources in one bucket, its lease
// duration (the catch-up bound) 10 s, far beyond the gaps the tests make,
// once a replica, the leader returned, holds it.
func startOneBucket(t *testing.T, prefix string) (h *haRun, leader string) {
	t.Helper()
	h = startHA(t, map[string]string{
		"buckets": "1", "lease-duration": "10s", "renew-deadline": "8s", "retry-period": retryPeriod.String(),
	}, prefix, 3)
	eventually(t, 15*time.Second, "the bucket is held", func() bool {
		for _, holder := range h.c.leaseHolders(t) {
			leader = holder
		}
		return leader != ""
	})
	return h, leader
}

// firedSince reports whether every source has sent n events since from.
func (h *haRun) firedSince(from time.Time, n int) func() bool {
	return func() bool {
		for _, s := range h.sources {
			if len(h.sk.got(s, from)) < n {
				return false
			}
		}
		return true
	}
}

// checkGaps checks the events of each source since from, across an event
// at, for duplicates (none allowed) and missing ticks: at most those due
// within lost after it.
func checkGaps(t *testing.T, what string, sk *sink, sources []string, from, at time.Time, lost time.Duration) {
	t.Helper()
	allowed := int(math.Ceil(float64(lost) / float64(tick)))
	var dups, missing int
	var longest time.Duration
	for _, s := range sources {
		tl := countTicks(sk.sent(s, from), tick)
		dups += tl.duplicates
		missing += tl.missing
		longest = max(longest, tl.longest)
		if tl.duplicates != 0 || tl.missing > allowed {
			t.Errorf("%s, %s: %d duplicates, %d missing ticks (at most %d allowed)", what, s, tl.duplicates, tl.missing, allowed)
		}
	}
	t.Logf("%s: %d sources, %d duplicates, %d missing ticks in all (at most %d per source allowed), longest interval %v",
		what, len(sources), dups, missing, allowed, longest.Round(10*time.Millisecond))
}

// TestLateStandbyCatchesUp stops the leader of the only bucket gracefully
// while the standby is frozen (SIGSTOP) until a tick has passed with the
// Lease free: thawed, the standby takes the Lease and fires that tick
// late, from the mark the leader left on it, so that no tick is lost.
func TestLateStandbyCatchesUp(t *testing.T) {
	t.Parallel()
	h, leader := startOneBucket(t, "late")
	c, sk, sources, procs := h.c, h.sk, h.sources, h.procs
	standby := "adapter-a"
	if leader == standby {
		standby = "adapter-b"
	}
	before := time.Now()
	eventually(t, 15*time.Second, "every source fired twice", h.firedSince(before, 2))

	procs[standby].Signal(syscall.SIGSTOP)
	procs[leader].Signal(syscall.SIGTERM)
	stopped := time.Now()
	if err := procs[leader].Wait(10 * time.Second); err != nil {
		t.Errorf("%s after SIGTERM: %v", leader, err)
	}
	mark := c.firedThrough(t)
	// Thawed once the first tick after the mark is 700 ms past: that tick
	// fell while no replica held the Lease.
	thaw := mark.Truncate(tick).Add(tick + 700*time.Millisecond)
	time.Sleep(time.Until(thaw))
	procs[standby].Signal(syscall.SIGCONT)
	eventually(t, 2*handoverBound, standby+" holds the bucket", func() bool {
		for _, holder := range c.leaseHolders(t) {
			return holder == standby
		}
		return false
	})
	t.Logf("%s released the bucket with the mark %s, %v after SIGTERM; %s thawed %v after the mark",
		leader, mark.Format(time.RFC3339Nano), mark.Sub(stopped).Round(10*time.Millisecond), standby, time.Since(mark).Round(10*time.Millisecond))
	eventually(t, 10*time.Second, "every source fired twice after the thaw", h.firedSince(thaw, 2))
	checkGaps(t, "late standby", sk, sources, before, stopped, 0)
	if m := caughtUp.FindStringSubmatch(procs[standby].Logs.String()); m == nil {
		t.Errorf("%s never logged a caught-up tick:\n%s", standby, procs[standby].Logs.String())
	}
}

// caughtUp matches the log line of a promotion that fired ticks due while
// the bucket was free.
var caughtUp = regexp.MustCompile(`"msg":"Leading a bucket".*"caughtUp":([1-9][0-9]*)`)
