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
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"knative.dev/event-forwarding-proxy/delivery"
	"knative.dev/event-forwarding-proxy/proxy/proxytest"
)

// downDestination is a destination address that refuses connections until
// up is called, then serves with a recording destination on the same port.
type downDestination struct {
	addr  string
	dials atomic.Int64 // connects attempted by the proxy
}

func newDownDestination(t *testing.T) *downDestination {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	d := &downDestination{addr: ln.Addr().String()}
	_ = ln.Close()
	return d
}

func (d *downDestination) url() string { return "http://" + d.addr + "/" }

// up starts serving on the destination's port.
func (d *downDestination) up(t *testing.T) *proxytest.Destination {
	ln, err := net.Listen("tcp", d.addr)
	if err != nil {
		t.Fatal(err)
	}
	dest := proxytest.NewDestination(t, nil)
	srv := httptest.NewUnstartedServer(dest.Config.Handler)
	srv.Listener = ln
	srv.Start()
	t.Cleanup(srv.Close)
	return dest
}

// countingTransports are the proxy's transports, counting the dials to d.
func (d *downDestination) countingTransports(t *testing.T, env map[string]string) *delivery.Transports {
	return faultTransports(t, env, func(p *delivery.TransportParams) {
		control := p.Control
		p.Control = func(network, address string, c syscall.RawConn) error {
			if address == d.addr {
				d.dials.Add(1)
			}
			return control(network, address, c)
		}
	})
}

// TestBreakerRefusesFastWhileDown: a destination that refuses connections
// gets FORWARD_BREAKER_FAILURES 502s; then calls are refused at once with
// 503 destination_busy and Retry-After, nothing dialed, and other
// destinations still flow; after the cool-down a probe finds it back and
// calls flow again.
func TestBreakerRefusesFastWhileDown(t *testing.T) {
	env := map[string]string{"FORWARD_BREAKER_FAILURES": "3", "FORWARD_BREAKER_COOLDOWN": "300ms"}
	down := newDownDestination(t)
	fp := newFaultProxy(t, env, nil, WithTransports(down.countingTransports(t, env)))
	other := proxytest.NewDestination(t, nil)
	h1, h2c := h1Client(t), h2cClient(t)
	call := func(c *http.Client, url string) (*http.Response, []byte) {
		return do(t, c, fp.newRequest(t, url, strings.NewReader("e")))
	}
	for range 3 {
		resp, body := call(h1, down.url())
		wantProxyError(t, resp, body, ReasonUnreachable)
	}
	dialed := down.dials.Load()
	for i := range 10 {
		resp, body := call([]*http.Client{h1, h2c}[i%2], down.url())
		wantProxyError(t, resp, body, ReasonDestinationBusy)
	}
	if n := down.dials.Load() - dialed; n != 0 {
		t.Errorf("%d dials while the circuit was open, want 0", n)
	}
	if resp, _ := call(h2c, other.URL); resp.StatusCode != http.StatusOK {
		t.Errorf("another destination got %d while one circuit was open", resp.StatusCode)
	}
	// After the cool-down one probe goes through, fails, and the circuit
	// opens again.
	proxytest.Eventually(t, 5*time.Second, func() bool {
		resp, _ := call(h1, down.url())
		return resp.StatusCode == http.StatusBadGateway
	}, "no probe after the cool-down")
	resp, body := call(h1, down.url())
	wantProxyError(t, resp, body, ReasonDestinationBusy)

	dest := down.up(t)
	proxytest.Eventually(t, 5*time.Second, func() bool {
		resp, _ := call(h1, down.url())
		return resp.StatusCode == http.StatusOK
	}, "calls did not flow again once the destination was back")
	for i := range 5 {
		if resp, body := call(h2c, down.url()); resp.StatusCode != http.StatusOK {
			t.Errorf("call %d after recovery got %d %q", i, resp.StatusCode, body)
		}
	}
	posts := 0
	for _, r := range dest.Requests() {
		if r.Method == http.MethodPost {
			posts++
		}
	}
	if posts != 6 {
		t.Errorf("the destination saw %d calls after recovery, want 6", posts)
	}
}

// TestBreakerRetryAfterIsTheCooldownLeft: a refusal while the circuit is
// open tells the caller to come back when a probe may go through, not in
// the one second of other refusals.
func TestBreakerRetryAfterIsTheCooldownLeft(t *testing.T) {
	env := map[string]string{"FORWARD_BREAKER_FAILURES": "1", "FORWARD_BREAKER_COOLDOWN": "30s"}
	down := newDownDestination(t)
	fp := newFaultProxy(t, env, nil, WithTransports(down.countingTransports(t, env)))
	resp, body := do(t, h1Client(t), fp.newRequest(t, down.url(), strings.NewReader("e")))
	wantProxyError(t, resp, body, ReasonUnreachable)
	resp, body = do(t, h1Client(t), fp.newRequest(t, down.url(), strings.NewReader("e")))
	wantProxyError(t, resp, body, ReasonDestinationBusy)
	// 30 s less the time since the failure, rounded up: 30, or 29 on a
	// machine slow enough to take a second between the two calls.
	if got := resp.Header.Get(delivery.HeaderRetryAfter); got != "30" && got != "29" {
		t.Errorf("Retry-After = %q, want the cool-down left (30 s)", got)
	}
}

// TestBreakerAsyncDeliversOnceBack: an async event to a destination that
// is down keeps being retried (refused fast while the circuit is open) and
// is delivered exactly once when the destination comes back; an event
// whose retries run out while it is down is logged as failed.
func TestBreakerAsyncDeliversOnceBack(t *testing.T) {
	env := map[string]string{
		"FORWARD_BREAKER_FAILURES": "2", "FORWARD_BREAKER_COOLDOWN": "100ms",
		"FORWARD_ASYNC_MAX_RETRY": "400", "FORWARD_ASYNC_BACKOFF_DELAY": "10ms", "FORWARD_ASYNC_BACKOFF_MAX": "20ms",
	}
	down := newDownDestination(t)
	core, logs := observer.New(zapcore.ErrorLevel)
	fp := newFaultProxy(t, env, zap.New(core).Sugar(), WithTransports(down.countingTransports(t, env)))
	send := func(id, retries string) {
		req := fp.newRequest(t, down.url(), strings.NewReader("e"))
		req.Header.Set(delivery.HeaderPrefer, delivery.PreferRespondAsync)
		req.Header.Set(delivery.HeaderForwardRetry, retries)
		req.Header.Set("Ce-Id", id)
		if resp, body := do(t, h1Client(t), req); resp.StatusCode != http.StatusAccepted {
			t.Fatalf("status %d %q, want 202", resp.StatusCode, body)
		}
	}
	send("gives-up", "3")
	proxytest.Eventually(t, 5*time.Second, func() bool { return len(logs.FilterMessage("Async delivery failed").All()) == 1 },
		"the event whose retries ran out was not logged")
	if f := logs.All()[0].ContextMap(); f["ceId"] != "gives-up" || f["attempts"] != int64(4) {
		t.Errorf("failure logged with %v, want ceId gives-up after 4 attempts", f)
	}
	send("waits", "400")
	proxytest.Eventually(t, 5*time.Second, func() bool { return down.dials.Load() >= 4 }, "the async retries did not go on")
	dest := down.up(t)
	proxytest.Eventually(t, 10*time.Second, func() bool { return dest.Count() == 1 }, "the event was not delivered once the destination was back")
	proxytest.Eventually(t, 5*time.Second, func() bool { return fp.Limiter.Inflight() == 0 }, "the delivery did not end")
	if got := dest.Next(t).Header.Get("Ce-Id"); got != "waits" || dest.Count() != 1 {
		t.Errorf("the destination got %q (%d requests), want the event once", got, dest.Count())
	}
}
