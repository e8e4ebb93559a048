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
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"knative.dev/event-forwarding-proxy/proxy/proxytest"
)

// noRedirects is a client that returns a redirect instead of following it.
var noRedirects = &http.Client{
	Transport:     &http.Transport{Proxy: nil},
	CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
}

// forward sends an event through p to dest, async when asked, without
// following a redirect the proxy passes back.
func forward(t *testing.T, p *proc, dest string, async bool) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(ctxFor(t, 10*time.Second), http.MethodPost, p.URL, strings.NewReader("e"))
	if err != nil {
		t.Fatal(err)
	}
	req.Header["Kn-Forward-To"] = []string{dest}
	if async {
		req.Header.Set("Prefer", "respond-async")
	}
	resp, err := noRedirects.Do(req)
	if err != nil {
		t.Fatalf("POST through the proxy: %v", err)
	}
	return resp
}

// TestHostileDestinationsBinary: the real binary, configured as in
// production (no FORWARD_ALLOWED_CIDRS), with a host pattern that names
// loopback; a canary on every loopback address with the port each request
// names sees no TCP connection. The full table is proxy's
// TestHostileDestinations.
func TestHostileDestinationsBinary(t *testing.T) {
	canary := proxytest.NewCanary(t, "127.0.0.2")
	p := startProxy(t, "FORWARD_ALLOWED_CIDRS=", "FORWARD_ALLOWED_HOSTS=localhost,*.svc.cluster.local")
	at := canary.URL
	tests := []struct {
		name   string
		dest   string
		async  bool
		status int
		reason string
	}{
		{name: "127.0.0.1", dest: at("127.0.0.1"), status: 403, reason: "destination_denied"},
		{name: "localhost (allowed name, loopback address)", dest: at("localhost"), status: 403, reason: "destination_denied"},
		{name: "::1", dest: at("::1"), status: 403, reason: "destination_denied"},
		{name: "IPv4-mapped", dest: at("::ffff:127.0.0.1"), status: 403, reason: "destination_denied"},
		{name: "decimal", dest: at("2130706433"), status: 403, reason: "destination_denied"},
		{name: "hexadecimal", dest: at("0x7f000001"), status: 403, reason: "destination_denied"},
		{name: "short form", dest: at("127.1"), status: 403, reason: "destination_denied"},
		{name: "octal", dest: at("0177.0.0.1"), status: 403, reason: "destination_denied"},
		{name: "0.0.0.0", dest: at("0.0.0.0"), status: 403, reason: "destination_denied"},
		{name: "::", dest: at("::"), status: 403, reason: "destination_denied"},
		{name: "NAT64", dest: at("64:ff9b::7f00:1"), status: 403, reason: "destination_denied"},
		{name: "6to4", dest: at("2002:7f00:1::"), status: 403, reason: "destination_denied"},
		{name: "Teredo", dest: at("2001:0:4136:e378:8000:63bf:80ff:fffe"), status: 403, reason: "destination_denied"},
		{name: "userinfo naming an allowed host", dest: "http://sink.ns.svc.cluster.local@" + canary.HostPort("127.0.0.1") + "/", status: 400, reason: "bad_destination"},
		{name: "Kubernetes API", dest: at("kubernetes.default.svc.cluster.local"), status: 403, reason: "destination_denied"},
		{name: "cloud metadata", dest: "http://169.254.169.254/latest/meta-data/", status: 403, reason: "destination_denied"},
		{name: "async: 127.0.0.1", dest: at("127.0.0.1"), async: true, status: 403, reason: "destination_denied"},
		{name: "async: localhost is accepted and never dialed", dest: at("localhost"), async: true, status: 202},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			failed := strings.Count(p.Logs.String(), "Async delivery failed")
			before := canary.Accepted()
			resp := forward(t, p, tt.dest, tt.async)
			if tt.reason != "" {
				checkAnswer(t, readAnswer(t, resp), tt.status, tt.reason)
			} else {
				resp.Body.Close()
				if resp.StatusCode != tt.status {
					t.Fatalf("status = %d, want %d", resp.StatusCode, tt.status)
				}
				eventually(t, 10*time.Second, "the async delivery fails", func() bool {
					return strings.Count(p.Logs.String(), "Async delivery failed") > failed
				})
			}
			canary.Settle(t)
			if n := canary.Accepted() - before; n != 0 {
				t.Errorf("the canary accepted %d connections, want 0", n)
			}
		})
	}
}

// TestRedirectsToHostileNotFollowedBinary: an allowed destination (on
// 127.0.0.2, the only allowed range) answering a redirect to loopback or
// to another allowed address: the binary passes the redirect back (sync) or
// takes it as final (async) and never connects to its target.
func TestRedirectsToHostileNotFollowedBinary(t *testing.T) {
	canary := proxytest.NewCanary(t, "127.0.0.2")
	var hits atomic.Int64
	redirector := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		_, _ = io.Copy(io.Discard, r.Body)
		http.Redirect(w, r, r.URL.Query().Get("to"), http.StatusTemporaryRedirect)
	}))
	redirector.Listener.Close()
	redirector.Listener = proxytest.ListenSamePort(t, "127.0.0.2")[0]
	redirector.Start()
	t.Cleanup(redirector.Close)
	p := startProxy(t, "FORWARD_ALLOWED_CIDRS=127.0.0.2/32", "FORWARD_ALLOWED_HOSTS=localhost")

	for _, tt := range []struct {
		name  string
		to    string
		async bool
	}{
		{name: "sync, to 127.0.0.1", to: canary.URL("127.0.0.1")},
		{name: "sync, to localhost", to: canary.URL("localhost")},
		{name: "sync, to an allowed address", to: canary.URL("127.0.0.2")},
		{name: "async, to 127.0.0.1", to: canary.URL("127.0.0.1"), async: true},
		{name: "async, to an allowed address", to: canary.URL("127.0.0.2"), async: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			before, called := canary.Accepted(), hits.Load()
			failed := strings.Count(p.Logs.String(), "Async delivery failed")
			resp := forward(t, p, redirector.URL+"/?to="+url.QueryEscape(tt.to), tt.async)
			resp.Body.Close()
			if tt.async {
				if resp.StatusCode != http.StatusAccepted {
					t.Fatalf("status = %d, want 202", resp.StatusCode)
				}
				// 3xx is final: one attempt, logged as failed with its status.
				eventually(t, 10*time.Second, "the async delivery ends", func() bool {
					return strings.Count(p.Logs.String(), "Async delivery failed") > failed
				})
			} else if resp.StatusCode != http.StatusTemporaryRedirect || resp.Header.Get("Location") != tt.to {
				t.Errorf("got %d Location %q, want the destination's 307 to %q", resp.StatusCode, resp.Header.Get("Location"), tt.to)
			}
			if n := hits.Load() - called; n != 1 {
				t.Errorf("the redirecting destination was called %d times, want 1", n)
			}
			canary.Settle(t)
			if n := canary.Accepted() - before; n != 0 {
				t.Errorf("the redirect target accepted %d connections, want 0", n)
			}
		})
	}
	if !strings.Contains(p.Logs.String(), `"status":`+strconv.Itoa(http.StatusTemporaryRedirect)) {
		t.Errorf("no async failure logged with status 307")
	}
}
