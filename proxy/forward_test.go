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
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"knative.dev/event-forwarding-proxy/proxy/proxytest"
)

// event is a binary body with the bytes a careless proxy would mangle.
var event = []byte("{\"data\":\"\x00\x01\xff\r\n\"}\r\n")

func TestForwardSync(t *testing.T) {
	reply := []byte(`{"specversion":"1.0","id":"reply-1"}`)
	dest := proxytest.NewDestination(t, func(w http.ResponseWriter, _ *http.Request, _ int) {
		h := w.Header()
		h.Set("Ce-Id", "reply-1")
		h.Set("Ce-Type", "dev.knative.reply")
		h.Set("Ce-Source", "/sink")
		h.Set("Ce-Specversion", "1.0")
		h.Set("Content-Type", "application/cloudevents+json")
		h.Add("X-Reply", "a")
		h.Add("X-Reply", "b")
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write(reply)
	})
	tp := newTestProxy(t, nil)
	client := h1Client(t)

	for _, method := range []string{http.MethodPost, http.MethodPut} {
		t.Run(method, func(t *testing.T) {
			req := tp.newRequest(t, dest.URL+"/a/b%2Fc?x=1&y=a%20b", bytes.NewReader(event))
			req.Method = method
			endToEnd := http.Header{
				"Authorization":   {"Bearer destination-token"},
				"Ce-Id":           {"e-1"},
				"Ce-Source":       {"/pingsource/ns/p"},
				"Ce-Type":         {"dev.knative.sources.ping"},
				"Ce-Specversion":  {"1.0"},
				"Content-Type":    {"application/octet-stream"},
				"X-Forwarded-For": {"10.1.2.3"},
				"X-Multi":         {"first", "second"},
				"User-Agent":      {"sender/1.0"},
				"Prefer":          {"return=minimal"},
				"Kn-Namespace":    {"team-a"},
			}
			for k, v := range endToEnd {
				req.Header[k] = v
			}
			req.Header.Set("Kn-Forward-Timeout", "PT5S")
			req.Header.Set("Kn-Forward-Retry", "3")
			req.Header.Set("Kn-Forward-Authorization", "Bearer proxy-token")
			req.Header.Set("Kn-Forward-Custom", "x")
			req.Header.Set("Connection", "X-Hop")
			req.Header.Set("X-Hop", "connection-scoped")
			req.Header.Set("Keep-Alive", "timeout=5")
			req.Header.Set("Proxy-Authorization", "Basic eDp5")
			req.Header.Set("Proxy-Connection", "keep-alive")
			req.Header.Set("CDN-Loop", "other-cdn")

			resp, body := do(t, client, req)
			got := dest.Next(t)

			// What reached the destination.
			if got.Method != method {
				t.Errorf("method = %q, want %q", got.Method, method)
			}
			if want := "/a/b%2Fc?x=1&y=a%20b"; got.RequestURI != want {
				t.Errorf("request URI = %q, want %q", got.RequestURI, want)
			}
			if want := strings.TrimPrefix(dest.URL, "http://"); got.Host != want {
				t.Errorf("Host = %q, want the destination's %q", got.Host, want)
			}
			if !bytes.Equal(got.Body, event) {
				t.Errorf("body = %q, want %q", got.Body, event)
			}
			for k, v := range endToEnd {
				if diff := cmp.Diff(v, got.Header.Values(k)); diff != "" {
					t.Errorf("header %s at the destination (-want +got):\n%s", k, diff)
				}
			}
			for k := range got.Header {
				if strings.HasPrefix(k, "Kn-Forward-") {
					t.Errorf("%s reached the destination", k)
				}
			}
			for _, k := range []string{"Connection", "X-Hop", "Keep-Alive", "Proxy-Authorization", "Proxy-Connection"} {
				if v, ok := got.Header[k]; ok {
					t.Errorf("hop-by-hop %s: %q reached the destination", k, v)
				}
			}
			if diff := cmp.Diff([]string{"other-cdn", DefaultLoopID}, got.Header.Values("CDN-Loop")); diff != "" {
				t.Errorf("CDN-Loop at the destination (-want +got):\n%s", diff)
			}

			// What came back.
			if resp.StatusCode != http.StatusCreated {
				t.Errorf("status = %d, want 201", resp.StatusCode)
			}
			if !bytes.Equal(body, reply) {
				t.Errorf("reply body = %q, want %q", body, reply)
			}
			wantReply := http.Header{
				"Ce-Id": {"reply-1"}, "Ce-Type": {"dev.knative.reply"}, "Ce-Source": {"/sink"},
				"Ce-Specversion": {"1.0"}, "Content-Type": {"application/cloudevents+json"},
				"X-Reply": {"a", "b"},
			}
			for k, v := range wantReply {
				if diff := cmp.Diff(v, resp.Header.Values(k)); diff != "" {
					t.Errorf("reply header %s (-want +got):\n%s", k, diff)
				}
			}
			if v := resp.Header.Get("Kn-Forward-Error"); v != "" {
				t.Errorf("the destination's answer carries Kn-Forward-Error %q", v)
			}
		})
	}
}

// TestForwardFailures: calls that get no answer from their destination.
func TestForwardFailures(t *testing.T) {
	closedURL := "http://" + proxytest.NewRefusingAddr(t) + "/"

	t.Run("unreachable: closed port", func(t *testing.T) {
		tp := newTestProxy(t, nil)
		resp, body := do(t, h1Client(t), tp.newRequest(t, closedURL, strings.NewReader("e")))
		wantProxyError(t, resp, body, ReasonUnreachable)
	})

	t.Run("timeout: Kn-Forward-Timeout passes", func(t *testing.T) {
		hold := proxytest.NewHold(t)
		dest := proxytest.NewDestination(t, hold.Reply)
		tp := newTestProxy(t, nil)
		req := tp.newRequest(t, dest.URL, strings.NewReader("e"))
		req.Header.Set("Kn-Forward-Timeout", "PT0.2S")
		start := time.Now()
		resp, body := do(t, h1Client(t), req)
		wantProxyError(t, resp, body, ReasonTimeout)
		if took := time.Since(start); took < 200*time.Millisecond || took > 4*time.Second {
			t.Errorf("answered after %s, want about 200ms", took)
		}
		hold.WaitCancelled(t)
		proxytest.Eventually(t, 5*time.Second, func() bool { return tp.Limiter.Inflight() == 0 }, "the slot was not released")
	})

	t.Run("timeout: FORWARD_MAX_TIMEOUT caps Kn-Forward-Timeout", func(t *testing.T) {
		hold := proxytest.NewHold(t)
		dest := proxytest.NewDestination(t, hold.Reply)
		tp := newTestProxy(t, map[string]string{"FORWARD_MAX_TIMEOUT": "200ms"})
		req := tp.newRequest(t, dest.URL, strings.NewReader("e"))
		req.Header.Set("Kn-Forward-Timeout", "PT1H")
		resp, body := do(t, h1Client(t), req)
		wantProxyError(t, resp, body, ReasonTimeout)
		hold.WaitCancelled(t)
	})

	t.Run("destination_denied at dial time: a name that resolves to loopback", func(t *testing.T) {
		dest := proxytest.NewDestination(t, nil)
		_, port, _ := net.SplitHostPort(strings.TrimPrefix(dest.URL, "http://"))
		tp := newTestProxy(t, map[string]string{"FORWARD_ALLOWED_CIDRS": "", "FORWARD_ALLOWED_HOSTS": "localhost"})
		resp, body := do(t, h1Client(t), tp.newRequest(t, "http://localhost:"+port+"/", strings.NewReader("e")))
		wantProxyError(t, resp, body, ReasonDestinationDenied)
		if n := dest.Count(); n != 0 {
			t.Errorf("the destination received %d requests, want 0", n)
		}
	})
}

// TestForwardCallerCancels: a caller that goes away mid-call cancels the
// destination's request and gives its slot back.
func TestForwardCallerCancels(t *testing.T) {
	hold := proxytest.NewHold(t)
	dest := proxytest.NewDestination(t, hold.Reply)
	tp := newTestProxy(t, nil)
	ctx, cancel := context.WithCancel(t.Context())
	req := tp.newRequest(t, dest.URL, strings.NewReader("e")).WithContext(ctx)
	res := goDo(h1Client(t), req)
	dest.Next(t)
	if got := tp.Limiter.Inflight(); got != 1 {
		t.Fatalf("Inflight() = %d during the call, want 1", got)
	}
	cancel()
	hold.WaitCancelled(t)
	if r := await(t, res); r.err == nil {
		t.Errorf("the cancelled call returned %d", r.resp.StatusCode)
	}
	proxytest.Eventually(t, 5*time.Second, func() bool { return tp.Limiter.Inflight() == 0 },
		"the slot of a cancelled call was not released")
}

// TestForwardDestinationURL: the destination URL is requested as named,
// whatever path the caller used to reach the proxy.
func TestForwardDestinationURL(t *testing.T) {
	dest := proxytest.NewDestination(t, nil)
	tp := newTestProxy(t, nil)
	client := h1Client(t)
	tests := []struct {
		name, suffix, want string
	}{
		{name: "no path", suffix: "", want: "/"},
		{name: "escaped slash and space", suffix: "/a/b%2Fc?x=1&y=a%20b", want: "/a/b%2Fc?x=1&y=a%20b"},
		{name: "semicolons in the query", suffix: "/?a=1;b=2", want: "/?a=1;b=2"},
		{name: "non-ASCII path", suffix: "/p/%E2%82%AC?q=%2B", want: "/p/%E2%82%AC?q=%2B"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := tp.newRequest(t, dest.URL+tt.suffix, strings.NewReader("e"))
			req.URL.Path = "/some/proxy/path"
			if resp, _ := do(t, client, req); resp.StatusCode != http.StatusOK {
				t.Fatalf("status = %d, want 200", resp.StatusCode)
			}
			if got := dest.Next(t).RequestURI; got != tt.want {
				t.Errorf("request URI = %q, want %q", got, tt.want)
			}
		})
	}
}

// TestRedirectsNotFollowed: a redirect is the destination's answer, passed
// back in sync mode and final in async mode; its target is never called.
func TestRedirectsNotFollowed(t *testing.T) {
	target := proxytest.NewDestination(t, nil)
	dest := proxytest.NewDestination(t, func(w http.ResponseWriter, r *http.Request, _ int) {
		http.Redirect(w, r, target.URL+"/elsewhere", http.StatusTemporaryRedirect)
	})
	tp := newTestProxy(t, nil)
	client := h1Client(t)
	client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

	resp, _ := do(t, client, tp.newRequest(t, dest.URL, strings.NewReader("e")))
	if resp.StatusCode != http.StatusTemporaryRedirect || resp.Header.Get("Location") != target.URL+"/elsewhere" {
		t.Errorf("sync answer = %d Location %q, want the destination's 307", resp.StatusCode, resp.Header.Get("Location"))
	}

	req := tp.newRequest(t, dest.URL, strings.NewReader("e"))
	req.Header.Set("Prefer", "respond-async")
	req.Header.Set("Kn-Forward-Retry", "3")
	if resp, _ := do(t, client, req); resp.StatusCode != http.StatusAccepted {
		t.Fatalf("async status = %d, want 202", resp.StatusCode)
	}
	proxytest.Eventually(t, 5*time.Second, func() bool { return tp.Limiter.Inflight() == 0 }, "the delivery did not end")
	if n := dest.Count(); n != 2 {
		t.Errorf("the destination received %d requests, want 2 (one sync, one async: 3xx is final)", n)
	}
	if n := target.Count(); n != 0 {
		t.Errorf("the redirect target received %d requests, want 0", n)
	}
}

// TestForwardAddsNoContentType: an answer without Content-Type reaches the
// caller without one; net/http's server would otherwise sniff the body
// and add text/html or text/plain.
func TestForwardAddsNoContentType(t *testing.T) {
	dest := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header()["Content-Type"] = nil
		_, _ = io.WriteString(w, "<html>not a type the destination named")
	}))
	t.Cleanup(dest.Close)
	tp := newTestProxy(t, nil)
	for _, tc := range []struct {
		name   string
		client *http.Client
	}{{"HTTP/1.1 caller", h1Client(t)}, {"h2c caller", h2cClient(t)}} {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := do(t, tc.client, tp.newRequest(t, dest.URL, strings.NewReader("e")))
			if resp.StatusCode != http.StatusOK || !strings.HasPrefix(string(body), "<html>") {
				t.Fatalf("status %d, body %q; want the destination's answer", resp.StatusCode, body)
			}
			if ct, ok := resp.Header["Content-Type"]; ok {
				t.Errorf("Content-Type %q reached the caller, want none", ct)
			}
		})
	}
}

// TestHalfClosedCallerGetsNoFakeAnswer: a caller that sends its whole
// request and then closes its side (as nc and some balancers do) looks
// gone to net/http, which cancels the call; it must then read the end of
// the connection, never net/http's 200 with no body, which it would take
// for its event delivered.
func TestHalfClosedCallerGetsNoFakeAnswer(t *testing.T) {
	hold := proxytest.NewHold(t)
	dest := proxytest.NewDestination(t, hold.Reply)
	tp := newTestProxy(t, nil)
	nc, err := net.DialTimeout("tcp", strings.TrimPrefix(tp.URL, "http://"), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = nc.Close() })
	req := "POST / HTTP/1.1\r\nHost: proxy\r\nKn-Forward-To: " + dest.URL + "\r\nContent-Length: 1\r\n\r\ne"
	if _, err := nc.Write([]byte(req)); err != nil {
		t.Fatal(err)
	}
	if err := nc.(*net.TCPConn).CloseWrite(); err != nil {
		t.Fatal(err)
	}
	_ = nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	got, err := io.ReadAll(nc)
	if len(got) > 0 {
		t.Errorf("the half-closed caller read %q (%v), want the connection's end and no answer", got, err)
	}
	proxytest.Eventually(t, 5*time.Second, func() bool { return tp.Limiter.Inflight() == 0 },
		"the call's slot released")
}
