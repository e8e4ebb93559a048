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

	"knative.dev/event-forwarding-proxy/delivery"
	"knative.dev/event-forwarding-proxy/proxy/proxytest"
)

// TestRequestSmuggling writes ambiguously framed requests on raw TCP
// connections. Each is refused with 400 and nothing is dialed; the shapes
// Go's server accepts (bare LF, Content-Length with Transfer-Encoding,
// Transfer-Encoding in HTTP/1.0) are refused by the framing listener and
// the request guard, with the proxy's reason and a closed connection.
func TestRequestSmuggling(t *testing.T) {
	canary := proxytest.NewCanary(t)
	dest := canary.URL("127.0.0.1")
	fp := newFaultProxy(t, nil, nil)
	line := "POST / HTTP/1.1\r\nHost: proxy\r\nKn-Forward-To: " + dest + "\r\n"
	tests := []struct {
		name   string
		raw    string
		status int
		reason Reason // "" when Go's server refuses it itself
	}{
		{name: "Content-Length then Transfer-Encoding", raw: line + "Content-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n", status: 400, reason: ReasonBadRequest},
		{name: "Transfer-Encoding then Content-Length", raw: line + "Transfer-Encoding: chunked\r\nContent-Length: 4\r\n\r\n3\r\nabc\r\n0\r\n\r\n", status: 400, reason: ReasonBadRequest},
		{name: "Content-Length and Transfer-Encoding, async", raw: line + "Prefer: respond-async\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n", status: 400, reason: ReasonBadRequest},
		{name: "Transfer-Encoding folded onto a second line", raw: line + "Content-Length: 3\r\nTransfer-Encoding:\r\n chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n", status: 400, reason: ReasonBadRequest},
		{name: "Transfer-Encoding in lower case", raw: line + "content-length: 3\r\ntransfer-encoding: CHUNKED\r\n\r\n3\r\nabc\r\n0\r\n\r\n", status: 400, reason: ReasonBadRequest},
		{name: "bare LF everywhere", raw: "POST / HTTP/1.1\nHost: proxy\nKn-Forward-To: " + dest + "\nContent-Length: 3\n\nabc", status: 400, reason: ReasonBadRequest},
		{name: "bare LF on one header line", raw: line + "X-A: b\nContent-Length: 3\r\n\r\nabc", status: 400, reason: ReasonBadRequest},
		{name: "bare LF ends the head", raw: line + "Content-Length: 3\r\n\nabc", status: 400, reason: ReasonBadRequest},
		{name: "bare LF after the request line", raw: "POST / HTTP/1.1\nHost: proxy\r\nKn-Forward-To: " + dest + "\r\nContent-Length: 3\r\n\r\nabc", status: 400, reason: ReasonBadRequest},
		{name: "HTTP/1.0 with Transfer-Encoding", raw: "POST / HTTP/1.0\r\nHost: proxy\r\nConnection: keep-alive\r\nKn-Forward-To: " + dest + "\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n", status: 400, reason: ReasonBadRequest},
		{name: "conflicting Content-Length lines", raw: line + "Content-Length: 3\r\nContent-Length: 4\r\n\r\nabcd", status: 400},
		{name: "conflicting Content-Length list", raw: line + "Content-Length: 3, 4\r\n\r\nabcd", status: 400},
		{name: "signed Content-Length", raw: line + "Content-Length: +3\r\n\r\nabc", status: 400},
		{name: "bare CR", raw: line + "X-A: b\rContent-Length: 3\r\n\r\nabc", status: 400},
		{name: "space before the colon", raw: line + "Transfer-Encoding : chunked\r\nContent-Length: 3\r\n\r\nabc", status: 400},
		{name: "CONNECT", raw: "CONNECT " + canary.HostPort("127.0.0.1") + " HTTP/1.1\r\nHost: " + canary.HostPort("127.0.0.1") + "\r\nKn-Forward-To: " + dest + "\r\n\r\n", status: 400, reason: ReasonBadRequest},
		{name: "websocket upgrade", raw: "GET / HTTP/1.1\r\nHost: proxy\r\nKn-Forward-To: " + dest + "\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n", status: 400, reason: ReasonBadRequest},
		{name: "h2c upgrade", raw: "POST / HTTP/1.1\r\nHost: proxy\r\nKn-Forward-To: " + dest + "\r\nConnection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAAQAAP__\r\nContent-Length: 0\r\n\r\n", status: 400, reason: ReasonBadRequest},
		{name: "upgrade, async", raw: "POST / HTTP/1.1\r\nHost: proxy\r\nKn-Forward-To: " + dest + "\r\nPrefer: respond-async\r\nConnection: keep-alive, upgrade\r\nUpgrade: websocket\r\nContent-Length: 0\r\n\r\n", status: 400, reason: ReasonBadRequest},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := canary.Accepted()
			a := rawSend(t, fp.Addr, tt.raw)
			if tt.reason != "" {
				wantProxyError(t, a.resp, a.body, tt.reason)
			} else if a.resp.StatusCode != tt.status {
				t.Errorf("status = %d, want %d; body %q", a.resp.StatusCode, tt.status, a.body)
			}
			if n := canary.Accepted() - before; n != 0 {
				t.Errorf("the destination accepted %d connections, want 0", n)
			}
			if strings.Contains(string(a.body), "framing") && !a.closed {
				t.Errorf("the connection stayed open after ambiguous framing")
			}
		})
	}
}

// TestSmugglingAfterAGoodRequest: the framing listener follows bodies, so a
// smuggled request behind a well-framed one on the same connection (sent
// in one write, as a front proxy would pipeline it) is still refused.
func TestSmugglingAfterAGoodRequest(t *testing.T) {
	canary := proxytest.NewCanary(t)
	dest := canary.URL("127.0.0.1")
	fp := newFaultProxy(t, nil, nil)
	line := "POST / HTTP/1.1\r\nHost: proxy\r\nKn-Forward-To: " + dest + "\r\n"
	bad := line + "Content-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n"
	tests := []struct {
		name, first string
	}{
		{name: "after a Content-Length body", first: line + "Content-Length: 5\r\n\r\nhello"},
		{name: "after a chunked body with extensions and trailers", first: line + "Transfer-Encoding: chunked\r\n\r\n5;ext=1\r\nhello\r\n1\r\n\n\r\n0\r\nX-Trailer: y\r\n\r\n"},
		{name: "after a body that looks like a head", first: line + "Content-Length: 21\r\n\r\nGET / HTTP/1.1\n\n\r\n\r\n"},
		{name: "after a request without a body", first: "GET /x HTTP/1.1\r\nHost: proxy\r\nKn-Forward-To: " + dest + "\r\n\r\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := canary.Accepted()
			conn := dialRaw(t, fp.Addr)
			if _, err := io.WriteString(conn, tt.first+bad); err != nil {
				t.Fatal(err)
			}
			first, second := readAnswers(t, conn, 2)
			if first.StatusCode != http.StatusOK || string(first.body) != "canary reached" {
				t.Errorf("the well-framed request got %d %q, want 200 from the destination", first.StatusCode, first.body)
			}
			if second.StatusCode != http.StatusBadRequest || second.Header.Get(delivery.HeaderForwardError) != string(ReasonBadRequest) {
				t.Errorf("the smuggled request got %d %q, want 400 bad_request", second.StatusCode, second.Header.Get(delivery.HeaderForwardError))
			}
			if n := canary.Accepted() - before; n > 1 {
				t.Errorf("the destination accepted %d connections, want 1 (the good request)", n)
			}
		})
	}
}

// TestFramingLeavesGoodRequestsAlone: well-framed requests of every kind,
// many on one connection, all reach the destination unchanged.
func TestFramingLeavesGoodRequestsAlone(t *testing.T) {
	dest := proxytest.NewDestination(t, nil)
	fp := newFaultProxy(t, map[string]string{"FORWARD_MAX_EVENT_BYTES": "1048576"}, nil)
	line := "POST / HTTP/1.1\r\nHost: proxy\r\nKn-Forward-To: " + dest.URL + "\r\n"
	big := strings.Repeat("0123456789abcdef", 8<<10)
	requests := []struct{ raw, body string }{
		{raw: line + "Content-Length: 5\r\n\r\nhello", body: "hello"},
		{raw: line + "Transfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n", body: "hello"},
		{raw: line + "Content-Length: 0\r\n\r\n", body: ""},
		{raw: line + "Content-Length: 12\r\n\r\nline\nline\r\n\n", body: "line\nline\r\n\n"},
		{raw: line + "Transfer-Encoding: chunked\r\n\r\n" + "20000\r\n" + big + "\r\n0\r\n\r\n", body: big},
		{raw: line + "Content-Length: 131072\r\n\r\n" + big, body: big},
		{raw: line + "Content-Length: 3\r\nContent-Length: 3\r\n\r\nabc", body: "abc"},
		{raw: line + "Transfer-Encoding: chunked\r\n\r\n3 \r\nabc\r\n0\r\nTrailer-A: 1\r\n\r\n", body: "abc"},
	}
	conn := dialRaw(t, fp.Addr)
	var all bytes.Buffer
	for _, r := range requests {
		all.WriteString(r.raw)
	}
	// In pieces of 1 to 61 bytes for the first pass, all at once for the
	// second.
	for i, n := 0, 1; i < all.Len(); i, n = i+n, n%61+1 {
		if _, err := conn.Write(all.Bytes()[i:min(i+n, all.Len())]); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := conn.Write(all.Bytes()); err != nil {
		t.Fatal(err)
	}
	answers := readAnswerList(t, conn, 2*len(requests))
	for i, a := range answers {
		if a.StatusCode != http.StatusOK {
			t.Errorf("request %d got %d %q", i, a.StatusCode, a.body)
		}
	}
	got := dest.Requests()
	if len(got) != 2*len(requests) {
		t.Fatalf("the destination got %d requests, want %d", len(got), 2*len(requests))
	}
	for i, r := range got {
		if want := requests[i%len(requests)].body; string(r.Body) != want {
			t.Errorf("request %d reached the destination with %d bytes, want %d", i, len(r.Body), len(want))
		}
		if _, ok := r.Header[headerFramingError]; ok {
			t.Errorf("request %d reached the destination marked %q", i, r.Header.Get(headerFramingError))
		}
	}
}

// TestMalformedChunkedBody: a chunked body that breaks its own framing
// (bare LF, or a bad chunk size) is refused with 400 bad_request. Go's
// server only finds out while the body streams, so in sync mode the
// destination may have seen the start of the request, never a whole one.
func TestMalformedChunkedBody(t *testing.T) {
	dest := proxytest.NewDestination(t, nil)
	fp := newFaultProxy(t, nil, nil)
	tests := []struct {
		name, chunks, prefer string
	}{
		{name: "bare LF in a chunk-size line", chunks: "3\r\nabc\r\n3\nabc\r\n0\r\n\r\n"},
		{name: "bare LF in a chunk-size line, async", chunks: "3\r\nabc\r\n3\nabc\r\n0\r\n\r\n", prefer: "Prefer: respond-async\r\n"},
		{name: "chunk size not hexadecimal", chunks: "3\r\nabc\r\nxyz\r\nabc\r\n0\r\n\r\n"},
		{name: "chunk data longer than its size", chunks: "3\r\nabcdef\r\n0\r\n\r\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := rawSend(t, fp.Addr, "POST / HTTP/1.1\r\nHost: proxy\r\nKn-Forward-To: "+dest.URL+"\r\n"+tt.prefer+
				"Transfer-Encoding: chunked\r\n\r\n"+tt.chunks)
			wantProxyError(t, a.resp, a.body, ReasonBadRequest)
			for _, r := range dest.Requests() {
				if r.BodyErr == nil {
					t.Errorf("the destination received a whole request: %q", r.Body)
				}
			}
			proxytest.Eventually(t, 5*time.Second, func() bool { return fp.Limiter.Inflight() == 0 }, "the slot was not released")
		})
	}
}
