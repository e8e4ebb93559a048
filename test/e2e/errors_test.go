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

package e2e

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"knative.dev/event-forwarding-proxy/test/testproc"
)

// proxyAnswer is the proxy's own error answer, decoded.
type proxyAnswer struct {
	Status     int
	Reason     string // Kn-Forward-Error header
	BodyReason string `json:"reason"`
	Message    string `json:"message"`
	RetryAfter string
}

func readAnswer(t *testing.T, resp *http.Response) proxyAnswer {
	t.Helper()
	defer resp.Body.Close()
	a := proxyAnswer{Status: resp.StatusCode, Reason: resp.Header.Get("Kn-Forward-Error"), RetryAfter: resp.Header.Get("Retry-After")}
	body, _ := io.ReadAll(resp.Body)
	if a.Reason != "" {
		if err := json.Unmarshal(body, &a); err != nil {
			t.Errorf("error body %q is not JSON: %v", body, err)
		}
	}
	return a
}

func checkAnswer(t *testing.T, a proxyAnswer, status int, reason string) {
	t.Helper()
	if a.Status != status || a.Reason != reason || a.BodyReason != reason {
		t.Errorf("got %d %q (body reason %q, message %q), want %d %q", a.Status, a.Reason, a.BodyReason, a.Message, status, reason)
	}
	retryable := status == http.StatusTooManyRequests || status == http.StatusServiceUnavailable
	if retryable != (a.RetryAfter != "") {
		t.Errorf("Retry-After %q on a %d answer", a.RetryAfter, status)
	}
}

// TestErrorTable produces each reason the proxy answers with itself (the
// table of docs/configuration.md: a status and a Kn-Forward-Error value)
// through a real situation, and checks that the refused request reached no
// destination.
func TestErrorTable(t *testing.T) {
	p := startProxy(t, "FORWARD_MAX_EVENT_BYTES=1024")
	dest := testproc.NewSink(t, nil)
	slow := testproc.NewSink(t, &testproc.SinkOptions{Respond: func(w http.ResponseWriter, r *http.Request, _ int) { <-r.Context().Done() }})
	closed := testproc.NewSink(t, nil)
	closedURL := closed.URL
	closed.Close()

	for _, tc := range []struct {
		name    string
		body    string
		headers []string
		status  int
		reason  string
	}{
		{name: "no header", status: 400, reason: "missing_destination"},
		{name: "relative", headers: []string{"Kn-Forward-To", "/events"}, status: 400, reason: "bad_destination"},
		{name: "not http", headers: []string{"Kn-Forward-To", "ftp://127.0.0.1/x"}, status: 400, reason: "bad_destination"},
		{name: "userinfo", headers: []string{"Kn-Forward-To", strings.Replace(dest.URL, "://", "://u:p@", 1)}, status: 400, reason: "bad_destination"},
		{name: "repeated", headers: []string{"Kn-Forward-To", dest.URL, "Kn-Forward-To", dest.URL}, status: 400, reason: "bad_destination"},
		{name: "bad timeout", headers: []string{"Kn-Forward-To", dest.URL, "Kn-Forward-Timeout", "10 minutes"}, status: 400, reason: "bad_request"},
		{name: "host not allowed", headers: []string{"Kn-Forward-To", "http://example.com/"}, status: 403, reason: "destination_denied"},
		{name: "cloud metadata", headers: []string{"Kn-Forward-To", "http://169.254.169.254/latest/meta-data/"}, status: 403, reason: "destination_denied"},
		{name: "loop through itself", headers: []string{"Kn-Forward-To", p.URL + "/"}, status: 403, reason: "loop_detected"},
		{name: "declared body too large", body: strings.Repeat("x", 1025), headers: []string{"Kn-Forward-To", dest.URL}, status: 413, reason: "body_too_large"},
		{name: "connection refused", headers: []string{"Kn-Forward-To", closedURL}, status: 502, reason: "unreachable"},
		{name: "deadline", headers: []string{"Kn-Forward-To", slow.URL, "Kn-Forward-Timeout", "PT0.3S"}, status: 504, reason: "timeout"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			checkAnswer(t, readAnswer(t, p.post(t, tc.body, tc.headers...)), tc.status, tc.reason)
		})
	}
	if n := dest.Count(); n != 0 {
		t.Errorf("refused requests reached the destination %d times", n)
	}
	if n := slow.Count(); n != 1 {
		t.Errorf("the slow destination saw %d calls, want 1", n)
	}
}

// TestDialTimeCheck names loopback through DNS ("localhost"): the host is
// allowed by name, but the resolved address is refused when dialed.
func TestDialTimeCheck(t *testing.T) {
	p := startProxy(t, "FORWARD_ALLOWED_CIDRS=", "FORWARD_ALLOWED_HOSTS=localhost")
	dest := testproc.NewSink(t, nil)
	url := strings.Replace(dest.URL, "127.0.0.1", "localhost", 1)
	checkAnswer(t, readAnswer(t, p.post(t, "", "Kn-Forward-To", url)), 403, "destination_denied")
	if dest.Count() != 0 {
		t.Errorf("a denied destination was reached")
	}
}

// TestAdmissionLimits holds calls at a slow destination and checks that the
// next one is refused at once with the right reason, reaching nothing.
func TestAdmissionLimits(t *testing.T) {
	for _, tc := range []struct {
		name   string
		env    []string
		hold   [][]string // headers of the held calls (destination added)
		next   []string   // headers of the refused call
		status int
		reason string
	}{
		{
			name: "4th call at a limit of 3",
			env:  []string{"FORWARD_MAX_INFLIGHT=3", "FORWARD_MAX_INFLIGHT_PER_DESTINATION=3", "FORWARD_MAX_INFLIGHT_PER_TENANT=3", "FORWARD_TENANT_RESERVE=0"},
			hold: [][]string{nil, nil, nil}, status: 503, reason: "overloaded",
		},
		{
			name: "destination full",
			env:  []string{"FORWARD_MAX_INFLIGHT=10", "FORWARD_MAX_INFLIGHT_PER_DESTINATION=2"},
			hold: [][]string{nil, nil}, status: 503, reason: "destination_busy",
		},
		{
			name: "tenant over its share",
			env:  []string{"FORWARD_MAX_INFLIGHT=10", "FORWARD_MAX_INFLIGHT_PER_TENANT=2", "FORWARD_TENANT_RESERVE=0"},
			hold: [][]string{{"Kn-Namespace", "greedy"}, {"Kn-Namespace", "greedy"}},
			next: []string{"Kn-Namespace", "greedy"}, status: 429, reason: "tenant_limited",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := startProxy(t, tc.env...)
			dest := newHeldSink(t)
			results := make(chan int, len(tc.hold))
			for _, h := range tc.hold {
				go func() {
					resp := p.post(t, "held", append([]string{"Kn-Forward-To", dest.URL}, h...)...)
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					results <- resp.StatusCode
				}()
			}
			eventually(t, 10*time.Second, "the destination holds every call", func() bool { return dest.Count() == len(tc.hold) })

			checkAnswer(t, readAnswer(t, p.post(t, "refused", append([]string{"Kn-Forward-To", dest.URL}, tc.next...)...)), tc.status, tc.reason)
			if n := dest.Count(); n != len(tc.hold) {
				t.Errorf("the refused call reached the destination: %d calls, want %d", n, len(tc.hold))
			}
			if tc.reason != "overloaded" {
				// Another destination, or another tenant, still gets through.
				other := testproc.NewSink(t, nil)
				resp := p.post(t, "other", "Kn-Forward-To", other.URL, "Kn-Namespace", "quiet")
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					t.Errorf("a call of another tenant to another destination got %d", resp.StatusCode)
				}
			}
			dest.Release()
			for range tc.hold {
				if s := <-results; s != http.StatusOK {
					t.Errorf("a held call ended with %d", s)
				}
			}
		})
	}
}
