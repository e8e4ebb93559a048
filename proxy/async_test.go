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
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"knative.dev/event-forwarding-proxy/proxy/proxytest"
)

// TestAsyncHandOff: Prefer: respond-async answers 202 at once while the
// destination still holds the call, which keeps its slot until delivery
// ends; the destination then gets the exact event without the headers
// meant for the proxy.
func TestAsyncHandOff(t *testing.T) {
	hold := proxytest.NewHold(t)
	dest := proxytest.NewDestination(t, hold.Reply)
	tp := newTestProxy(t, nil)

	req := tp.newRequest(t, dest.URL+"/in?x=1", bytes.NewReader(event))
	req.Header.Set("Prefer", "respond-async")
	req.Header.Set("Ce-Id", "e-1")
	req.Header.Set("Content-Type", "application/octet-stream")
	req.Header.Set("Kn-Forward-Authorization", "Bearer proxy-token")
	req.Header.Set("Kn-Forward-Retry", "0")
	req.Header.Set("Connection", "X-Hop")
	req.Header.Set("X-Hop", "1")
	resp, body := do(t, h1Client(t), req) // returns although the destination holds the call
	if resp.StatusCode != http.StatusAccepted || len(body) != 0 {
		t.Fatalf("answer = %d %q, want 202 and no body", resp.StatusCode, body)
	}
	if got := tp.Limiter.Inflight(); got != 1 {
		t.Errorf("Inflight() = %d right after 202, want 1 (the delivery holds its slot)", got)
	}

	got := dest.Next(t)
	if !bytes.Equal(got.Body, event) {
		t.Errorf("body = %q, want %q", got.Body, event)
	}
	if got.Method != http.MethodPost || got.RequestURI != "/in?x=1" {
		t.Errorf("request = %s %s, want POST /in?x=1", got.Method, got.RequestURI)
	}
	if v, ok := got.Header["Prefer"]; ok {
		t.Errorf("Prefer %q reached the destination", v)
	}
	for k := range got.Header {
		if strings.HasPrefix(k, "Kn-Forward-") || k == "X-Hop" || k == "Connection" {
			t.Errorf("%s reached the destination", k)
		}
	}
	if got.Header.Get("Ce-Id") != "e-1" || got.Header.Get("Content-Type") != "application/octet-stream" {
		t.Errorf("end-to-end headers lost: %v", got.Header)
	}
	if !hasLoopMark(got.Header, DefaultLoopID) {
		t.Errorf("CDN-Loop = %q, want it to carry %q", got.Header.Values("CDN-Loop"), DefaultLoopID)
	}
	if n := tp.Limiter.Inflight(); n != 1 {
		t.Errorf("Inflight() = %d while the destination holds the call, want 1", n)
	}

	hold.Release()
	proxytest.Eventually(t, 5*time.Second, func() bool { return tp.Limiter.Inflight() == 0 },
		"the slot was not released after delivery")
}

// TestAsyncKeepsOtherPreferences: only respond-async is taken out of
// Prefer.
func TestAsyncKeepsOtherPreferences(t *testing.T) {
	dest := proxytest.NewDestination(t, nil)
	tp := newTestProxy(t, nil)
	req := tp.newRequest(t, dest.URL, strings.NewReader("e"))
	req.Header.Set("Prefer", "return=minimal, respond-async")
	if resp, _ := do(t, h1Client(t), req); resp.StatusCode != http.StatusAccepted {
		t.Fatalf("status = %d, want 202", resp.StatusCode)
	}
	if diff := cmp.Diff([]string{"return=minimal"}, dest.Next(t).Header.Values("Prefer")); diff != "" {
		t.Errorf("Prefer at the destination (-want +got):\n%s", diff)
	}
}

// TestRetries: the proxy retries async deliveries it owns, as the request
// asks, and never retries a synchronous call, whose caller owns retries.
func TestRetries(t *testing.T) {
	type answer struct {
		status     int
		retryAfter string
	}
	tests := []struct {
		name         string
		async        bool
		header       map[string]string
		answers      []answer // the n-th attempt gets answers[min(n, len)-1]
		wantStatus   int      // the caller's answer
		wantAttempts int
	}{{
		name:         "async: 503 twice with Retry-After 0, then 200",
		async:        true,
		header:       map[string]string{"Kn-Forward-Backoff-Delay": "PT0.01S", "Kn-Forward-Retry": "5"},
		answers:      []answer{{503, "0"}, {503, "0"}, {200, ""}},
		wantStatus:   http.StatusAccepted,
		wantAttempts: 3,
	}, {
		name:         "async: Kn-Forward-Retry 0 tries once",
		async:        true,
		header:       map[string]string{"Kn-Forward-Retry": "0"},
		answers:      []answer{{500, ""}},
		wantStatus:   http.StatusAccepted,
		wantAttempts: 1,
	}, {
		name:         "async: Kn-Forward-Retry bounds the attempts",
		async:        true,
		header:       map[string]string{"Kn-Forward-Retry": "2", "Kn-Forward-Backoff-Delay": "PT0.01S"},
		answers:      []answer{{404, ""}},
		wantStatus:   http.StatusAccepted,
		wantAttempts: 3,
	}, {
		name:         "async: FORWARD_ASYNC_RETRY is the default",
		async:        true,
		answers:      []answer{{502, ""}},
		wantStatus:   http.StatusAccepted,
		wantAttempts: 3, // baseEnv: FORWARD_ASYNC_RETRY=2
	}, {
		name:         "async: 400 is final",
		async:        true,
		header:       map[string]string{"Kn-Forward-Retry": "3", "Kn-Forward-Backoff-Delay": "PT0.01S"},
		answers:      []answer{{400, ""}},
		wantStatus:   http.StatusAccepted,
		wantAttempts: 1,
	}, {
		name:         "sync: 503 is answered as is, once",
		header:       map[string]string{"Kn-Forward-Retry": "3", "Kn-Forward-Backoff-Delay": "PT0.01S"},
		answers:      []answer{{503, "0"}},
		wantStatus:   http.StatusServiceUnavailable,
		wantAttempts: 1,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dest := proxytest.NewDestination(t, func(w http.ResponseWriter, _ *http.Request, n int) {
				a := tt.answers[min(n, len(tt.answers))-1]
				if a.retryAfter != "" {
					w.Header().Set("Retry-After", a.retryAfter)
				}
				w.WriteHeader(a.status)
				_, _ = w.Write([]byte("from the destination"))
			})
			tp := newTestProxy(t, nil)
			req := tp.newRequest(t, dest.URL, bytes.NewReader(event))
			if tt.async {
				req.Header.Set("Prefer", "respond-async")
			}
			for k, v := range tt.header {
				req.Header.Set(k, v)
			}
			resp, body := do(t, h1Client(t), req)
			if resp.StatusCode != tt.wantStatus {
				t.Errorf("status = %d, want %d", resp.StatusCode, tt.wantStatus)
			}
			if !tt.async && (string(body) != "from the destination" || resp.Header.Get("Kn-Forward-Error") != "") {
				t.Errorf("the destination's answer was not passed through: %q %v", body, resp.Header)
			}
			// The delivery has ended when its slot is back.
			proxytest.Eventually(t, 5*time.Second, func() bool { return tp.Limiter.Inflight() == 0 },
				"the delivery did not end")
			reqs := dest.Requests()
			if len(reqs) != tt.wantAttempts {
				t.Fatalf("the destination received %d attempts, want exactly %d", len(reqs), tt.wantAttempts)
			}
			for i, r := range reqs {
				if !bytes.Equal(r.Body, event) {
					t.Errorf("attempt %d carried %q, want %q", i+1, r.Body, event)
				}
			}
		})
	}
}

// TestAsyncTimeout: each async attempt is bounded by Kn-Forward-Timeout and
// a timed-out attempt is retried.
func TestAsyncTimeout(t *testing.T) {
	hold := proxytest.NewHold(t)
	dest := proxytest.NewDestination(t, hold.Reply)
	tp := newTestProxy(t, nil)
	req := tp.newRequest(t, dest.URL, strings.NewReader("e"))
	req.Header.Set("Prefer", "respond-async")
	req.Header.Set("Kn-Forward-Timeout", "PT0.1S")
	req.Header.Set("Kn-Forward-Retry", "1")
	req.Header.Set("Kn-Forward-Backoff-Delay", "PT0.01S")
	if resp, _ := do(t, h1Client(t), req); resp.StatusCode != http.StatusAccepted {
		t.Fatalf("status = %d, want 202", resp.StatusCode)
	}
	hold.WaitCancelled(t)
	hold.WaitCancelled(t)
	proxytest.Eventually(t, 5*time.Second, func() bool { return tp.Limiter.Inflight() == 0 },
		"the delivery did not end after its last timed-out attempt")
	if n := dest.Count(); n != 2 {
		t.Errorf("the destination received %d attempts, want 2", n)
	}
}

// TestAsyncFailures: deliveries that get no answer. A destination the
// dialer refuses is final; an unreachable one is retried. Each failure is
// logged once with its attempts.
func TestAsyncFailures(t *testing.T) {
	closedURL := "http://" + proxytest.NewRefusingAddr(t) + "/"
	dest := proxytest.NewDestination(t, nil)
	_, destPort, _ := net.SplitHostPort(strings.TrimPrefix(dest.URL, "http://"))

	tests := []struct {
		name         string
		env          map[string]string
		dest         string
		wantAttempts int64
	}{{
		name:         "unreachable is retried",
		dest:         closedURL,
		wantAttempts: 3,
	}, {
		name:         "denied at dial time is final",
		env:          map[string]string{"FORWARD_ALLOWED_CIDRS": "", "FORWARD_ALLOWED_HOSTS": "localhost"},
		dest:         "http://localhost:" + destPort + "/",
		wantAttempts: 1,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			core, logs := observer.New(zapcore.DebugLevel)
			tp := newTestProxyLogger(t, tt.env, zap.New(core).Sugar())
			req := tp.newRequest(t, tt.dest, strings.NewReader("e"))
			req.Header.Set("Prefer", "respond-async")
			req.Header.Set("Ce-Id", "e-7")
			req.Header.Set("Kn-Forward-Retry", "2")
			req.Header.Set("Kn-Forward-Backoff-Delay", "PT0.01S")
			if resp, _ := do(t, h1Client(t), req); resp.StatusCode != http.StatusAccepted {
				t.Fatalf("status = %d, want 202", resp.StatusCode)
			}
			proxytest.Eventually(t, 5*time.Second, func() bool { return tp.Limiter.Inflight() == 0 },
				"the delivery did not end")
			failed := logs.FilterMessage("Async delivery failed").All()
			if len(failed) != 1 {
				t.Fatalf("logged %d failures, want 1; logs: %v", len(failed), logs.All())
			}
			f := failed[0].ContextMap()
			if f["attempts"] != tt.wantAttempts || f["ceId"] != "e-7" {
				t.Errorf("failure logged with attempts %v ceId %v, want %d and e-7", f["attempts"], f["ceId"], tt.wantAttempts)
			}
			if n := dest.Count(); n != 0 {
				t.Errorf("the destination received %d requests, want 0", n)
			}
		})
	}
}
