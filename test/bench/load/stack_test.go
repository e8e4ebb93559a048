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

package load

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"knative.dev/event-forwarding-proxy/config"
	"knative.dev/event-forwarding-proxy/delivery"
	"knative.dev/event-forwarding-proxy/test/bench/sink"
	"knative.dev/event-forwarding-proxy/test/testproc"
)

// heldStackMax is the most goroutine stack a held synchronous h2c call may
// cost the proxy: none is its own. The inbound HTTP/2 server
// (proxy/internal/h2server) lets the stream's handler detach, and the
// chain's goroutine ends once the call is out (the forwarder's suspend):
// the call waits as records only. The stacks are read after two garbage
// collections, which free those of the goroutines that ended; the limit
// leaves room for the few the runtime keeps cached, and fails when a held
// call keeps a goroutine again, whose stack is 2 KiB at the least: with
// x/net/http2's server a call cost 2.5-2.9 KB (a waiting goroutine per
// stream), 4.2 KB when the chain ran on it.
const heldStackMax = 1024

// TestHeldH2CCallStackStaysSmall holds calls through the real proxy binary
// (no race detector, which deepens every frame), built and configured as
// the bench runs it, and reads the stack memory the Go runtime reports on
// the metrics port before and while they are held.
func TestHeldH2CCallStackStaysSmall(t *testing.T) {
	perCall := heldStackPerCall(t, "h2c")
	if perCall > heldStackMax {
		t.Errorf("a held h2c call costs %d bytes of goroutine stack, more than %d: its goroutine's stack grew", perCall, heldStackMax)
	}
}

// heldMixedStackMax is the most goroutine stack a held synchronous call
// from an HTTP/2 caller to an HTTP/1.1 destination may cost. It waits on
// a goroutine of its own that the chain never deepened
// (forwarder.handOff), which dials on yet another one
// (http1.Transport.dialAside): its stack stays at 4 KiB. Waiting on the
// chain's goroutine, such a call cost 10.9 KB at 2,000 calls; dialing on
// its own, 8.4 KB.
const heldMixedStackMax = 6 << 10

// TestHeldMixedCallStackStaysSmall holds calls from an h2c caller to an
// HTTP/1.1 destination through the real proxy binary, as
// TestHeldH2CCallStackStaysSmall does.
func TestHeldMixedCallStackStaysSmall(t *testing.T) {
	perCall := heldStackPerCall(t, "http1")
	if perCall > heldMixedStackMax {
		t.Errorf("a held call from an h2c caller to an HTTP/1.1 destination costs %d bytes of goroutine stack, more than %d", perCall, heldMixedStackMax)
	}
}

// heldStackPerCall holds 2,000 synchronous calls from an h2c caller
// through the real proxy binary, to a sink it reaches with protocol
// (FORWARD_DESTINATION_PROTOCOL), and returns the goroutine stack memory
// each costs.
func heldStackPerCall(t *testing.T, protocol string) int64 {
	t.Helper()
	const n = 2000
	s, sinkURL := serveSink(t)
	p := testproc.StartProxy(t, proxyBin, testproc.FreePort(t), testproc.FreePort(t),
		"GODEBUG="+config.ProxyGODEBUG, "FORWARD_DESTINATION_PROTOCOL="+protocol, "FORWARD_LOG_LEVEL=warn")
	client := testproc.H2CClient(t, 5*time.Minute)
	before := stackInuse(t, p.MetricsURL)

	// Not the test's context, which ends before the clean-up releases the
	// calls.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.URL, strings.NewReader(`{"specversion":"1.0","id":"`+strconv.Itoa(i)+`"}`))
			if err != nil {
				errs <- err
				return
			}
			req.Header.Set(delivery.HeaderForwardTo, sinkURL+sink.PathHold)
			req.Header.Set("Ce-Id", strconv.Itoa(i))
			req.Header.Set("Content-Type", "application/json")
			resp, err := client.Do(req)
			if err != nil {
				errs <- err
				return
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				errs <- fmt.Errorf("status %d", resp.StatusCode)
			}
		})
	}
	defer func() {
		s.Release()
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Errorf("held call: %v", err)
		}
	}()
	testproc.Eventually(t, time.Minute, "the sink holds every call", func() bool { return s.Stats().Held == n })
	testproc.AwaitCollections(t, p.MetricsURL, 2, 150*time.Second)
	held := stackInuse(t, p.MetricsURL)
	if h := s.Stats().Held; h != n {
		t.Fatalf("the sink holds %d calls, not %d, when the stacks are read", h, n)
	}
	perCall := (held - before) / n
	t.Logf("stack per held call to an %s destination: %d bytes (%d before, %d with %d held)", protocol, perCall, before, held, n)
	return perCall
}

// serveSink runs a bench sink on a loopback port until the test ends.
func serveSink(t *testing.T) (*sink.Sink, string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := sink.New(sink.Params{Hold: 5 * time.Minute}) // past the test's waits: the clean-up releases the calls
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- sink.Serve(ctx, ln, s) }()
	t.Cleanup(func() {
		s.Release()
		cancel()
		if err := <-done; err != nil {
			t.Errorf("sink: %v", err)
		}
	})
	return s, "http://" + ln.Addr().String()
}

// stackInuse reads go_memstats_stack_inuse_bytes from a metrics page.
func stackInuse(t *testing.T, metricsURL string) int64 {
	t.Helper()
	fams, err := testproc.Scrape(metricsURL)
	if err != nil {
		t.Fatal(err)
	}
	const name = "go_memstats_stack_inuse_bytes"
	if fams[name] == nil {
		t.Fatalf("no %s on %s", name, metricsURL)
	}
	return int64(testproc.Value(fams, name, nil))
}
