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

package http1_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"knative.dev/event-forwarding-proxy/delivery/http1"
	"knative.dev/event-forwarding-proxy/test/testproc"
)

// TestRoundTripRejectsUnsupportedRequests: a request that is not plain
// http:// to a host fails at once, without dialing and without a panic.
func TestRoundTripRejectsUnsupportedRequests(t *testing.T) {
	tests := []struct {
		name string
		req  func() *http.Request
	}{
		{name: "https", req: func() *http.Request { return newRequest(t, newCtx(t), "GET", "https://127.0.0.1:1/", nil, 0) }},
		{name: "ftp", req: func() *http.Request { return newRequest(t, newCtx(t), "GET", "ftp://127.0.0.1:1/", nil, 0) }},
		{name: "no scheme", req: func() *http.Request { return newRequest(t, newCtx(t), "GET", "//127.0.0.1:1/", nil, 0) }},
		{name: "nil URL", req: func() *http.Request {
			return (&http.Request{Method: http.MethodGet, Header: http.Header{}}).WithContext(newCtx(t))
		}},
		{name: "empty host", req: func() *http.Request { return newRequest(t, newCtx(t), "GET", "http:///path", nil, 0) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr, dials := newTransport(t, &http1.Transport{})
			r := call(t, tr, tt.req())
			if r.RTErr == nil {
				t.Errorf("RoundTrip succeeded (status %d), want an error", r.Resp.StatusCode)
			} else if strings.Contains(r.RTErr.Error(), "PANIC") {
				t.Error(r.RTErr)
			}
			if n := dials.Load(); n != 0 {
				t.Errorf("dialed %d times, want none", n)
			}
		})
	}
}

// TestRoundTripDialsHostAndPort: the transport dials "tcp" to the URL's
// host:port (port 80 when the URL has none), whatever req.Host says.
func TestRoundTripDialsHostAndPort(t *testing.T) {
	srv, got := newCaptureServer(t)
	tests := []struct {
		name, url, host string
		wantAddr        string
		wantHost        string
	}{
		{name: "port 80 by default", url: "http://sink.example.svc.cluster.local/p", wantAddr: "sink.example.svc.cluster.local:80", wantHost: "sink.example.svc.cluster.local"},
		{name: "explicit port", url: "http://sink.example:8080/p", wantAddr: "sink.example:8080", wantHost: "sink.example:8080"},
		{name: "req.Host does not change the dial", url: "http://sink.example:8080/p", host: "virtual.example", wantAddr: "sink.example:8080", wantHost: "virtual.example"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var network, addr string
			tr := &http1.Transport{Dial: func(ctx context.Context, n, a string) (net.Conn, error) {
				network, addr = n, a
				return (&net.Dialer{}).DialContext(ctx, "tcp", srv.addr)
			}}
			t.Cleanup(tr.CloseIdleConnections)
			req := newRequest(t, newCtx(t), "GET", tt.url, nil, 0)
			req.Host = tt.host
			mustCall(t, tr, req)
			c := receive(t, got, "the request")
			if network != "tcp" || addr != tt.wantAddr {
				t.Errorf("dialed (%q, %q), want (\"tcp\", %q)", network, addr, tt.wantAddr)
			}
			if h := headerValues(c.head, "Host"); !slices.Equal(h, []string{tt.wantHost}) {
				t.Errorf("Host lines %q, want [%q]", h, tt.wantHost)
			}
		})
	}
}

// TestRoundTripWritesRequestHead: the request line and headers the
// destination reads are the request's, each header value once and in
// order, with Go's User-Agent when the request has none and none when it
// has an empty one, and the framing headers of req.Header ignored.
func TestRoundTripWritesRequestHead(t *testing.T) {
	srv, got := newCaptureServer(t)
	tr, _ := newTransport(t, &http1.Transport{})
	tests := []struct {
		name        string
		method      string
		path        string // appended to the server's URL
		body        string
		host        string
		header      http.Header
		wantLine    string
		wantHeaders map[string][]string // nil slice: no such line
		notInHead   []string
	}{{
		name: "method, path and raw query as given", method: "DELETE", path: "/a/b?x=1&y=%20z&x=2",
		wantLine: "DELETE /a/b?x=1&y=%20z&x=2 HTTP/1.1",
	}, {
		name: "escaped path kept", method: "GET", path: "/a%2Fb/c%20d",
		wantLine: "GET /a%2Fb/c%20d HTTP/1.1",
	}, {
		name: "empty path is /", method: "GET", path: "",
		wantLine: "GET / HTTP/1.1",
	}, {
		name: "Host from the URL", method: "GET", path: "/",
		wantLine: "GET / HTTP/1.1", wantHeaders: map[string][]string{"Host": {srvHost(srv)}},
	}, {
		name: "Host from req.Host", method: "GET", path: "/", host: "virtual.example:81",
		wantLine: "GET / HTTP/1.1", wantHeaders: map[string][]string{"Host": {"virtual.example:81"}},
	}, {
		name: "every value once and in order", method: "POST", path: "/", body: "x",
		header: http.Header{
			"Ce-Id":   {"1"},
			"X-Multi": {"c", "a", "b"},
			"Accept":  {"text/plain", "application/json"},
		},
		wantLine: "POST / HTTP/1.1",
		wantHeaders: map[string][]string{
			"Ce-Id": {"1"}, "X-Multi": {"c", "a", "b"}, "Accept": {"text/plain", "application/json"},
		},
	}, {
		name: "Go's User-Agent when absent", method: "GET", path: "/",
		wantLine: "GET / HTTP/1.1", wantHeaders: map[string][]string{"User-Agent": {"Go-http-client/1.1"}},
	}, {
		name: "no User-Agent when empty", method: "GET", path: "/", header: http.Header{"User-Agent": {""}},
		wantLine: "GET / HTTP/1.1", wantHeaders: map[string][]string{"User-Agent": nil},
	}, {
		name: "User-Agent as given", method: "GET", path: "/", header: http.Header{"User-Agent": {"sender/2"}},
		wantLine: "GET / HTTP/1.1", wantHeaders: map[string][]string{"User-Agent": {"sender/2"}},
	}, {
		name: "framing headers of req.Header ignored, GET", method: "GET", path: "/",
		header: http.Header{
			"Content-Length":    {"7777777"}, // seven digits: never part of the server's host:port
			"Transfer-Encoding": {"chunked"},
			"Host":              {"evil.example"},
			"Trailer":           {"X-Evil"},
		},
		wantLine: "GET / HTTP/1.1",
		wantHeaders: map[string][]string{
			"Content-Length": nil, "Transfer-Encoding": nil, "Host": {srvHost(srv)}, "Trailer": nil,
		},
		notInHead: []string{"7777777", "evil.example", "X-Evil"},
	}, {
		name: "framing headers of req.Header ignored, POST", method: "POST", path: "/", body: "hello",
		header: http.Header{
			"Content-Length":    {"7777777"}, // seven digits: never part of the server's host:port
			"Transfer-Encoding": {"chunked"},
			"Trailer":           {"X-Evil"},
		},
		wantLine: "POST / HTTP/1.1",
		wantHeaders: map[string][]string{
			"Content-Length": {"5"}, "Transfer-Encoding": nil, "Trailer": nil,
		},
		notInHead: []string{"7777777", "X-Evil"},
	}, {
		name: "framing headers under keys in other cases ignored", method: "POST", path: "/", body: "hello",
		header: http.Header{
			"content-length":    {"7777777"},
			"TRANSFER-ENCODING": {"chunked"},
			"host":              {"evil.example"},
			"trailer":           {"X-Evil"},
		},
		wantLine: "POST / HTTP/1.1",
		wantHeaders: map[string][]string{
			"Content-Length": {"5"}, "Transfer-Encoding": nil, "Host": {srvHost(srv)}, "Trailer": nil,
		},
		notInHead: []string{"7777777", "evil.example", "X-Evil"},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var body io.Reader
			if tt.body != "" {
				body = strings.NewReader(tt.body)
			}
			req := newRequest(t, newCtx(t), tt.method, srv.url+tt.path, body, int64(len(tt.body)))
			req.Host = tt.host
			for k, v := range tt.header {
				req.Header[k] = v
			}
			mustCall(t, tr, req)
			c := receive(t, got, "the request")
			if c.err != nil {
				t.Fatalf("the server could not read the request: %v\n%q", c.err, c.raw)
			}
			if line, _, _ := strings.Cut(c.head, "\r\n"); line != tt.wantLine {
				t.Errorf("request line %q, want %q", line, tt.wantLine)
			}
			for name, want := range tt.wantHeaders {
				if got := headerValues(c.head, name); !slices.Equal(got, want) {
					t.Errorf("%s lines %q, want %q\nhead:\n%s", name, got, want, c.head)
				}
			}
			for _, s := range tt.notInHead {
				if strings.Contains(c.head, s) {
					t.Errorf("the head has %q:\n%s", s, c.head)
				}
			}
			if hosts := headerValues(c.head, "Host"); len(hosts) != 1 {
				t.Errorf("%d Host lines, want 1:\n%s", len(hosts), c.head)
			}
			if c.body != tt.body {
				t.Errorf("the server read body %q, want %q", c.body, tt.body)
			}
		})
	}
}

func srvHost(s *rawServer) string { return s.addr }

// TestRoundTripRejectsInvalidRequestHead: an invalid method, header name or
// header value (one that would inject a header line) fails the call before
// anything reaches the destination.
func TestRoundTripRejectsInvalidRequestHead(t *testing.T) {
	var received atomic.Int64
	srv := newRawServer(t, func(_ *rawServer, c net.Conn) {
		n, _ := io.Copy(io.Discard, c)
		received.Add(n)
	})
	tests := []struct {
		name   string
		modify func(*http.Request)
	}{
		{name: "CRLF in a header value", modify: func(r *http.Request) { r.Header["X-Bad"] = []string{"a\r\nX-Injected: 1"} }},
		{name: "LF in a header value", modify: func(r *http.Request) { r.Header["X-Bad"] = []string{"a\nX-Injected: 1"} }},
		{name: "CR in a header value", modify: func(r *http.Request) { r.Header["X-Bad"] = []string{"a\rb"} }},
		{name: "CRLF in a second value", modify: func(r *http.Request) { r.Header["X-Bad"] = []string{"ok", "a\r\nX-Injected: 1"} }},
		{name: "space in a header name", modify: func(r *http.Request) { r.Header["Bad Name"] = []string{"v"} }},
		{name: "colon in a header name", modify: func(r *http.Request) { r.Header["X-A:B"] = []string{"v"} }},
		{name: "CRLF in a header name", modify: func(r *http.Request) { r.Header["X-A\r\nX-Injected"] = []string{"v"} }},
		{name: "empty header name", modify: func(r *http.Request) { r.Header[""] = []string{"v"} }},
		{name: "CRLF in req.Host", modify: func(r *http.Request) { r.Host = "a.example\r\nX-Injected: 1" }},
		{name: "space in the method", modify: func(r *http.Request) { r.Method = "GET /x" }},
		{name: "CRLF in the method", modify: func(r *http.Request) { r.Method = "GET\r\n" }},
		{name: "non-token method", modify: func(r *http.Request) { r.Method = "G(E)T" }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr, dials := newTransport(t, &http1.Transport{})
			accepted := srv.accepted.Load()
			req := newRequest(t, newCtx(t), "POST", srv.url+"/", strings.NewReader("body"), 4)
			tt.modify(req)
			if r := call(t, tr, req); r.RTErr == nil {
				t.Errorf("RoundTrip succeeded (status %d), want an error", r.Resp.StatusCode)
			}
			// Whatever the transport dialed must be closed (now or by
			// CloseIdleConnections) without a byte written.
			tr.CloseIdleConnections()
			testproc.Eventually(t, waitLimit, "every connection the transport opened is accepted and closed", func() bool {
				return srv.accepted.Load()-accepted == dials.Load() && srv.finished.Load() == srv.accepted.Load()
			})
			if n := received.Load(); n != 0 {
				t.Errorf("the destination received %d bytes, want none", n)
			}
		})
	}
}

// TestRoundTripFraming: the body's framing comes from req.ContentLength and
// req.Body: a declared length is sent as Content-Length with exactly that
// many bytes, an unknown one as chunks (with req.Trailer as trailers), and
// no body as Content-Length: 0 except for GET and HEAD, which send none.
func TestRoundTripFraming(t *testing.T) {
	srv, got := newCaptureServer(t)
	tr, _ := newTransport(t, &http1.Transport{})
	big := strings.Repeat("0123456789abcdef", 20000/16)
	tests := []struct {
		name          string
		method        string
		body          io.Reader
		contentLength int64
		trailer       http.Header
		wantCL        []string // Content-Length lines
		wantChunked   bool
		wantBody      string
		wantTrailer   http.Header
	}{
		{name: "declared length", method: "POST", body: strings.NewReader("hello"), contentLength: 5, wantCL: []string{"5"}, wantBody: "hello"},
		{name: "declared length, GET", method: "GET", body: strings.NewReader("hello"), contentLength: 5, wantCL: []string{"5"}, wantBody: "hello"},
		{name: "declared length over the read-ahead", method: "PUT", body: strings.NewReader(big), contentLength: int64(len(big)), wantCL: []string{strconv.Itoa(len(big))}, wantBody: big},
		{name: "no body, POST", method: "POST", wantCL: []string{"0"}},
		{name: "no body, PUT", method: "PUT", wantCL: []string{"0"}},
		{name: "no body, DELETE", method: "DELETE", wantCL: []string{"0"}},
		{name: "NoBody, POST", method: "POST", body: http.NoBody, wantCL: []string{"0"}},
		{name: "no body, GET", method: "GET"},
		{name: "no body, HEAD", method: "HEAD"},
		{name: "unknown length (-1)", method: "POST", body: strings.NewReader("hello"), contentLength: -1, wantChunked: true, wantBody: "hello"},
		{name: "unknown length (0 with a body)", method: "POST", body: strings.NewReader("hello"), contentLength: 0, wantChunked: true, wantBody: "hello"},
		{name: "unknown length, empty", method: "POST", body: strings.NewReader(""), contentLength: -1, wantChunked: true},
		{name: "unknown length, large", method: "POST", body: strings.NewReader(big), contentLength: -1, wantChunked: true, wantBody: big},
		{
			name: "trailers", method: "POST", body: strings.NewReader("hello"), contentLength: -1,
			trailer:     http.Header{"X-Checksum": {"abc"}, "X-Multi": {"1", "2"}},
			wantChunked: true, wantBody: "hello",
			wantTrailer: http.Header{"X-Checksum": {"abc"}, "X-Multi": {"1", "2"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := newRequest(t, newCtx(t), tt.method, srv.url+"/", tt.body, tt.contentLength)
			req.Trailer = tt.trailer
			mustCall(t, tr, req)
			c := receive(t, got, "the request")
			if c.err != nil {
				t.Fatalf("the server could not read the request: %v\n%q", c.err, c.raw)
			}
			if cl := headerValues(c.head, "Content-Length"); !slices.Equal(cl, tt.wantCL) {
				t.Errorf("Content-Length lines %q, want %q", cl, tt.wantCL)
			}
			te := headerValues(c.head, "Transfer-Encoding")
			if tt.wantChunked != slices.Equal(te, []string{"chunked"}) || (!tt.wantChunked && len(te) != 0) {
				t.Errorf("Transfer-Encoding lines %q, want chunked: %v", te, tt.wantChunked)
			}
			if c.body != tt.wantBody {
				t.Errorf("the server read a body of %d bytes, want %d", len(c.body), len(tt.wantBody))
			}
			if !tt.wantChunked && len(c.raw) != len(c.head)+4+len(tt.wantBody) {
				t.Errorf("the server read %d bytes, want the head and %d body bytes exactly:\n%q", len(c.raw), len(tt.wantBody), c.raw)
			}
			if tt.wantChunked && tt.wantTrailer == nil && !strings.HasSuffix(c.raw, "\r\n0\r\n\r\n") {
				t.Errorf("the chunked body does not end with the last chunk and no trailer:\n%q", c.raw)
			}
			for k, v := range tt.wantTrailer {
				if got := c.trailer[k]; !slices.Equal(got, v) {
					t.Errorf("trailer %s = %q, want %q (all: %v)", k, got, v, c.trailer)
				}
			}
		})
	}
}

// TestRoundTripTrailersReachHandler: req.Trailer set before the call
// reaches a net/http handler in r.Trailer once it read the body.
func TestRoundTripTrailersReachHandler(t *testing.T) {
	srv, _ := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		fmt.Fprintf(w, "%s|%s", b, r.Trailer.Get("X-Digest"))
	})
	tr, _ := newTransport(t, &http1.Transport{})
	pr, pw := io.Pipe()
	go func() {
		pw.Write([]byte("streamed"))
		pw.Close()
	}()
	req := newRequest(t, newCtx(t), "POST", srv.URL, pr, -1)
	req.Trailer = http.Header{"X-Digest": {"d1"}}
	if r := mustCall(t, tr, req); r.Body != "streamed|d1" {
		t.Errorf("the handler saw %q, want %q", r.Body, "streamed|d1")
	}
}
