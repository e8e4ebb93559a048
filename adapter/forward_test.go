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

package adapter

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.uber.org/goleak"

	"knative.dev/event-forwarding-proxy/config"
	"knative.dev/event-forwarding-proxy/delivery"
)

// clientRT stands for the client's own round tripper, Forward's direct:
// it records each request with its body and answers code (200 if zero), or
// fails with err. Forward calls it on the caller's goroutine: no lock.
type clientRT struct {
	code   int
	err    error
	reqs   []*http.Request
	bodies [][]byte
}

func (c *clientRT) RoundTrip(r *http.Request) (*http.Response, error) {
	b, _ := io.ReadAll(r.Body)
	_ = r.Body.Close()
	c.reqs, c.bodies = append(c.reqs, r), append(c.bodies, b)
	if c.err != nil {
		return nil, c.err
	}
	return &http.Response{StatusCode: max(c.code, 200), Header: http.Header{}, Body: http.NoBody, Request: r}, nil
}

// clientBody is n bytes of every value, which no text handling would keep.
func clientBody(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i * 7)
	}
	return b
}

// clientHeader is what a CloudEvents client sends its sink: the event in
// binary mode, the sink's token, the source's namespace.
func clientHeader() http.Header {
	return http.Header{"Ce-Id": {"e1"}, "Ce-Source": {"/s"}, "Ce-Type": {"t"}, "Ce-Specversion": {"1.0"},
		"Content-Type": {"application/octet-stream"}, "Authorization": {"Bearer sink-token"}, delivery.HeaderNamespace: {"tenant"}}
}

// clientRequest is a client's POST of body to sink. The body hides its
// type so that it streams, without GetBody, as an SDK's may.
func clientRequest(t *testing.T, sink string, body []byte) *http.Request {
	t.Helper()
	req, err := http.NewRequestWithContext(ctxFor(t, 10*time.Second), http.MethodPost, sink, io.NopCloser(bytes.NewReader(body)))
	if err != nil {
		t.Fatal(err)
	}
	req.Header = clientHeader()
	return req
}

// forward runs Forward, then reads its answer to the end and closes it, as
// a client does.
func forward(t *testing.T, s *Sender, req *http.Request, direct http.RoundTripper, o ForwardOptions) (*http.Response, []byte) {
	t.Helper()
	resp, err := s.Forward(req, direct, o)
	if err != nil {
		t.Fatalf("Forward: %v", err)
	}
	b, err := io.ReadAll(resp.Body)
	if cerr := resp.Body.Close(); err != nil || cerr != nil {
		t.Fatalf("reading the answer: %v; closing it: %v", err, cerr)
	}
	return resp, b
}

// checkDirect checks that direct got the client's request once, whole,
// with none of the contract's headers: they are for the proxy only.
func checkDirect(t *testing.T, direct *clientRT, body []byte) {
	t.Helper()
	if len(direct.reqs) != 1 {
		t.Fatalf("direct got %d requests, want 1", len(direct.reqs))
	}
	if !bytes.Equal(direct.bodies[0], body) {
		t.Errorf("direct got a body of %d bytes, not the client's %d", len(direct.bodies[0]), len(body))
	}
	if d := cmp.Diff(clientHeader(), direct.reqs[0].Header); d != "" {
		t.Errorf("direct's headers (-want +got):\n%s", d)
	}
}

// checkFallback checks the fallbacks counted: one for reason, or none.
func checkFallback(t *testing.T, r *sdkmetric.ManualReader, reason string) {
	t.Helper()
	want := map[string]int64{}
	if reason != "" {
		want[reason] = 1
	}
	if d := cmp.Diff(want, counterByLabel(t, r, "kn_forward_sender_fallbacks", "reason")); d != "" {
		t.Errorf("fallbacks (-want +got):\n%s", d)
	}
}

// TestForwardRoute: where Forward sends a request, by the Router, the
// sink's scheme and the body's size.
func TestForwardRoute(t *testing.T) {
	tests := []struct {
		name      string
		threshold int // of the proxy's configuration; -1 for none
		url       string
		size      int
		https     bool
		viaProxy  bool
		fallback  string // the reason counted, if any
	}{
		{name: "no forwarding", threshold: -1, url: "http://sink.example/p", size: 300},
		{name: "below the threshold", threshold: 10, url: "http://sink.example/p", size: 300},
		{name: "forwarding", url: "http://sink.example/p?q=1", size: 300, viaProxy: true},
		// The proxy may not trust the CA of an https sink.
		{name: "https sink", url: "https://sink.invalid/p", size: 300},
		{name: "https sink with HTTPS", url: "https://sink.invalid/p", size: 300, https: true, viaProxy: true},
		{name: "body over MaxForwardBytes", url: "http://sink.example/p", size: 5000, fallback: "refused"},
		{name: "body one byte over", url: "http://sink.example/p", size: 1025, fallback: "refused"},
		{name: "body of MaxForwardBytes", url: "http://sink.example/p", size: 1024, viaProxy: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			proxy := newServer(t, statuses([]int{202}, nil))
			reader, mp := newTestMeterProvider()
			s := testSender(SenderParams{MeterProvider: mp, MaxForwardBytes: 1024}, newFakeClock())
			if tc.threshold >= 0 {
				s.SetForwarding(config.Forwarding{ProxyURL: proxy.url(t), Threshold: tc.threshold})
			}
			direct := &clientRT{}
			body := clientBody(tc.size)
			req := clientRequest(t, tc.url, body)
			resp, _ := forward(t, s, req, direct, ForwardOptions{HTTPS: tc.https})
			switch {
			case tc.viaProxy && (resp.StatusCode != http.StatusAccepted || proxy.count() != 1 || len(direct.reqs) != 0):
				t.Fatalf("status %d, proxy %d, direct %d; want the proxy's 202 only", resp.StatusCode, proxy.count(), len(direct.reqs))
			case tc.viaProxy:
				r := proxy.requests()[0]
				if r.Header.Get(delivery.HeaderForwardTo) != tc.url || !bytes.Equal(r.Body, body) {
					t.Errorf("the proxy got Kn-Forward-To %q, %d bytes; want %q, %d", r.Header.Get(delivery.HeaderForwardTo), len(r.Body), tc.url, len(body))
				}
			default:
				if resp.StatusCode != http.StatusOK || proxy.count() != 0 {
					t.Errorf("status %d, proxy %d; want direct's 200 only", resp.StatusCode, proxy.count())
				}
				checkDirect(t, direct, body) // an oversized body whole: what was read to measure it too
				if tc.fallback == "" && direct.reqs[0] != req {
					t.Error("direct got a copy: the client's request must pass as it is")
				}
			}
			checkFallback(t, reader, tc.fallback)
		})
	}
}

func TestForwardAsyncThroughProxy(t *testing.T) {
	proxy := newServer(t, statuses([]int{202}, nil))
	s := testSender(SenderParams{}, newFakeClock())
	s.SetForwarding(forwardingTo(t, proxy))
	const sink = "http://sink.tenant.svc/path?q=1"
	body := clientBody(3000)
	req := clientRequest(t, sink, body)
	// A client's own would let it pick the proxy's target or identity.
	req.Header.Set(delivery.HeaderForwardTo, "http://elsewhere/")
	req.Header.Set(delivery.HeaderForwardAuthorization, "Bearer client")
	req.Header.Set(delivery.HeaderForwardBackoffPolicy, "linear")
	req.Header.Set(delivery.HeaderForwardRetryAfterMax, "PT1H")
	direct := &clientRT{}
	if resp, _ := forward(t, s, req, direct, ForwardOptions{}); resp.StatusCode != http.StatusAccepted || len(direct.reqs) != 0 || proxy.count() != 1 {
		t.Fatalf("status %d, direct %d, proxy %d; want the proxy's 202 only", resp.StatusCode, len(direct.reqs), proxy.count())
	}
	r := proxy.requests()[0]
	want := map[string][]string{
		delivery.HeaderForwardTo: {sink}, delivery.HeaderPrefer: {delivery.PreferRespondAsync},
		delivery.HeaderForwardTimeout: {"PT10M"}, delivery.HeaderForwardRetry: {"5"},
		delivery.HeaderForwardBackoffDelay: {"PT0.05S"}, delivery.HeaderForwardAuthorization: nil,
		delivery.HeaderForwardBackoffPolicy: nil, delivery.HeaderForwardRetryAfterMax: {"PT30S"},
	}
	for k, v := range clientHeader() {
		want[k] = v
	}
	got := map[string][]string{}
	for k := range want {
		got[k] = r.Header.Values(k)
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("the proxy's headers (-want +got):\n%s", d)
	}
	if r.Method != http.MethodPost || !bytes.Equal(r.Body, body) {
		t.Errorf("the proxy got %s with %d bytes, want POST with the client's %d", r.Method, len(r.Body), len(body))
	}
}

// TestForwardSync: a held call streams the sink's answer back whole,
// gives the proxy no more time than the caller has left, and leaves no
// goroutine behind once the answer is read and closed.
func TestForwardSync(t *testing.T) {
	// Only what this test starts must be gone at its end: the package's
	// other tests leave idle pools behind.
	ignore := goleak.IgnoreCurrent()
	reply := clientBody(5 << 20) // over MaxReplyBytes, a bound for Send: Forward must not cut it
	proxy := newServer(t, func(w http.ResponseWriter, _ *http.Request, _ int) {
		w.Header().Set("Ce-Id", "reply")
		_, _ = w.Write(reply)
	})
	clock := newFakeClock()
	clock.Advance(time.Since(clock.Now())) // so that a real deadline is in the fake clock's future too
	s := testSender(SenderParams{Timeout: 10 * time.Minute}, clock)
	s.SetForwarding(forwardingTo(t, proxy))
	left := 42 * time.Second
	ctx, cancel := context.WithDeadline(context.Background(), clock.Now().Add(left))
	defer cancel()
	req := clientRequest(t, "http://sink.example/", clientBody(10)).WithContext(ctx)
	resp, got := forward(t, s, req, &clientRT{}, ForwardOptions{Sync: true})
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Ce-Id") != "reply" || !bytes.Equal(got, reply) {
		t.Errorf("status %d, Ce-Id %q, %d bytes; want the sink's answer, all %d bytes", resp.StatusCode, resp.Header.Get("Ce-Id"), len(got), len(reply))
	}
	h := proxy.requests()[0].Header
	if h.Get(delivery.HeaderPrefer) != "" || h.Get(delivery.HeaderForwardRetry) != "" {
		t.Errorf("a sync call asked for a hand-off: Prefer %q, Kn-Forward-Retry %q", h.Get(delivery.HeaderPrefer), h.Get(delivery.HeaderForwardRetry))
	}
	if d, err := delivery.ParseDuration(h.Get(delivery.HeaderForwardTimeout)); err != nil || d <= 0 || d > left || d < left-time.Second {
		t.Errorf("Kn-Forward-Timeout %v (%v), want at most the %v left", d, err, left)
	}
	s.CloseIdleConnections()
	proxy.Close()
	goleak.VerifyNone(t, ignore)
}

// TestForwardProxyAnswers: a busy or refusing proxy sends the request
// direct; a sync call whose sink failed comes back as is, after one
// attempt, for the client's own retries (ours too would multiply them).
func TestForwardProxyAnswers(t *testing.T) {
	tests := []struct {
		name     string
		sync     bool
		status   int
		reason   string // Kn-Forward-Error; none for the sink's own answer
		retry    string // Retry-After
		proxyN   int
		waits    []time.Duration
		fallback string // none: the proxy's answer is returned
	}{
		{name: "busy through every retry", status: 503, reason: "overloaded", retry: "1", proxyN: 3,
			waits: []time.Duration{time.Second, time.Second}, fallback: "busy"},
		{name: "destination denied", status: 403, reason: "destination_denied", proxyN: 1, fallback: "refused"},
		{name: "body too large for the proxy", status: 413, reason: "body_too_large", proxyN: 1, fallback: "refused"},
		{name: "sync: sink unreachable", sync: true, status: 502, reason: "unreachable", proxyN: 1},
		{name: "sync: sink timeout", sync: true, status: 504, reason: "timeout", proxyN: 1},
		{name: "sync: the sink's own 503", sync: true, status: 503, proxyN: 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			proxy := newServer(t, func(w http.ResponseWriter, _ *http.Request, _ int) {
				if tc.reason == "" {
					w.WriteHeader(tc.status)
					return
				}
				proxyError(w, tc.status, tc.reason, tc.retry)
			})
			clock := newFakeClock()
			reader, mp := newTestMeterProvider()
			s := testSender(SenderParams{MeterProvider: mp, Retries: 2}, clock)
			s.SetForwarding(forwardingTo(t, proxy))
			direct := &clientRT{}
			body := clientBody(2000)
			resp, got := forward(t, s, clientRequest(t, "http://sink.example/", body), direct, ForwardOptions{Sync: tc.sync})
			if tc.fallback != "" {
				checkDirect(t, direct, body)
			} else if resp.StatusCode != tc.status || resp.Header.Get(delivery.HeaderForwardError) != tc.reason ||
				!bytes.Contains(got, []byte(tc.reason)) || len(direct.reqs) != 0 {
				t.Errorf("got %d %q %q, direct %d; want the proxy's answer as is, not sent direct",
					resp.StatusCode, resp.Header.Get(delivery.HeaderForwardError), got, len(direct.reqs))
			}
			for i, r := range proxy.requests() {
				if !bytes.Equal(r.Body, body) {
					t.Errorf("proxy attempt %d got %d bytes, want the client's %d", i+1, len(r.Body), len(body))
				}
			}
			if proxy.count() != tc.proxyN {
				t.Errorf("the proxy got %d attempts, want %d", proxy.count(), tc.proxyN)
			}
			if d := cmp.Diff(tc.waits, clock.Sleeps()); d != "" {
				t.Errorf("waits (-want +got):\n%s", d)
			}
			checkFallback(t, reader, tc.fallback)
		})
	}
}

// TestForwardProxyUnreachable: nothing is lost with the proxy down, it is
// not tried again for ProxyDownFor, and a failed direct send is an error.
func TestForwardProxyUnreachable(t *testing.T) {
	gone := newServer(t, nil)
	gone.Close()
	clock := newFakeClock()
	reader, mp := newTestMeterProvider()
	s := testSender(SenderParams{MeterProvider: mp, ProxyDownFor: 5 * time.Second}, clock)
	s.SetForwarding(forwardingTo(t, gone))
	advance := []time.Duration{0, 4 * time.Second, 2 * time.Second}
	wants := []map[string]int64{ // fallbacks so far
		{"unreachable": 1}, {"unreachable": 1, "proxy_down": 1}, {"unreachable": 2, "proxy_down": 1},
	}
	for i, want := range wants {
		clock.Advance(advance[i])
		direct := &clientRT{}
		body := clientBody(100 + i)
		forward(t, s, clientRequest(t, "http://sink.example/", body), direct, ForwardOptions{})
		checkDirect(t, direct, body)
		if d := cmp.Diff(want, counterByLabel(t, reader, "kn_forward_sender_fallbacks", "reason")); d != "" {
			t.Errorf("Forward %d: fallbacks (-want +got):\n%s", i+1, d)
		}
	}
	clock.Advance(time.Minute)
	boom := errors.New("connection reset")
	resp, err := s.Forward(clientRequest(t, "http://sink.example/", clientBody(10)), &clientRT{err: boom}, ForwardOptions{})
	if resp != nil || !errors.Is(err, ErrUndelivered) || !errors.Is(err, boom) {
		t.Errorf("Forward = %v, %v; want no answer, and an error wrapping ErrUndelivered and direct's", resp, err)
	}
}

func TestForwardMetrics(t *testing.T) {
	codes, reasons := []int{202, 403, 502}, []string{"", "destination_denied", "unreachable"}
	proxy := newServer(t, func(w http.ResponseWriter, _ *http.Request, n int) { proxyError(w, codes[n-1], reasons[n-1], "") })
	reader, mp := newTestMeterProvider()
	s := testSender(SenderParams{MeterProvider: mp}, newFakeClock())
	direct := &clientRT{}
	// Each send's route and outcome, told by what it adds to each label.
	routes, outcomes := map[string]int64{}, map[string]int64{}
	send := func(code int, o ForwardOptions, route, outcome string) {
		t.Helper()
		direct.code = code
		forward(t, s, clientRequest(t, "http://sink.example/", clientBody(10)), direct, o)
		routes[route]++
		outcomes[outcome]++
		got := map[string]map[string]int64{"route": counterByLabel(t, reader, "kn_forward_sender_sends", "route"),
			"outcome": counterByLabel(t, reader, "kn_forward_sender_sends", "outcome")}
		if d := cmp.Diff(map[string]map[string]int64{"route": routes, "outcome": outcomes}, got); d != "" {
			t.Errorf("sends after a %s send, %s (-want +got):\n%s", route, outcome, d)
		}
	}
	send(200, ForwardOptions{}, "direct", "delivered")
	send(500, ForwardOptions{}, "direct", "failed")
	s.SetForwarding(forwardingTo(t, proxy))
	send(200, ForwardOptions{}, "proxy", "delivered")        // the proxy's 202
	send(200, ForwardOptions{}, "direct", "delivered")       // refused, then direct
	send(200, ForwardOptions{Sync: true}, "proxy", "failed") // the sink unreachable through the proxy
}
