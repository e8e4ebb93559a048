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
	"testing"
	"time"

	"knative.dev/event-forwarding-proxy/test/testproc"
)

// directSendStackMax is the most goroutine stack a direct send the real
// adapter holds may cost. The send waits for its sink on a goroutine of its
// own, whose stack stays as large as the deepest point the send reached;
// the CloudEvents SDK's validation and encoding and the dialer run on
// short-lived goroutines of their own (delivery's prepareAside,
// http1.Transport.dialAside), so it stays at 4 KiB. With them on the
// sending goroutine it doubled: 8.5 KB per send held at 6,000. The
// bound sits at the doubled stack's own 8 KiB: between the two, what a
// send reads depends on the machine's load, not on the send (4.9 KB
// quiet, 6.2 to 7.2 KB with both cores busy, from stacks of ended
// goroutines that the collections awaited have not yet freed).
const directSendStackMax = 8 << 10

// stackTickLead is the least time from the test's start to the sources'
// one tick: creating 2,000 PingSources took 18 s under CI's load.
const stackTickLead = 75 * time.Second

// TestDirectSendStackStaysSmall runs the real adapter (no race detector,
// which deepens every frame) against a real API server holding PingSources
// whose sink holds every call, and reads the stack memory the adapter's Go
// runtime reports before the tick and while it holds one send per source.
func TestDirectSendStackStaysSmall(t *testing.T) {
	const sources = 2000
	ns := "stack-0"
	c := newCluster(t, map[string]string{"buckets": "1"}, ns)
	sk := startSeedSink(t, 5*time.Minute)
	// One tick only, far enough away for the sources and the adapter to
	// be up before it: a slow machine's sends all reach the sink before
	// any source fires again, which would put a second send in flight.
	tick := time.Now().UTC().Add(stackTickLead).Truncate(time.Minute).Add(time.Minute)
	schedule := fmt.Sprintf("CRON_TZ=UTC %d %d * * *", tick.Minute(), tick.Hour())
	createSeedSources(t, c, seedConfig{Sources: sources, Namespaces: 1, Schedule: schedule}, []string{ns}, sk.URL+"/hold")
	_, metricsURL := startSeedAdapter(t, c, "stack-adapter")
	read := func(name string) (float64, bool) {
		m, err := scrape(metricsURL)
		if err != nil {
			return 0, false
		}
		return m.sum(name), true
	}
	var before float64
	testproc.Eventually(t, time.Minute, "the adapter's metrics", func() (ok bool) {
		before, ok = read("go_memstats_stack_inuse_bytes")
		return ok
	})
	if !time.Now().Before(tick) {
		t.Fatalf("the sources and the adapter were not up before the tick at %s: raise stackTickLead", tick.Format(time.TimeOnly))
	}
	// The adapter counts a send in flight from the tick on, before its
	// spread and before it goes out: the sink holding every call is when
	// each has been as deep as it goes.
	var lastSends float64
	var lastHeld int64
	testproc.Eventually(t, time.Until(tick)+2*time.Minute, "the sink holds one call per source, the adapter one send", func() bool {
		n, ok := read("kn_forward_mtping_inflight_sends")
		h := sk.Stats().Held
		if n != lastSends || h != lastHeld {
			t.Logf("%s: %.0f sends in flight, %d calls held by the sink", time.Now().Format(time.TimeOnly), n, h)
			lastSends, lastHeld = n, h
		}
		return ok && n == sources && h == sources
	})
	// Goroutines that ended during the tick (the sends' aside work) leave
	// their stacks cached until a collection, more of them the slower the
	// machine.
	testproc.AwaitCollections(t, metricsURL, 2, 150*time.Second)
	held, ok := read("go_memstats_stack_inuse_bytes")
	if !ok {
		t.Fatal("cannot read the adapter's metrics")
	}
	if n, _ := read("kn_forward_mtping_inflight_sends"); n != sources || sk.Stats().Held != sources {
		t.Fatalf("the sends ended before their stacks were read: %.0f in flight, %d held by the sink", n, sk.Stats().Held)
	}
	perSend := (held - before) / sources
	t.Logf("stack per held direct send: %.0f bytes (%.0f before the tick, %.0f with %d held)", perSend, before, held, sources)
	if perSend > directSendStackMax {
		t.Errorf("a held direct send costs %.0f bytes of goroutine stack, more than %d: its goroutine's stack doubled on the way to the send's deepest point", perSend, directSendStackMax)
	}
}
