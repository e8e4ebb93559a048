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
	"encoding/json"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"knative.dev/event-forwarding-proxy/delivery"
)

// proxyError answers as the proxy does when it refuses a call itself.
func proxyError(w http.ResponseWriter, status int, reason string, retryAfter string) {
	w.Header().Set(delivery.HeaderForwardError, reason)
	if retryAfter != "" {
		w.Header().Set(delivery.HeaderRetryAfter, retryAfter)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{"reason": reason, "message": "test"})
}

func TestSendThroughProxyHeaders(t *testing.T) {
	proxy := newServer(t, statuses([]int{http.StatusAccepted}, nil))
	sink := newServer(t, nil)
	tests := []struct {
		name string
		sync bool
		want map[string]string
	}{
		{name: "async hand-off", want: map[string]string{
			"Kn-Forward-To": sink.URL, "Kn-Forward-Timeout": "PT10M", "Prefer": "respond-async",
			"Kn-Forward-Retry": "5", "Kn-Forward-Backoff-Delay": "PT0.05S", "Kn-Forward-Retry-After-Max": "PT30S",
			"Kn-Namespace": "tenant", "Ce-Id": "e",
		}},
		{name: "sync call", sync: true, want: map[string]string{
			"Kn-Forward-To": sink.URL, "Kn-Forward-Timeout": "PT10M", "Prefer": "",
			"Kn-Forward-Retry": "", "Kn-Forward-Backoff-Delay": "", "Kn-Forward-Retry-After-Max": "",
			"Kn-Namespace": "tenant", "Ce-Id": "e",
		}},
	}
	s := testSender(SenderParams{}, newFakeClock())
	s.SetForwarding(forwardingTo(t, proxy))
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res, err := s.Send(ctxFor(t, 10*time.Second), Target{URL: sink.url(t), Namespace: "tenant", Sync: tc.sync}, testEvent("e"))
			if err != nil {
				t.Fatal(err)
			}
			if res.Route != RouteProxy || res.Fallback || res.StatusCode != http.StatusAccepted {
				t.Errorf("result %+v", res)
			}
			r := proxy.requests()[i]
			got := map[string]string{}
			for k := range tc.want {
				got[k] = r.Header.Get(k)
			}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("headers (-want +got):\n%s", d)
			}
			if r.Proto != 2 {
				t.Errorf("reached the proxy over HTTP/%d, want h2c", r.Proto)
			}
			if string(r.Body) != `{"hello":"world"}` {
				t.Errorf("body %q", r.Body)
			}
		})
	}
	if sink.count() != 0 {
		t.Errorf("the sink got %d direct calls", sink.count())
	}
}

func TestSendThroughProxyAnswers(t *testing.T) {
	ms := time.Millisecond
	tests := []struct {
		name     string
		sync     bool
		respond  func(w http.ResponseWriter, r *http.Request, n int)
		wantErr  bool
		route    Route
		fallback bool
		proxyN   int // calls the proxy got
		sinkN    int // direct calls the sink got
		waits    []time.Duration
		reason   string // the fallback counted
	}{
		{name: "202 hand-off", respond: statuses([]int{202}, nil), route: RouteProxy, proxyN: 1},
		{name: "503 overloaded with Retry-After, then 202", route: RouteProxy, proxyN: 2, waits: []time.Duration{2 * time.Second},
			respond: func(w http.ResponseWriter, _ *http.Request, n int) {
				if n == 1 {
					proxyError(w, 503, "overloaded", "2")
					return
				}
				w.WriteHeader(http.StatusAccepted)
			}},
		{name: "429 tenant_limited honours Retry-After", route: RouteProxy, proxyN: 2, waits: []time.Duration{time.Second},
			respond: func(w http.ResponseWriter, _ *http.Request, n int) {
				if n == 1 {
					proxyError(w, 429, "tenant_limited", "1")
					return
				}
				w.WriteHeader(http.StatusAccepted)
			}},
		{name: "busy through every retry: falls back", route: RouteDirect, fallback: true, proxyN: 6, sinkN: 1, reason: "busy",
			waits:   []time.Duration{time.Second, time.Second, time.Second, time.Second, time.Second},
			respond: func(w http.ResponseWriter, _ *http.Request, _ int) { proxyError(w, 503, "draining", "1") }},
		{name: "a gateway's 503 before the proxy is busy too", route: RouteProxy, proxyN: 2, waits: []time.Duration{50 * ms},
			respond: statuses([]int{503, 202}, nil)},
		{name: "refused: falls back at once", route: RouteDirect, fallback: true, proxyN: 1, sinkN: 1, reason: "refused",
			respond: func(w http.ResponseWriter, _ *http.Request, _ int) { proxyError(w, 403, "destination_denied", "") }},
		{name: "401 falls back", route: RouteDirect, fallback: true, proxyN: 1, sinkN: 1, reason: "refused",
			respond: func(w http.ResponseWriter, _ *http.Request, _ int) { proxyError(w, 401, "unauthenticated", "") }},
		{name: "sync: the sink's success", sync: true, route: RouteProxy, proxyN: 1, respond: statuses([]int{200}, nil)},
		{name: "sync: sink unreachable is retried, never sent direct", sync: true, wantErr: true, route: RouteProxy, proxyN: 6,
			waits:   []time.Duration{50 * ms, 100 * ms, 200 * ms, 400 * ms, 800 * ms},
			respond: func(w http.ResponseWriter, _ *http.Request, _ int) { proxyError(w, 502, "unreachable", "") }},
		{name: "sync: the sink's 404 then 200", sync: true, route: RouteProxy, proxyN: 2, waits: []time.Duration{50 * ms},
			respond: statuses([]int{404, 200}, nil)},
		{name: "sync: the sink's 500 is final", sync: true, wantErr: true, route: RouteProxy, proxyN: 1, respond: statuses([]int{500}, nil)},
		{name: "sync: proxy overloaded, then direct", sync: true, route: RouteDirect, fallback: true, proxyN: 6, sinkN: 1, reason: "busy",
			waits:   []time.Duration{time.Second, time.Second, time.Second, time.Second, time.Second},
			respond: func(w http.ResponseWriter, _ *http.Request, _ int) { proxyError(w, 503, "overloaded", "1") }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			proxy := newServer(t, tc.respond)
			sink := newServer(t, nil)
			clock := newFakeClock()
			reader, mp := newTestMeterProvider()
			s := testSender(SenderParams{MeterProvider: mp}, clock)
			s.SetForwarding(forwardingTo(t, proxy))
			res, err := s.Send(ctxFor(t, 10*time.Second), Target{URL: sink.url(t), Sync: tc.sync}, testEvent("e"))
			if (err != nil) != tc.wantErr {
				t.Fatalf("error %v, want error %v", err, tc.wantErr)
			}
			if err != nil && !errors.Is(err, ErrUndelivered) {
				t.Errorf("error %v does not wrap ErrUndelivered", err)
			}
			if res.Route != tc.route || res.Fallback != tc.fallback {
				t.Errorf("route %s fallback %v, want %s %v", res.Route, res.Fallback, tc.route, tc.fallback)
			}
			if proxy.count() != tc.proxyN || sink.count() != tc.sinkN {
				t.Errorf("proxy got %d, sink got %d direct; want %d and %d", proxy.count(), sink.count(), tc.proxyN, tc.sinkN)
			}
			if d := cmp.Diff(tc.waits, clock.Sleeps()); d != "" {
				t.Errorf("waits (-want +got):\n%s", d)
			}
			want := map[string]int64{}
			if tc.reason != "" {
				want[tc.reason] = 1
			}
			if d := cmp.Diff(want, counterByLabel(t, reader, "kn_forward_sender_fallbacks", "reason")); d != "" {
				t.Errorf("fallbacks (-want +got):\n%s", d)
			}
		})
	}
}

// TestSendProxyUnreachable: an event is never dropped because the proxy is
// down. The send that finds it down goes direct; so do the next ones, for
// ProxyDownFor, without trying it; then it is tried again.
func TestSendProxyUnreachable(t *testing.T) {
	sink := newServer(t, nil)
	gone := newServer(t, nil)
	gone.Close()
	clock := newFakeClock()
	reader, mp := newTestMeterProvider()
	s := testSender(SenderParams{MeterProvider: mp, ProxyDownFor: 5 * time.Second}, clock)
	s.SetForwarding(forwardingTo(t, gone))
	send := func() *Result {
		t.Helper()
		res, err := s.Send(ctxFor(t, 10*time.Second), Target{URL: sink.url(t)}, testEvent("e"))
		if err != nil {
			t.Fatal(err)
		}
		if res.Route != RouteDirect || !res.Fallback {
			t.Fatalf("result %+v, want a direct fallback", res)
		}
		return res
	}
	if res := send(); res.Attempts != 2 {
		t.Errorf("first send: %d attempts, want the proxy's and the sink's", res.Attempts)
	}
	clock.Advance(4 * time.Second)
	if res := send(); res.Attempts != 1 {
		t.Errorf("while down: %d attempts, want the sink's only", res.Attempts)
	}
	clock.Advance(2 * time.Second)
	if res := send(); res.Attempts != 2 {
		t.Errorf("after the pause: %d attempts, want the proxy tried again", res.Attempts)
	}
	s.SetForwarding(forwardingTo(t, gone)) // a new configuration: try at once
	if res := send(); res.Attempts != 2 {
		t.Errorf("after a configuration change: %d attempts, want the proxy tried again", res.Attempts)
	}
	if sink.count() != 4 {
		t.Errorf("the sink got %d events, want 4", sink.count())
	}
	want := map[string]int64{"unreachable": 3, "proxy_down": 1}
	if d := cmp.Diff(want, counterByLabel(t, reader, "kn_forward_sender_fallbacks", "reason")); d != "" {
		t.Errorf("fallbacks (-want +got):\n%s", d)
	}
}

// TestSendFollowsTheRouter: the route of each send follows the count of
// direct sources, with hysteresis, and configuration changes apply to the
// next send.
func TestSendFollowsTheRouter(t *testing.T) {
	proxy := newServer(t, statuses([]int{202}, nil))
	sink := newServer(t, nil)
	s := testSender(SenderParams{}, newFakeClock())
	tests := []struct {
		name    string
		change  func()
		want    Route
		proxyN  int
		directN int
	}{
		{name: "off by default", change: func() { s.SetDirectSources(1000) }, want: RouteDirect, directN: 1},
		{name: "proxy set, above threshold", change: func() {
			f := forwardingTo(t, proxy)
			f.Threshold = 500
			s.SetForwarding(f)
		}, want: RouteProxy, proxyN: 1, directN: 1},
		{name: "just below: hysteresis keeps the proxy", change: func() { s.SetDirectSources(460) }, want: RouteProxy, proxyN: 2, directN: 1},
		{name: "below 90 %: direct again", change: func() { s.SetDirectSources(449) }, want: RouteDirect, proxyN: 2, directN: 2},
		{name: "threshold 0: always", change: func() { s.SetForwarding(forwardingTo(t, proxy)) }, want: RouteProxy, proxyN: 3, directN: 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.change()
			if s.Route() != tc.want {
				t.Errorf("Route() = %s, want %s", s.Route(), tc.want)
			}
			res, err := s.Send(ctxFor(t, 10*time.Second), Target{URL: sink.url(t)}, testEvent("e"))
			if err != nil {
				t.Fatal(err)
			}
			if res.Route != tc.want || proxy.count() != tc.proxyN || sink.count() != tc.directN {
				t.Errorf("route %s, proxy %d, sink %d; want %s, %d, %d", res.Route, proxy.count(), sink.count(), tc.want, tc.proxyN, tc.directN)
			}
		})
	}
}

func TestSendCACertsSinkGoesDirect(t *testing.T) {
	proxy := newServer(t, statuses([]int{202}, nil))
	sink := newServer(t, nil)
	s := testSender(SenderParams{}, newFakeClock())
	s.SetForwarding(forwardingTo(t, proxy))
	// An http sink with CA certificates: they are unused, but the proxy
	// could not honour them either, so the event goes direct.
	res, err := s.Send(ctxFor(t, 10*time.Second), Target{URL: sink.url(t), CACerts: "-----BEGIN CERTIFICATE-----"}, testEvent("e"))
	if err != nil {
		t.Fatal(err)
	}
	if res.Route != RouteDirect || res.Fallback || proxy.count() != 0 || sink.count() != 1 {
		t.Errorf("result %+v, proxy %d, sink %d", res, proxy.count(), sink.count())
	}
}

func TestJudgeProxyAnswer(t *testing.T) {
	reason := func(r string) http.Header { return http.Header{delivery.HeaderForwardError: {r}} }
	tests := []struct {
		name   string
		status int
		header http.Header
		sync   bool
		want   proxyVerdict
	}{
		{name: "202", status: 202, want: proxyDelivered},
		{name: "sync 200", status: 200, sync: true, want: proxyDelivered},
		{name: "overloaded", status: 503, header: reason("overloaded"), want: proxyBusy},
		{name: "destination_busy", status: 503, header: reason("destination_busy"), want: proxyBusy},
		{name: "draining", status: 503, header: reason("draining"), want: proxyBusy},
		{name: "tenant_limited", status: 429, header: reason("tenant_limited"), want: proxyBusy},
		{name: "bad_destination", status: 400, header: reason("bad_destination"), want: proxyRefused},
		{name: "body_too_large", status: 413, header: reason("body_too_large"), want: proxyRefused},
		{name: "loop_detected", status: 403, header: reason("loop_detected"), want: proxyRefused},
		{name: "sync unreachable", status: 502, header: reason("unreachable"), sync: true, want: proxySinkRetryable},
		{name: "sync timeout", status: 504, header: reason("timeout"), sync: true, want: proxySinkRetryable},
		{name: "sync sink 429", status: 429, sync: true, want: proxySinkRetryable},
		{name: "sync sink 400", status: 400, sync: true, want: proxySinkFinal},
		{name: "async gateway 502", status: 502, want: proxyBusy},
		{name: "async gateway 404", status: 404, want: proxyRefused},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := tc.header
			if h == nil {
				h = http.Header{}
			}
			if got := judgeProxyAnswer(tc.status, h, tc.sync); got != tc.want {
				t.Errorf("judgeProxyAnswer(%d, %v, sync %v) = %d, want %d", tc.status, h, tc.sync, got, tc.want)
			}
		})
	}
}
