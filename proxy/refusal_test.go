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
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"knative.dev/event-forwarding-proxy/proxy/proxytest"
)

// TestRefusals: requests the proxy refuses before anything is dialed. The
// destination must see none of them.
func TestRefusals(t *testing.T) {
	dest := proxytest.NewDestination(t, nil)
	tp := newTestProxy(t, nil)
	client := h1Client(t)
	tests := []struct {
		name   string
		dest   string
		header http.Header
		body   io.Reader
		want   Reason
	}{
		{name: "no Kn-Forward-To", want: ReasonMissingDestination},
		{name: "empty Kn-Forward-To", header: http.Header{"Kn-Forward-To": {""}}, want: ReasonMissingDestination},
		{name: "repeated Kn-Forward-To", header: http.Header{"Kn-Forward-To": {dest.URL, dest.URL}}, want: ReasonBadDestination},
		{name: "relative Kn-Forward-To", dest: "/events", want: ReasonBadDestination},
		{name: "ftp destination", dest: "ftp://127.0.0.1/", want: ReasonBadDestination},
		{name: "userinfo", dest: strings.Replace(dest.URL, "http://", "http://u:p@", 1), want: ReasonBadDestination},
		{name: "Kn-Forward-Timeout not ISO-8601", dest: dest.URL, header: http.Header{"Kn-Forward-Timeout": {"10s"}}, want: ReasonBadRequest},
		{name: "Kn-Forward-Timeout zero", dest: dest.URL, header: http.Header{"Kn-Forward-Timeout": {"PT0S"}}, want: ReasonBadRequest},
		{name: "Kn-Forward-Retry negative", dest: dest.URL, header: http.Header{"Kn-Forward-Retry": {"-1"}}, want: ReasonBadRequest},
		{name: "Kn-Forward-Backoff-Delay not ISO-8601", dest: dest.URL, header: http.Header{"Kn-Forward-Backoff-Delay": {"1s"}}, want: ReasonBadRequest},
		{name: "host not allowed", dest: "http://example.com/", want: ReasonDestinationDenied},
		{name: "cluster host of the API server", dest: "https://kubernetes.default.svc/", want: ReasonDestinationDenied},
		{name: "cloud metadata", dest: "http://169.254.169.254/latest/meta-data/", want: ReasonDestinationDenied},
		{name: "IPv6 loopback outside FORWARD_ALLOWED_CIDRS", dest: "http://[::1]:1/", want: ReasonDestinationDenied},
		{name: "loop: CDN-Loop names this proxy", dest: dest.URL, header: http.Header{"Cdn-Loop": {"cdn-a, knative-event-forwarding-proxy; v=1"}}, want: ReasonLoopDetected},
		{name: "loop is checked before the destination", dest: "ftp://x/", header: http.Header{"Cdn-Loop": {DefaultLoopID}}, want: ReasonLoopDetected},
		{name: "declared Content-Length over FORWARD_MAX_EVENT_BYTES", dest: dest.URL, body: bytes.NewReader(make([]byte, 1025)), want: ReasonBodyTooLarge},
		{name: "async: declared Content-Length over FORWARD_MAX_EVENT_BYTES", dest: dest.URL, header: http.Header{"Prefer": {"respond-async"}}, body: bytes.NewReader(make([]byte, 4096)), want: ReasonBodyTooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body := tt.body
			if body == nil {
				body = strings.NewReader("e")
			}
			req := tp.newRequest(t, tt.dest, body)
			for k, v := range tt.header {
				req.Header[k] = v
			}
			resp, got := do(t, client, req)
			wantProxyError(t, resp, got, tt.want)
			if n := dest.Count(); n != 0 {
				t.Errorf("the destination received %d requests, want 0", n)
			}
			if n := tp.Limiter.Inflight(); n != 0 {
				t.Errorf("Inflight() = %d after a refusal, want 0", n)
			}
		})
	}
}

// TestBodyLimitExact: a body of exactly FORWARD_MAX_EVENT_BYTES passes,
// declared or chunked.
func TestBodyLimitExact(t *testing.T) {
	dest := proxytest.NewDestination(t, nil)
	tp := newTestProxy(t, nil)
	full := bytes.Repeat([]byte("x"), 1024)
	for name, body := range map[string]io.Reader{
		"declared": bytes.NewReader(full),
		"chunked":  io.MultiReader(bytes.NewReader(full)),
	} {
		t.Run(name, func(t *testing.T) {
			resp, _ := do(t, h1Client(t), tp.newRequest(t, dest.URL, body))
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("status = %d, want 200", resp.StatusCode)
			}
			if got := dest.Next(t); !bytes.Equal(got.Body, full) {
				t.Errorf("destination got %d bytes, want %d", len(got.Body), len(full))
			}
		})
	}
}

// TestChunkedBodyTooLarge: a body of unknown length that passes the limit
// is refused with 413 and never reaches a destination whole.
func TestChunkedBodyTooLarge(t *testing.T) {
	tests := []struct {
		name   string
		prefer string
	}{
		{name: "sync"},
		{name: "async", prefer: "respond-async"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dest := proxytest.NewDestination(t, nil)
			tp := newTestProxy(t, nil)
			// MultiReader hides the length: the client sends it chunked.
			req := tp.newRequest(t, dest.URL, io.MultiReader(bytes.NewReader(make([]byte, 4096))))
			if tt.prefer != "" {
				req.Header.Set("Prefer", tt.prefer)
			}
			resp, body := do(t, h1Client(t), req)
			wantProxyError(t, resp, body, ReasonBodyTooLarge)
			proxytest.Eventually(t, 5*time.Second, func() bool { return tp.Limiter.Inflight() == 0 }, "the slot was not released")
			for _, r := range dest.Requests() {
				if r.BodyErr == nil {
					t.Errorf("the destination received a whole body of %d bytes", len(r.Body))
				}
			}
		})
	}
}

// TestAdmissionRefusals: the (N+1)th call over a limit is refused at once
// and the destination counts exactly the N admitted ones.
func TestAdmissionRefusals(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
		// held are the Kn-Namespace values of the calls that fill the limit
		held []string
		// tenant is the Kn-Namespace of the refused call; other is a call
		// that must still be admitted, to an idle destination.
		tenant, other string
		want          Reason
	}{{
		name: "overloaded",
		env:  map[string]string{"FORWARD_MAX_INFLIGHT": "3", "FORWARD_MAX_INFLIGHT_PER_DESTINATION": "3", "FORWARD_MAX_INFLIGHT_PER_TENANT": "3"},
		held: []string{"team-a", "team-b", "team-c"}, tenant: "team-d",
		want: ReasonOverloaded,
	}, {
		name: "destination_busy",
		env:  map[string]string{"FORWARD_MAX_INFLIGHT": "4", "FORWARD_MAX_INFLIGHT_PER_DESTINATION": "2", "FORWARD_MAX_INFLIGHT_PER_TENANT": "4"},
		held: []string{"team-a", "team-b"}, tenant: "team-c", other: "team-c",
		want: ReasonDestinationBusy,
	}, {
		name: "tenant_limited",
		env:  map[string]string{"FORWARD_MAX_INFLIGHT": "4", "FORWARD_MAX_INFLIGHT_PER_DESTINATION": "4", "FORWARD_MAX_INFLIGHT_PER_TENANT": "2"},
		held: []string{"team-a", "team-a"}, tenant: "team-a", other: "team-b",
		want: ReasonTenantLimited,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			hold := proxytest.NewHold(t)
			busy := proxytest.NewDestination(t, hold.Reply)
			idle := proxytest.NewDestination(t, nil)
			tp := newTestProxy(t, tt.env)
			client := h1Client(t)

			var calls []<-chan result
			for _, ns := range tt.held {
				req := tp.newRequest(t, busy.URL, strings.NewReader("e"))
				req.Header.Set("Kn-Namespace", ns)
				calls = append(calls, goDo(client, req))
			}
			proxytest.Eventually(t, 5*time.Second, func() bool { return busy.Count() == len(tt.held) },
				"the held calls did not all reach the destination")

			req := tp.newRequest(t, busy.URL, strings.NewReader("e"))
			req.Header.Set("Kn-Namespace", tt.tenant)
			resp, body := do(t, client, req)
			wantProxyError(t, resp, body, tt.want)
			if tt.other != "" {
				req := tp.newRequest(t, idle.URL, strings.NewReader("e"))
				req.Header.Set("Kn-Namespace", tt.other)
				if resp, _ := do(t, client, req); resp.StatusCode != http.StatusOK {
					t.Errorf("a call outside the limit got %d, want 200", resp.StatusCode)
				}
			}
			if got := tp.Limiter.Inflight(); got != len(tt.held) {
				t.Errorf("Inflight() = %d, want %d", got, len(tt.held))
			}

			hold.Release()
			for _, c := range calls {
				if r := await(t, c); r.err != nil || r.resp.StatusCode != http.StatusOK {
					t.Errorf("held call: %v %v", r.err, r.resp)
				}
			}
			if got := busy.Count(); got != len(tt.held) {
				t.Errorf("the destination counted %d requests, want exactly %d", got, len(tt.held))
			}
		})
	}
}
