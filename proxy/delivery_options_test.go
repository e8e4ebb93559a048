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
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"knative.dev/event-forwarding-proxy/proxy/proxytest"
)

// TestRetryOptions hands off events whose destination always fails, with
// a delivery spec's backoff policy and Retry-After cap in their headers,
// and reads the waits the proxy scheduled between the attempts (at the
// top of their jitter, and run at once): their number and how each
// grows from the one before.
func TestRetryOptions(t *testing.T) {
	tests := []struct {
		name       string
		header     map[string]string
		retryAfter string // the destination's Retry-After, if any
		want       []time.Duration
	}{{
		name:   "exponential by default",
		header: map[string]string{},
		want:   []time.Duration{time.Second, 2 * time.Second, 4 * time.Second},
	}, {
		name:   "exponential",
		header: map[string]string{"Kn-Forward-Backoff-Policy": "exponential"},
		want:   []time.Duration{time.Second, 2 * time.Second, 4 * time.Second},
	}, {
		name:   "linear",
		header: map[string]string{"Kn-Forward-Backoff-Policy": "Linear"},
		want:   []time.Duration{time.Second, 2 * time.Second, 3 * time.Second},
	}, {
		name:       "Retry-After up to the install's cap",
		retryAfter: "7200",
		want:       []time.Duration{time.Hour, time.Hour, time.Hour},
	}, {
		name:       "Retry-After up to the call's cap",
		header:     map[string]string{"Kn-Forward-Retry-After-Max": "PT10S"},
		retryAfter: "7200",
		want:       []time.Duration{10 * time.Second, 10 * time.Second, 10 * time.Second},
	}, {
		name:       "a call cannot raise the install's cap",
		header:     map[string]string{"Kn-Forward-Retry-After-Max": "PT3H"},
		retryAfter: "7200",
		want:       []time.Duration{time.Hour, time.Hour, time.Hour},
	}, {
		name:       "PT0S ignores Retry-After",
		header:     map[string]string{"Kn-Forward-Retry-After-Max": "PT0S", "Kn-Forward-Backoff-Policy": "linear"},
		retryAfter: "7200",
		want:       []time.Duration{time.Second, 2 * time.Second, 3 * time.Second},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dest := proxytest.NewDestination(t, func(w http.ResponseWriter, _ *http.Request, _ int) {
				if tt.retryAfter != "" {
					w.Header().Set("Retry-After", tt.retryAfter)
				}
				w.WriteHeader(http.StatusServiceUnavailable)
			})
			tp := newTestProxy(t, map[string]string{"FORWARD_ASYNC_BACKOFF_MAX": "1m", "FORWARD_ASYNC_MAX_RETRY_AFTER": "1h"})
			var (
				mu    sync.Mutex
				waits []time.Duration
			)
			tp.async.jitter = func(n int64) int64 { return n - 1 } // the top: the whole wait
			tp.async.afterFunc = func(d time.Duration, f func()) *time.Timer {
				mu.Lock()
				defer mu.Unlock()
				waits = append(waits, d)
				return time.AfterFunc(0, f)
			}
			req := tp.newRequest(t, dest.URL, bytes.NewReader(event))
			req.Header.Set("Prefer", "respond-async")
			req.Header.Set("Kn-Forward-Retry", "3")
			req.Header.Set("Kn-Forward-Backoff-Delay", "PT1S")
			for k, v := range tt.header {
				req.Header.Set(k, v)
			}
			if resp, body := do(t, h1Client(t), req); resp.StatusCode != http.StatusAccepted {
				t.Fatalf("hand-off: %d %q, want 202", resp.StatusCode, body)
			}
			proxytest.Eventually(t, 5*time.Second, func() bool { return tp.async.Pending() == 0 }, "the event's last attempt ends")
			if n := dest.Count(); n != 4 {
				t.Errorf("%d attempts, want 4 (Kn-Forward-Retry 3)", n)
			}
			mu.Lock()
			defer mu.Unlock()
			if fmt.Sprint(waits) != fmt.Sprint(tt.want) {
				t.Errorf("waits between the attempts = %v, want %v", waits, tt.want)
			}
		})
	}
}

// TestRetryOptionsRefused: a delivery spec's option the proxy cannot read
// gets 400 bad_request before anything reaches the destination.
func TestRetryOptionsRefused(t *testing.T) {
	dest := proxytest.NewDestination(t, nil)
	tp := newTestProxy(t, nil)
	for _, h := range []map[string]string{
		{"Kn-Forward-Backoff-Policy": "random"},
		{"Kn-Forward-Backoff-Policy": "linear,exponential"},
		{"Kn-Forward-Retry-After-Max": "30s"},
		{"Kn-Forward-Retry-After-Max": "-PT1S"},
		{"Kn-Forward-Retry-After-Max": "P1M"},
	} {
		req := tp.newRequest(t, dest.URL, bytes.NewReader(event))
		req.Header.Set("Prefer", "respond-async")
		for k, v := range h {
			req.Header.Set(k, v)
		}
		resp, body := do(t, h1Client(t), req)
		wantProxyError(t, resp, body, ReasonBadRequest)
	}
	if n := dest.Count(); n != 0 {
		t.Errorf("%d requests reached the destination, want none", n)
	}
}
