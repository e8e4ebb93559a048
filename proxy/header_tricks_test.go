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
	"bufio"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"knative.dev/event-forwarding-proxy/delivery"
	"knative.dev/event-forwarding-proxy/proxy/proxytest"
)

// TestHeaderTricks: what a caller sends to make the proxy forward
// connection-scoped or proxy-only headers, or to strip the proxy's own
// loop mark, in both modes. Whatever the caller lists in Connection, the
// destination gets the proxy's CDN-Loop mark, no Kn-Forward-* header and
// no hop-by-hop header.
func TestHeaderTricks(t *testing.T) {
	tests := []struct {
		name    string
		header  http.Header
		h2c     bool
		absent  []string            // must not reach the destination
		present map[string][]string // must reach it exactly so
	}{{
		name: "Connection lists end-to-end headers and CDN-Loop",
		header: http.Header{
			"Connection": {"X-Keep, Kn-Namespace, CDN-Loop"}, "X-Keep": {"1"},
			"Kn-Namespace": {"team-a"}, "Cdn-Loop": {"other-cdn"}, "X-Other": {"kept"},
		},
		absent:  []string{"Connection", "X-Keep", "Kn-Namespace"},
		present: map[string][]string{"Cdn-Loop": {DefaultLoopID}, "X-Other": {"kept"}},
	}, {
		name:    "Connection lists a header in a second line and odd case",
		header:  http.Header{"Connection": {"keep-alive", " x-keep ,,"}, "X-Keep": {"1"}},
		absent:  []string{"Connection", "X-Keep"},
		present: map[string][]string{"Cdn-Loop": {DefaultLoopID}},
	}, {
		name: "caller's Kn-Forward-* headers",
		header: http.Header{
			"Kn-Forward-Error":         {"destination_denied"},
			"Kn-Forward-Authorization": {"Bearer token-for-the-proxy"},
			"Kn-Forward-Anything":      {"x"},
			"Kn-Forward-":              {"bare prefix"},
			"Authorization":            {"Bearer token-for-the-destination"},
		},
		absent:  []string{"Kn-Forward-Error", "Kn-Forward-Authorization", "Kn-Forward-Anything", "Kn-Forward-"},
		present: map[string][]string{"Authorization": {"Bearer token-for-the-destination"}},
	}, {
		name: "caller's Kn-Forward-* headers from an h2c caller (lower-case on the wire)",
		h2c:  true,
		header: http.Header{
			"Kn-Forward-Error":         {"destination_denied"},
			"Kn-Forward-Authorization": {"Bearer token-for-the-proxy"},
			"Kn-Forward-Anything":      {"x"},
		},
		absent:  []string{"Kn-Forward-Error", "Kn-Forward-Authorization", "Kn-Forward-Anything"},
		present: map[string][]string{"Cdn-Loop": {DefaultLoopID}},
	}, {
		name: "Connection lists a Kn-Forward-* header",
		header: http.Header{
			"Connection": {"Kn-Forward-Anything"}, "Kn-Forward-Anything": {"x"},
		},
		absent: []string{"Connection", "Kn-Forward-Anything"},
	}, {
		name: "hop-by-hop headers",
		header: http.Header{
			"Keep-Alive": {"timeout=5"}, "Te": {"gzip"}, "Proxy-Authorization": {"Basic eDp5"},
			"Proxy-Authenticate": {"Basic"}, "Proxy-Connection": {"keep-alive"}, "Upgrade": {"websocket"},
		},
		absent: []string{"Keep-Alive", "Te", "Proxy-Authorization", "Proxy-Authenticate", "Proxy-Connection", "Upgrade"},
	}, {
		name:    "Connection lists the framing headers",
		header:  http.Header{"Connection": {"Content-Length, Transfer-Encoding"}},
		absent:  []string{"Connection"},
		present: map[string][]string{"Content-Length": {"5"}},
	}}
	for _, tt := range tests {
		for _, async := range []bool{false, true} {
			name := tt.name + "/sync"
			if async {
				name = tt.name + "/async"
			}
			t.Run(name, func(t *testing.T) {
				// h2c as well: an h2c caller is spoken h2c to (see
				// TestForwardProtocol).
				dest := proxytest.NewH2CDestination(t, nil)
				tp := newTestProxy(t, nil)
				req := tp.newRequest(t, dest.URL, strings.NewReader("event"))
				for k, v := range tt.header {
					req.Header[k] = v
				}
				if async {
					req.Header.Set(delivery.HeaderPrefer, delivery.PreferRespondAsync)
				}
				client := h1Client(t)
				if tt.h2c {
					client = h2cClient(t)
				}
				resp, body := do(t, client, req)
				if want := map[bool]int{false: http.StatusOK, true: http.StatusAccepted}[async]; resp.StatusCode != want {
					t.Fatalf("status = %d, want %d; body %q", resp.StatusCode, want, body)
				}
				got := dest.Next(t)
				if string(got.Body) != "event" {
					t.Errorf("the destination got body %q, want %q", got.Body, "event")
				}
				for _, k := range tt.absent {
					if v, ok := got.Header[http.CanonicalHeaderKey(k)]; ok {
						t.Errorf("%s: %q reached the destination", k, v)
					}
				}
				for k := range got.Header {
					if strings.HasPrefix(strings.ToLower(k), "kn-forward-") {
						t.Errorf("%s reached the destination", k)
					}
				}
				if v := got.Header.Values("Cdn-Loop"); !strings.Contains(strings.Join(v, ","), DefaultLoopID) {
					t.Errorf("CDN-Loop %q at the destination lacks the proxy's mark", v)
				}
				for k, want := range tt.present {
					if diff := cmp.Diff(want, got.Header.Values(k)); diff != "" {
						t.Errorf("%s at the destination (-want +got):\n%s", k, diff)
					}
				}
			})
		}
	}
}

// TestUpgradeNotTunnelled: the proxy never turns a call into a raw tunnel
// (101 Switching Protocols), whether the caller asks for an upgrade or a
// destination switches protocols unasked: a tunnel would carry bytes past
// FORWARD_MAX_EVENT_BYTES, the body idle timeout and every header check.
func TestUpgradeNotTunnelled(t *testing.T) {
	tests := []struct {
		name     string
		request  string // after the request line and Kn-Forward-To
		switchTo string // the destination's 101 answer
	}{
		{name: "caller asks for websocket, destination agrees",
			request:  "Connection: Upgrade\r\nUpgrade: websocket\r\n\r\n",
			switchTo: "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n"},
		{name: "destination switches to websocket unasked",
			request:  "Content-Length: 1\r\n\r\ne",
			switchTo: "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n"},
		{name: "destination switches unasked, naming no protocol",
			request:  "Content-Length: 1\r\n\r\ne",
			switchTo: "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\n\r\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tunnelled := make(chan int64, 1)
			dest := proxytest.NewDestination(t, func(w http.ResponseWriter, r *http.Request, _ int) {
				conn, brw, err := http.NewResponseController(w).Hijack()
				if err != nil {
					return
				}
				defer conn.Close()
				_, _ = io.WriteString(conn, tt.switchTo)
				_ = conn.SetReadDeadline(time.Now().Add(2 * time.Second))
				n, _ := io.Copy(io.Discard, brw)
				tunnelled <- n
			})
			tp := newTestProxy(t, nil) // FORWARD_MAX_EVENT_BYTES=1024
			conn, err := net.Dial("tcp", strings.TrimPrefix(tp.URL, "http://"))
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
			_, _ = io.WriteString(conn, "POST / HTTP/1.1\r\nHost: proxy\r\nKn-Forward-To: "+dest.URL+"\r\n"+tt.request)
			resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
			if err != nil {
				t.Fatalf("no answer: %v", err)
			}
			resp.Body.Close()
			if resp.StatusCode == http.StatusSwitchingProtocols {
				// Show what the tunnel lets through: far more than an event.
				_, _ = conn.Write(make([]byte, 64<<10))
				_ = conn.Close()
				var n int64
				select {
				case n = <-tunnelled:
				case <-time.After(5 * time.Second):
				}
				t.Fatalf("the proxy answered 101 and tunnelled %d bytes to the destination (limit 1024)", n)
			}
			if resp.Header.Get(delivery.HeaderForwardError) == "" || resp.StatusCode < 400 {
				t.Errorf("status = %d %q, want the proxy's own refusal", resp.StatusCode, resp.Header.Get(delivery.HeaderForwardError))
			}
		})
	}
}

// TestSpoofedLoopMark: a caller that writes the proxy's identity into
// CDN-Loop, however spelt and by whatever protocol or mode, gets 403
// loop_detected and nothing is forwarded.
func TestSpoofedLoopMark(t *testing.T) {
	dest := proxytest.NewDestination(t, nil)
	tp := newTestProxy(t, nil)
	tests := []struct {
		name    string
		cdnLoop []string
		h2c     bool
		async   bool
	}{
		{name: "upper case, with parameters", cdnLoop: []string{"KNATIVE-EVENT-FORWARDING-PROXY; v=2"}},
		{name: "last of several lines", cdnLoop: []string{"cdn-a", "cdn-b, " + DefaultLoopID}},
		{name: "async", cdnLoop: []string{DefaultLoopID}, async: true},
		{name: "h2c caller", cdnLoop: []string{DefaultLoopID}, h2c: true},
		{name: "h2c caller, async", cdnLoop: []string{"x, " + DefaultLoopID}, h2c: true, async: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := tp.newRequest(t, dest.URL, strings.NewReader("e"))
			req.Header["Cdn-Loop"] = tt.cdnLoop
			if tt.async {
				req.Header.Set(delivery.HeaderPrefer, delivery.PreferRespondAsync)
			}
			client := h1Client(t)
			if tt.h2c {
				client = h2cClient(t)
			}
			resp, body := do(t, client, req)
			wantProxyError(t, resp, body, ReasonLoopDetected)
			if n := dest.Count(); n != 0 {
				t.Errorf("the destination received %d requests, want 0", n)
			}
		})
	}
}
