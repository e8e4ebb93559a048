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

package proxy

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"

	"knative.dev/event-forwarding-proxy/proxy/proxytest"
)

// goroutinesIn counts the goroutines whose stack names any of funcs.
func goroutinesIn(funcs ...string) map[string]int {
	buf := make([]byte, 8<<20)
	buf = buf[:runtime.Stack(buf, true)]
	n := map[string]int{}
	for g := range bytes.SplitSeq(buf, []byte("\n\n")) {
		for _, f := range funcs {
			if bytes.Contains(g, []byte(f)) {
				n[f]++
			}
		}
	}
	return n
}

// newHeldTestProxy is a test proxy whose admission limits leave room for
// the held calls of these tests, with env on top.
func newHeldTestProxy(t *testing.T, env map[string]string, opts ...Option) *testProxy {
	all := map[string]string{
		"FORWARD_MAX_INFLIGHT": "100", "FORWARD_MAX_INFLIGHT_PER_DESTINATION": "100", "FORWARD_MAX_INFLIGHT_PER_TENANT": "100",
	}
	maps.Copy(all, env)
	return newTestProxyLogger(t, all, zap.NewNop().Sugar(), opts...)
}

// startHeld starts calls synchronous calls to dest's /held through a new
// test proxy (env on top of newHeldTestProxy's), from a caller speaking
// h2c, so that every goroutine of net/http's HTTP/1.1 transport in the
// process would be the proxy's.
func startHeld(t *testing.T, env map[string]string, dest string, calls int, opts ...Option) []<-chan result {
	tp := newHeldTestProxy(t, env, opts...)
	client := h2cClient(t)
	results := make([]<-chan result, calls)
	for i := range calls {
		results[i] = goDo(client, tp.newRequest(t, dest+"/held", strings.NewReader("event")))
	}
	return results
}

// releaseHeld lets hold answer and checks that every call got its 200.
func releaseHeld(t *testing.T, hold *proxytest.Hold, results []<-chan result) {
	hold.Release()
	for i, ch := range results {
		r := await(t, ch)
		if r.err != nil || r.resp.StatusCode != http.StatusOK {
			t.Errorf("call %d: %v %v", i, r.err, r.resp)
		}
	}
}

// TestHeldHTTP1CallsHaveNoConnectionGoroutines pins what a held call to a
// plain-http HTTP/1.1 destination costs in goroutines: it waits in
// delivery/http1, for the socket to become readable, on a goroutine of its
// own (forwarding.wait; the stream's handler handed the call off and
// ended), and the proxy runs no goroutine per outbound connection
// (net/http's transport ran two: persistConn's readLoop and writeLoop).
// The callers come over h2c, so that every persistConn goroutine in the
// process would be the proxy's.
func TestHeldHTTP1CallsHaveNoConnectionGoroutines(t *testing.T) {
	const calls = 50
	hold := proxytest.NewHold(t)
	dest := proxytest.NewDestination(t, hold.Reply) // HTTP/1.1 only
	results := startHeld(t, nil, dest.URL, calls)
	const (
		waiting   = "delivery/http1.(*conn).await"
		holding   = "proxy.(*forwarding).wait"
		handler   = "h2server.(*conn).runHandler"
		readLoop  = "net/http.(*persistConn).readLoop"
		writeLoop = "net/http.(*persistConn).writeLoop"
	)
	proxytest.Eventually(t, 10*time.Second, func() bool {
		got := goroutinesIn(waiting, handler)
		return got[waiting] == calls && got[handler] == 0
	}, fmt.Sprintf("%d calls held, each waiting in delivery/http1, no handler left", calls))
	got := goroutinesIn(holding, readLoop, writeLoop)
	if got[holding] != calls {
		t.Errorf("%d calls held on %d handed-off goroutines, want one each", calls, got[holding])
	}
	if got[readLoop]+got[writeLoop] != 0 {
		t.Errorf("%d calls held with %d readLoop and %d writeLoop goroutines, want none", calls, got[readLoop], got[writeLoop])
	}
	releaseHeld(t, hold, results)
}

// TestHeldH2CCallsHaveNoGoroutine pins what a held synchronous call from
// an HTTP/2 caller to an h2c destination costs in goroutines: none. The
// stream's handler ended once the forwarder had the call out (suspend),
// the inbound server runs one goroutine per connection (its reader), and
// delivery/h2c one reader per connection (net/http's HTTP/2 client ran a
// goroutine per request; the test's own callers use it, so its goroutines
// cannot be counted here). Tracing each call changes none of it.
func TestHeldH2CCallsHaveNoGoroutine(t *testing.T) {
	t.Run("untraced", func(t *testing.T) { testHeldH2CGoroutines(t) })
	t.Run("traced", func(t *testing.T) {
		spans := tracetest.NewSpanRecorder()
		tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
		t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
		testHeldH2CGoroutines(t, WithTracerProvider(tp))
		clients := 0
		for _, s := range spans.Ended() {
			if s.SpanKind() == trace.SpanKindClient {
				clients++
			}
		}
		if clients != heldCalls {
			t.Errorf("%d client spans ended for %d calls", clients, heldCalls)
		}
	})
}

// heldCalls is how many calls testHeldH2CGoroutines holds.
const heldCalls = 50

func testHeldH2CGoroutines(t *testing.T, opts ...Option) {
	const calls = heldCalls
	hold := proxytest.NewHold(t)
	dest, conns := proxytest.NewCountedDestination(t, true, hold.Reply)
	results := startHeld(t, h2cLoopback, dest.URL, calls, opts...)
	const (
		destHeld = "proxytest.(*Hold).Reply"
		handler  = "h2server.(*conn).runHandler"
		inReader = "h2server.(*conn).serve"
		inbound  = "proxy/internal/h2server."
		reader   = "delivery/h2c.(*conn).readLoop"
		anyH2C   = "event-forwarding-proxy/delivery/h2c."
	)
	proxytest.Eventually(t, 10*time.Second, func() bool {
		got := goroutinesIn(destHeld, inbound, inReader)
		return got[destHeld] == calls && got[inbound] == got[inReader]
	}, fmt.Sprintf("%d calls held by the destination, with no goroutine left in the inbound server but its readers", calls))
	got := goroutinesIn(inReader, reader, anyH2C)
	if got[inReader] != 1 {
		t.Errorf("%d inbound connection readers for the one caller connection", got[inReader])
	}
	// Every reader serves one of the destination's open connections.
	if open := int(conns.Open()); got[reader] < 1 || got[reader] > open {
		t.Errorf("%d reader goroutines for %d open connections", got[reader], open)
	}
	if extra := got[anyH2C] - got[reader]; extra != 0 {
		t.Errorf("%d goroutines in delivery/h2c besides the %d readers", extra, got[reader])
	}
	releaseHeld(t, hold, results)
}

// TestHeldAsyncH2CCallsHaveNoGoroutines: an async event whose h2c
// destination holds it owns no goroutine in the proxy once its caller has
// the 202: no delivery goroutine, no client goroutine per stream; the
// h2c transport's one reader per connection is all.
func TestHeldAsyncH2CCallsHaveNoGoroutines(t *testing.T) {
	const events = 50
	hold := proxytest.NewHold(t)
	dest, _ := proxytest.NewCountedDestination(t, true, hold.Reply)
	tp := newHeldTestProxy(t, h2cLoopback)
	client := h2cClient(t)
	for i := range events {
		req := tp.newRequest(t, dest.URL+"/held", strings.NewReader("event"))
		req.Header.Set("Prefer", "respond-async")
		if r := await(t, goDo(client, req)); r.err != nil || r.resp.StatusCode != http.StatusAccepted {
			t.Fatalf("event %d: %v %v, want 202", i, r.err, r.resp)
		}
	}
	const (
		held     = "proxytest.(*Hold).Reply"
		async    = "event-forwarding-proxy/proxy.(*Async)"
		starter  = "event-forwarding-proxy/delivery.Start"
		reader   = "delivery/h2c.(*conn).readLoop"
		anyH2C   = "event-forwarding-proxy/delivery/h2c."
		waitings = "delivery/h2c.(*conn).roundTrip"
	)
	proxytest.Eventually(t, 10*time.Second, func() bool {
		got := goroutinesIn(held, async, starter)
		return got[held] == events && got[async]+got[starter] == 0
	}, fmt.Sprintf("%d events held by the destination, none with a goroutine of its own in the proxy", events))
	got := goroutinesIn(reader, anyH2C, waitings)
	if got[waitings] != 0 || got[anyH2C] != got[reader] {
		t.Errorf("%d goroutines in delivery/h2c (%d waiting in roundTrip), want only the %d readers", got[anyH2C], got[waitings], got[reader])
	}
	hold.Release()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := tp.async.Wait(ctx); err != nil {
		t.Fatalf("the async deliveries did not end after the destination answered: %v", err)
	}
	if n := dest.Count(); n != events {
		t.Errorf("the destination got %d events, want %d", n, events)
	}
}
