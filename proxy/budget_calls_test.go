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
	"io"
	"net/http"
	"strconv"
	"testing"
	"time"

	"knative.dev/event-forwarding-proxy/delivery"
	"knative.dev/event-forwarding-proxy/proxy/proxytest"
)

// budgetEnv makes the smallest budget the configuration allows small
// enough to fill with two events: FORWARD_MAX_EVENT_BYTES plus
// FORWARD_MAX_HEADER_BYTES, 69632 bytes.
var budgetEnv = map[string]string{
	"FORWARD_MAX_EVENT_BYTES":  "65536",
	"FORWARD_MAX_HEADER_BYTES": "4096",
}

// withBudget is budgetEnv with FORWARD_MEMORY_BUDGET_BYTES set to n.
func withBudget(n int64) map[string]string {
	return map[string]string{
		"FORWARD_MAX_EVENT_BYTES":     budgetEnv["FORWARD_MAX_EVENT_BYTES"],
		"FORWARD_MAX_HEADER_BYTES":    budgetEnv["FORWARD_MAX_HEADER_BYTES"],
		"FORWARD_MEMORY_BUDGET_BYTES": strconv.FormatInt(n, 10),
	}
}

// clients are the two protocols a caller speaks to the proxy.
var clients = []struct {
	name string
	new  func(testing.TB) *http.Client
}{
	{"http1", h1Client},
	{"h2c", h2cClient},
}

// asyncEvent is an async call of a body of n bytes to dest; every call of
// the same n has headers of the same size.
func asyncEvent(t testing.TB, tp *testProxy, dest string, n int) *http.Request {
	req := tp.newRequest(t, dest, bytes.NewReader(bytes.Repeat([]byte("e"), n)))
	req.Header.Set(delivery.HeaderPrefer, delivery.PreferRespondAsync)
	req.Header.Set("Ce-Id", "0001")
	return req
}

// budgetBackToZero waits until tp holds no call and no byte of its budget.
func budgetBackToZero(t testing.TB, tp *testProxy) {
	t.Helper()
	proxytest.Eventually(t, 5*time.Second, func() bool { return tp.Limiter.Inflight() == 0 && tp.Budget.Reserved() == 0 },
		"the memory budget was not given back")
}

// TestMemoryBudgetEdge: async events held by a destination that does not
// answer fill the budget with their headers and bodies; an event that
// fits in what is left exactly is accepted, one a byte larger than what is
// left is refused 503 overloaded with Retry-After, before its body is
// read: it never reaches the destination.
func TestMemoryBudgetEdge(t *testing.T) {
	const body = 40000
	for _, cl := range clients {
		for _, tt := range []struct {
			name string
			less int64 // the budget is two events' reservations less this
			fits bool  // whether the second event fits
		}{
			{name: "the second event fits exactly", less: 0, fits: true},
			{name: "the second event is a byte too large", less: 1, fits: false},
		} {
			t.Run(cl.name+"/"+tt.name, func(t *testing.T) {
				hold := proxytest.NewHold(t)
				dest := proxytest.NewH2CDestination(t, hold.Reply)
				client := cl.new(t)

				// What one such event reserves: its headers and its body.
				probe := newTestProxy(t, budgetEnv)
				resp, _ := do(t, client, asyncEvent(t, probe, dest.URL, body))
				if resp.StatusCode != http.StatusAccepted {
					t.Fatalf("probe event: %d, want 202", resp.StatusCode)
				}
				one := probe.Budget.Reserved()
				if one <= body || one > body+1024 {
					t.Fatalf("an event of %d bytes reserves %d bytes, want its body and headers", body, one)
				}
				dest.Next(t)

				budget := 2*one - tt.less
				tp := newTestProxy(t, withBudget(budget))
				resp, _ = do(t, client, asyncEvent(t, tp, dest.URL, body))
				if resp.StatusCode != http.StatusAccepted {
					t.Fatalf("first event: %d, want 202", resp.StatusCode)
				}
				dest.Next(t)
				resp, b := do(t, client, asyncEvent(t, tp, dest.URL, body))
				if tt.fits {
					if resp.StatusCode != http.StatusAccepted {
						t.Fatalf("second event: %d %q, want 202", resp.StatusCode, b)
					}
					if got := tp.Budget.Reserved(); got != budget {
						t.Errorf("Reserved() = %d, want the whole budget %d", got, budget)
					}
					dest.Next(t)
					return
				}
				wantProxyError(t, resp, b, ReasonOverloaded)
				if got := tp.Budget.Reserved(); got != one {
					t.Errorf("Reserved() = %d after the refusal, want the first event's %d", got, one)
				}
				if tp.Limiter.Inflight() != 1 {
					t.Errorf("%d calls held, want only the first event", tp.Limiter.Inflight())
				}
				if n := dest.Count(); n != 2 {
					t.Errorf("the destination got %d requests, want the probe's and the first event", n)
				}
			})
		}
	}
}

// TestSyncCallReservesHeadersOnly: a synchronous call streams its body,
// so the budget holds its headers, not its body.
func TestSyncCallReservesHeadersOnly(t *testing.T) {
	const body = 60000
	for _, cl := range clients {
		t.Run(cl.name, func(t *testing.T) {
			hold := proxytest.NewHold(t)
			dest := proxytest.NewH2CDestination(t, hold.Reply)
			tp := newTestProxy(t, withBudget(70000))
			res := goDo(cl.new(t), tp.newRequest(t, dest.URL, bytes.NewReader(make([]byte, body))))
			dest.Next(t)
			if got := tp.Budget.Reserved(); got <= 0 || got >= body {
				t.Errorf("a held sync call with a %d-byte body reserves %d bytes, want its headers only", body, got)
			}
			hold.Release()
			if r := await(t, res); r.err != nil || r.resp.StatusCode != http.StatusOK {
				t.Fatalf("call ended with %v %v", r.err, r.resp)
			}
			budgetBackToZero(t, tp)
		})
	}
}

// chunked hides a body's length, so that the client sends it chunked
// (HTTP/1.1) or without content-length (h2c).
type chunked struct{ io.Reader }

// TestChunkedAsyncBodyRefusedWhenTheBudgetIsFull: an async body of
// unknown length reserves as it is read; when the budget has no room for
// the rest, the call is refused 503 overloaded at once, nothing reaches
// the destination, and what it had reserved goes back. The same body
// alone fits.
func TestChunkedAsyncBodyRefusedWhenTheBudgetIsFull(t *testing.T) {
	const minBudget = 65536 + 4096
	for _, cl := range clients {
		t.Run(cl.name, func(t *testing.T) {
			hold := proxytest.NewHold(t)
			dest := proxytest.NewH2CDestination(t, hold.Reply)
			client := cl.new(t)
			chunkedEvent := func(tp *testProxy) *http.Request {
				req := asyncEvent(t, tp, dest.URL, 0)
				req.Body = io.NopCloser(chunked{bytes.NewReader(bytes.Repeat([]byte("c"), 60000))})
				req.ContentLength = -1
				return req
			}

			tp := newTestProxy(t, withBudget(minBudget))
			resp, _ := do(t, client, asyncEvent(t, tp, dest.URL, 40000))
			if resp.StatusCode != http.StatusAccepted {
				t.Fatalf("first event: %d, want 202", resp.StatusCode)
			}
			dest.Next(t)
			first := tp.Budget.Reserved()
			resp, b := do(t, client, chunkedEvent(tp))
			wantProxyError(t, resp, b, ReasonOverloaded)
			if got := tp.Budget.Reserved(); got != first {
				t.Errorf("Reserved() = %d after the refusal, want the first event's %d", got, first)
			}
			if tp.Limiter.Inflight() != 1 {
				t.Errorf("%d calls held after the refusal, want 1", tp.Limiter.Inflight())
			}

			alone := newTestProxy(t, withBudget(minBudget))
			resp, b = do(t, client, chunkedEvent(alone))
			if resp.StatusCode != http.StatusAccepted {
				t.Fatalf("the chunked event alone: %d %q, want 202", resp.StatusCode, b)
			}
			got := dest.Next(t)
			if len(got.Body) != 60000 {
				t.Errorf("the destination got %d bytes of the chunked event, want 60000", len(got.Body))
			}
			if n := dest.Count(); n != 2 {
				t.Errorf("the destination got %d requests, want the first event and the chunked one alone", n)
			}
		})
	}
}

// TestMemoryBudgetReleasedOnEveryPath: however a call ends, its bytes of
// the budget go back with its slot.
func TestMemoryBudgetReleasedOnEveryPath(t *testing.T) {
	ok := func(w http.ResponseWriter, _ *http.Request, _ int) { _, _ = io.WriteString(w, "ok") }
	fail := func(w http.ResponseWriter, _ *http.Request, _ int) { w.WriteHeader(http.StatusInternalServerError) }
	tests := []struct {
		name string
		// run makes one call through tp and returns once the caller has
		// its answer (or has gone); the call may still be ending.
		run func(t *testing.T, tp *faultProxy, client *http.Client, clientName string)
	}{
		{name: "sync call answered", run: func(t *testing.T, tp *faultProxy, client *http.Client, _ string) {
			dest := proxytest.NewH2CDestination(t, ok)
			resp, _ := do(t, client, tp.newRequest(t, dest.URL, bytes.NewReader([]byte("event"))))
			if resp.StatusCode != http.StatusOK {
				t.Errorf("status %d, want 200", resp.StatusCode)
			}
		}},
		{name: "async event delivered", run: func(t *testing.T, tp *faultProxy, client *http.Client, _ string) {
			dest := proxytest.NewH2CDestination(t, ok)
			resp, _ := do(t, client, asyncEvent(t, tp.testProxy, dest.URL, 500))
			if resp.StatusCode != http.StatusAccepted {
				t.Errorf("status %d, want 202", resp.StatusCode)
			}
			dest.Next(t)
		}},
		{name: "sync call to an unreachable destination", run: func(t *testing.T, tp *faultProxy, client *http.Client, _ string) {
			resp, b := do(t, client, tp.newRequest(t, "http://"+proxytest.NewRefusingAddr(t)+"/", bytes.NewReader([]byte("event"))))
			wantProxyError(t, resp, b, ReasonUnreachable)
		}},
		{name: "async event failed after its retries", run: func(t *testing.T, tp *faultProxy, client *http.Client, _ string) {
			dest := proxytest.NewH2CDestination(t, fail)
			resp, _ := do(t, client, asyncEvent(t, tp.testProxy, dest.URL, 500))
			if resp.StatusCode != http.StatusAccepted {
				t.Errorf("status %d, want 202", resp.StatusCode)
			}
			proxytest.Eventually(t, 5*time.Second, func() bool { return dest.Count() == 3 }, "the event was not tried 3 times")
		}},
		{name: "sync caller gone while the destination holds the call", run: func(t *testing.T, tp *faultProxy, client *http.Client, _ string) {
			hold := proxytest.NewHold(t)
			dest := proxytest.NewH2CDestination(t, hold.Reply)
			ctx, cancel := context.WithCancel(t.Context())
			res := goDo(client, tp.newRequest(t, dest.URL, bytes.NewReader([]byte("event"))).WithContext(ctx))
			dest.Next(t)
			cancel()
			if r := await(t, res); r.err == nil {
				t.Errorf("the cancelled call returned %d", r.resp.StatusCode)
			}
			hold.WaitCancelled(t)
		}},
		{name: "async caller gone mid-body", run: func(t *testing.T, tp *faultProxy, _ *http.Client, clientName string) {
			dest := proxytest.NewH2CDestination(t, ok)
			gone := goneCaller(t, tp, dest.URL, clientName, true, true)
			proxytest.Eventually(t, 5*time.Second, func() bool { return tp.Limiter.Inflight() == 1 }, "the call was not admitted")
			gone()
		}},
		{name: "answer broken off mid-stream (the forwarder's abort panic)", run: func(t *testing.T, tp *faultProxy, client *http.Client, _ string) {
			dest := proxytest.NewH2CDestination(t, abortAfter(true))
			r := await(t, goDo(client, tp.newRequest(t, dest.URL, bytes.NewReader([]byte("event")))))
			if r.err == nil && r.resp.StatusCode == http.StatusOK && len(r.body) == 65536 {
				t.Error("a broken answer came through whole")
			}
		}},
		{name: "chunked async body too large", run: func(t *testing.T, tp *faultProxy, client *http.Client, _ string) {
			dest := proxytest.NewH2CDestination(t, ok)
			req := asyncEvent(t, tp.testProxy, dest.URL, 0)
			req.Body = io.NopCloser(chunked{bytes.NewReader(make([]byte, 70000))})
			req.ContentLength = -1
			resp, b := do(t, client, req)
			wantProxyError(t, resp, b, ReasonBodyTooLarge)
		}},
		{name: "async event abandoned at shutdown", run: func(t *testing.T, tp *faultProxy, client *http.Client, _ string) {
			hold := proxytest.NewHold(t)
			dest := proxytest.NewH2CDestination(t, hold.Reply)
			resp, _ := do(t, client, asyncEvent(t, tp.testProxy, dest.URL, 500))
			if resp.StatusCode != http.StatusAccepted {
				t.Errorf("status %d, want 202", resp.StatusCode)
			}
			dest.Next(t)
			if tp.Budget.Reserved() == 0 {
				t.Error("a held async event reserves nothing")
			}
			ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
			defer cancel()
			tp.Drain()
			if err := tp.Shutdown(ctx); err == nil {
				t.Error("Shutdown returned nil with an event held")
			}
		}},
	}
	for _, tt := range tests {
		for _, cl := range clients {
			t.Run(tt.name+"/"+cl.name, func(t *testing.T) {
				tp := newFaultProxy(t, withBudget(1<<20), nil)
				tt.run(t, tp, cl.new(t), cl.name)
				budgetBackToZero(t, tp.testProxy)
			})
		}
	}
}
