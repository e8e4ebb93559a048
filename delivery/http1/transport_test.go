package http1_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"knative.dev/event-forwarding-proxy/delivery/http1"
	"knative.dev/event-forwarding-proxy/test/testproc"
)

// waitLimit bounds every wait of these tests: a call's context, a watchdog
// on calls that a broken transport could block, a polled condition.
const waitLimit = 10 * time.Second

// newTransport fills tr's Dial with a loopback dialer that counts its dials
// (the way to tell a reused connection from a new one) and closes its idle
// connections when the test ends.
func newTransport(t testing.TB, tr *http1.Transport) (*http1.Transport, *atomic.Int64) {
	t.Helper()
	var dials atomic.Int64
	d := &net.Dialer{}
	tr.Dial = func(ctx context.Context, network, addr string) (net.Conn, error) {
		dials.Add(1)
		return d.DialContext(ctx, network, addr)
	}
	t.Cleanup(tr.CloseIdleConnections)
	return tr, &dials
}

// connStates counts the connections an httptest server opened and closed.
type connStates struct{ opened, closed atomic.Int64 }

// newServer starts a loopback HTTP/1.1 server running h.
func newServer(t *testing.T, h http.HandlerFunc) (*httptest.Server, *connStates) {
	t.Helper()
	var cs connStates
	srv := httptest.NewUnstartedServer(h)
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		switch s {
		case http.StateNew:
			cs.opened.Add(1)
		case http.StateClosed, http.StateHijacked:
			cs.closed.Add(1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	// First, so that a connection a broken transport left open cannot
	// hold Close up.
	t.Cleanup(srv.CloseClientConnections)
	return srv, &cs
}

// rawServer is a loopback TCP server whose every connection is handled by
// a function the test scripts byte by byte.
type rawServer struct {
	addr     string
	url      string
	accepted atomic.Int64
	finished atomic.Int64  // connections whose handler returned and that the server closed
	done     chan struct{} // closed when the test ends: handlers blocked on it return
}

func newRawServer(t *testing.T, handle func(s *rawServer, c net.Conn)) *rawServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &rawServer{addr: ln.Addr().String(), url: "http://" + ln.Addr().String(), done: make(chan struct{})}
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		conns []net.Conn
	)
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.accepted.Add(1)
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Go(func() {
				defer s.finished.Add(1)
				defer c.Close()
				handle(s, c)
			})
		}
	})
	t.Cleanup(func() {
		close(s.done)
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return s
}

// answerEach is a raw connection handler that reads requests one after
// another and answers each with resp, until the client closes.
func answerEach(resp string) func(*rawServer, net.Conn) {
	return func(_ *rawServer, c net.Conn) {
		br := bufio.NewReader(c)
		for {
			req, err := http.ReadRequest(br)
			if err != nil {
				return
			}
			if _, err := io.Copy(io.Discard, req.Body); err != nil {
				return
			}
			if _, err := io.WriteString(c, resp); err != nil {
				return
			}
		}
	}
}

// captured is one request as a raw server read it.
type captured struct {
	head    string // request line and header lines, as sent, up to the blank line
	raw     string // every byte read
	req     *http.Request
	body    string
	trailer http.Header
	err     error
}

// newCaptureServer records the first request of each connection exactly
// as it arrived, then answers 200 with no body and closes.
func newCaptureServer(t *testing.T) (*rawServer, <-chan captured) {
	t.Helper()
	got := make(chan captured, 64)
	s := newRawServer(t, func(_ *rawServer, c net.Conn) {
		var raw bytes.Buffer
		br := bufio.NewReader(io.TeeReader(c, &raw))
		req, err := http.ReadRequest(br)
		if err != nil {
			got <- captured{raw: raw.String(), err: err}
			return
		}
		body, err := io.ReadAll(req.Body)
		head, _, _ := strings.Cut(raw.String(), "\r\n\r\n")
		got <- captured{head: head, raw: raw.String(), req: req, body: string(body), trailer: req.Trailer, err: err}
		io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
	})
	return s, got
}

func receive[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(waitLimit):
		t.Fatalf("timed out after %s waiting for %s", waitLimit, what)
		panic("unreachable")
	}
}

// headerValues returns the values of the header lines of head named name
// (case-insensitively), in order.
func headerValues(head, name string) []string {
	var vals []string
	lines := strings.Split(head, "\r\n")
	for _, l := range lines[1:] {
		k, v, ok := strings.Cut(l, ":")
		if ok && strings.EqualFold(strings.TrimSpace(k), name) {
			vals = append(vals, strings.TrimSpace(v))
		}
	}
	return vals
}

func newCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	t.Cleanup(cancel)
	return ctx
}

// newRequest builds a request with exactly the given body and
// ContentLength (no inference from the body's type).
func newRequest(t testing.TB, ctx context.Context, method, url string, body io.Reader, contentLength int64) *http.Request {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if body != nil {
		rc, ok := body.(io.ReadCloser)
		if !ok {
			rc = io.NopCloser(body)
		}
		req.Body = rc
	}
	req.ContentLength = contentLength
	return req
}

// result is a call's answer with its body read to the end and closed.
type result struct {
	resp    *http.Response
	body    string
	rtErr   error // from RoundTrip
	readErr error // from reading the body
}

func (r result) err() error { return errors.Join(r.rtErr, r.readErr) }

// errWatchdog is the result error of a call that did not end in time.
var errWatchdog = errors.New("the call did not end within its watchdog")

// doCall runs req through tr and reads the answer's body to its end, on a
// goroutine watched for longer than the request's context, so that a
// transport that blocks yields errWatchdog instead of hanging the test. A
// panic in the transport is a result error that names it. Safe on any
// goroutine.
func doCall(tr http.RoundTripper, req *http.Request) result {
	done := make(chan result, 1)
	go func() {
		var r result
		defer func() {
			if p := recover(); p != nil {
				r.rtErr = fmt.Errorf("PANIC in the transport: %v", p)
			}
			done <- r
		}()
		r.resp, r.rtErr = tr.RoundTrip(req)
		if r.rtErr != nil {
			return
		}
		var b []byte
		b, r.readErr = io.ReadAll(r.resp.Body)
		r.body = string(b)
		r.resp.Body.Close()
	}()
	select {
	case r := <-done:
		return r
	case <-time.After(waitLimit + 5*time.Second):
		return result{rtErr: fmt.Errorf("%s %s: %w", req.Method, req.URL, errWatchdog)}
	}
}

// call is doCall on the test's goroutine: a call that hangs fails the test.
func call(t testing.TB, tr http.RoundTripper, req *http.Request) result {
	t.Helper()
	r := doCall(tr, req)
	if errors.Is(r.rtErr, errWatchdog) {
		t.Fatal(r.rtErr)
	}
	return r
}

// mustCall is call for calls that must succeed.
func mustCall(t testing.TB, tr http.RoundTripper, req *http.Request) result {
	t.Helper()
	r := call(t, tr, req)
	if err := r.err(); err != nil {
		t.Fatalf("%s %s: %v", req.Method, req.URL, err)
	}
	return r
}

func get(t testing.TB, tr http.RoundTripper, url string) result {
	t.Helper()
	return mustCall(t, tr, newRequest(t, newCtx(t), http.MethodGet, url, nil, 0))
}

// echo answers with the request's body.
func echo(w http.ResponseWriter, r *http.Request) {
	b, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	w.Write(b)
}

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
			return (&http.Request{Method: "GET", Header: http.Header{}}).WithContext(newCtx(t))
		}},
		{name: "empty host", req: func() *http.Request { return newRequest(t, newCtx(t), "GET", "http:///path", nil, 0) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr, dials := newTransport(t, &http1.Transport{})
			r := call(t, tr, tt.req())
			if r.rtErr == nil {
				t.Errorf("RoundTrip succeeded (status %d), want an error", r.resp.StatusCode)
			} else if strings.Contains(r.rtErr.Error(), "PANIC") {
				t.Error(r.rtErr)
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
			"Content-Length":    {"99"},
			"Transfer-Encoding": {"chunked"},
			"Host":              {"evil.example"},
			"Trailer":           {"X-Evil"},
		},
		wantLine: "GET / HTTP/1.1",
		wantHeaders: map[string][]string{
			"Content-Length": nil, "Transfer-Encoding": nil, "Host": {srvHost(srv)}, "Trailer": nil,
		},
		notInHead: []string{"99", "evil.example", "X-Evil"},
	}, {
		name: "framing headers of req.Header ignored, POST", method: "POST", path: "/", body: "hello",
		header: http.Header{
			"Content-Length":    {"99"},
			"Transfer-Encoding": {"chunked"},
			"Trailer":           {"X-Evil"},
		},
		wantLine: "POST / HTTP/1.1",
		wantHeaders: map[string][]string{
			"Content-Length": {"5"}, "Transfer-Encoding": nil, "Trailer": nil,
		},
		notInHead: []string{"99", "X-Evil"},
	}, {
		name: "framing headers under keys in other cases ignored", method: "POST", path: "/", body: "hello",
		header: http.Header{
			"content-length":    {"99"},
			"TRANSFER-ENCODING": {"chunked"},
			"host":              {"evil.example"},
			"trailer":           {"X-Evil"},
		},
		wantLine: "POST / HTTP/1.1",
		wantHeaders: map[string][]string{
			"Content-Length": {"5"}, "Transfer-Encoding": nil, "Host": {srvHost(srv)}, "Trailer": nil,
		},
		notInHead: []string{"99", "evil.example", "X-Evil"},
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
			if r := call(t, tr, req); r.rtErr == nil {
				t.Errorf("RoundTrip succeeded (status %d), want an error", r.resp.StatusCode)
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
	if r := mustCall(t, tr, req); r.body != "streamed|d1" {
		t.Errorf("the handler saw %q, want %q", r.body, "streamed|d1")
	}
}

// TestRoundTripShortBody: a body shorter than its declared length fails the
// call, and the connection that carried part of it is not used again.
func TestRoundTripShortBody(t *testing.T) {
	srv, _ := newServer(t, echo)
	tests := []struct {
		name     string
		declared int
		actual   int
	}{
		{name: "within the read-ahead", declared: 10, actual: 5},
		{name: "streamed", declared: 4096, actual: 2048},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr, dials := newTransport(t, &http1.Transport{ReadAheadMax: 1024})
			req := newRequest(t, newCtx(t), "POST", srv.URL, strings.NewReader(strings.Repeat("s", tt.actual)), int64(tt.declared))
			r := call(t, tr, req)
			if r.err() == nil {
				t.Fatalf("a body of %d bytes declared as %d was sent, status %d", tt.actual, tt.declared, r.resp.StatusCode)
			}
			if errors.Is(r.err(), context.DeadlineExceeded) {
				t.Errorf("the call failed only at its deadline: %v", r.err())
			}
			if n := tr.IdleConns(); n != 0 {
				t.Errorf("%d idle connections after the failed call, want 0", n)
			}
			before := dials.Load()
			req = newRequest(t, newCtx(t), "POST", srv.URL, strings.NewReader("next"), 4)
			if r := mustCall(t, tr, req); r.body != "next" {
				t.Errorf("the next call read %q, want %q", r.body, "next")
			}
			if n := dials.Load() - before; n != 1 {
				t.Errorf("the next call dialed %d times, want 1 (a fresh connection)", n)
			}
		})
	}
}

// TestRoundTripLongBody: a body longer than its declared length sends only
// the declared bytes (or fails); either way the connection stays framed.
func TestRoundTripLongBody(t *testing.T) {
	srv, _ := newServer(t, echo)
	tr, _ := newTransport(t, &http1.Transport{})
	for _, n := range []int{5, 40000} {
		body := strings.Repeat("b", n)
		req := newRequest(t, newCtx(t), "POST", srv.URL, strings.NewReader(body+"EXTRA"), int64(n))
		r := call(t, tr, req)
		if r.err() == nil && r.body != body {
			t.Errorf("declared %d bytes: the server read %d bytes", n, len(r.body))
		}
		req = newRequest(t, newCtx(t), "POST", srv.URL, strings.NewReader("next"), 4)
		if r := mustCall(t, tr, req); r.resp.StatusCode != http.StatusOK || r.body != "next" {
			t.Errorf("declared %d bytes: the next call got %d %q, want 200 %q", n, r.resp.StatusCode, r.body, "next")
		}
	}
}

// writeCountingConn counts the writes of the connection it wraps; it hides
// any other interface of the connection (ReadFrom, ...), so that every byte
// written goes through Write.
type writeCountingConn struct {
	net.Conn
	writes *atomic.Int64
}

func (c writeCountingConn) Write(p []byte) (int, error) {
	c.writes.Add(1)
	return c.Conn.Write(p)
}

// TestRoundTripSmallBodyOneWrite: a body of declared length up to
// ReadAheadMax goes out with the head in one write.
func TestRoundTripSmallBodyOneWrite(t *testing.T) {
	srv, _ := newServer(t, echo)
	tests := []struct {
		name      string
		readAhead int64
		size      int
	}{
		{name: "default read-ahead, at the bound", size: 16 << 10},
		{name: "default read-ahead, small", size: 200},
		{name: "100 bytes, at the bound", readAhead: 100, size: 100},
		{name: "100 bytes, 1 byte", readAhead: 1, size: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var writes atomic.Int64
			tr := &http1.Transport{ReadAheadMax: tt.readAhead, Dial: func(ctx context.Context, network, addr string) (net.Conn, error) {
				c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
				if err != nil {
					return nil, err
				}
				return writeCountingConn{Conn: c, writes: &writes}, nil
			}}
			t.Cleanup(tr.CloseIdleConnections)
			body := strings.Repeat("w", tt.size)
			if r := mustCall(t, tr, newRequest(t, newCtx(t), "POST", srv.URL, strings.NewReader(body), int64(len(body)))); r.body != body {
				t.Fatalf("echoed %d bytes, want %d", len(r.body), len(body))
			}
			if n := writes.Load(); n != 1 {
				t.Errorf("the request went out in %d writes, want 1", n)
			}
		})
	}
}

// TestRoundTripStreamsBody: a body over ReadAheadMax or of unknown length
// reaches the destination as it is produced, not after it ends.
func TestRoundTripStreamsBody(t *testing.T) {
	part1 := strings.Repeat("1", 1000)
	part2 := strings.Repeat("2", 3096)
	tests := []struct {
		name          string
		contentLength int64
	}{
		{name: "declared length over ReadAheadMax", contentLength: int64(len(part1) + len(part2))},
		{name: "unknown length", contentLength: -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			firstPart := make(chan string, 1)
			srv, _ := newServer(t, func(w http.ResponseWriter, r *http.Request) {
				buf := make([]byte, len(part1))
				if _, err := io.ReadFull(r.Body, buf); err != nil {
					http.Error(w, err.Error(), http.StatusBadRequest)
					return
				}
				firstPart <- string(buf)
				rest, err := io.ReadAll(r.Body)
				if err != nil {
					http.Error(w, err.Error(), http.StatusBadRequest)
					return
				}
				fmt.Fprint(w, len(buf)+len(rest))
			})
			tr, _ := newTransport(t, &http1.Transport{ReadAheadMax: 1024})
			pr, pw := io.Pipe()
			t.Cleanup(func() { pw.CloseWithError(errors.New("the test ended")) })
			req := newRequest(t, newCtx(t), "POST", srv.URL, pr, tt.contentLength)
			res := make(chan result, 1)
			go func() { res <- doCall(tr, req) }()
			go pw.Write([]byte(part1))
			if got := receive(t, firstPart, "the destination to read the first part while the rest is not written"); got != part1 {
				t.Fatalf("the destination read %q first", got)
			}
			go func() {
				pw.Write([]byte(part2))
				pw.Close()
			}()
			r := receive(t, res, "the call to end")
			if err := r.err(); err != nil {
				t.Fatal(err)
			}
			if want := strconv.Itoa(len(part1) + len(part2)); r.body != want {
				t.Errorf("the destination read %s bytes, want %s", r.body, want)
			}
		})
	}
}

// zeros is an endless reader of zero bytes.
type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

// TestRoundTripEarlyAnswer: a destination that answers (or closes) before
// reading a large or unfinished body ends the call with that answer (or an
// error when it also closes), never a hang, and the connection is not
// reused.
func TestRoundTripEarlyAnswer(t *testing.T) {
	const answer = "HTTP/1.1 413 Request Entity Too Large\r\nContent-Length: 0\r\n\r\n"
	tests := []struct {
		name    string
		closes  bool // the destination closes after answering; else it keeps the connection, reading nothing
		unknown bool // the body is a pipe that stops after its first part; else 64 MiB of declared length
		want413 bool
		// noAnswer: the destination closes without answering (closes is implied); the call must fail.
		noAnswer bool
	}{
		{name: "large body, destination keeps the connection", want413: true},
		{name: "large body, destination closes"},
		{name: "stalled streaming body, destination keeps the connection", unknown: true, want413: true},
		{name: "stalled streaming body, destination closes", unknown: true},
		{name: "stalled streaming body, destination closes without answering", unknown: true, noAnswer: true},
		{name: "large body, destination closes without answering", noAnswer: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newRawServer(t, func(s *rawServer, c net.Conn) {
				br := bufio.NewReader(c)
				if _, err := http.ReadRequest(br); err != nil {
					return
				}
				if tt.noAnswer {
					return
				}
				io.WriteString(c, answer)
				if !tt.closes {
					<-s.done
				}
			})
			tr, _ := newTransport(t, &http1.Transport{})
			var req *http.Request
			if tt.unknown {
				pr, pw := io.Pipe()
				t.Cleanup(func() { pw.CloseWithError(errors.New("the test ended")) })
				go pw.Write([]byte("first part"))
				req = newRequest(t, newCtx(t), "POST", srv.url, pr, -1)
			} else {
				req = newRequest(t, newCtx(t), "POST", srv.url, io.LimitReader(zeros{}, 64<<20), 64<<20)
			}
			r := call(t, tr, req)
			if tt.noAnswer && r.err() == nil {
				t.Errorf("the call succeeded with status %d, want an error", r.resp.StatusCode)
			}
			if r.rtErr == nil && r.resp.StatusCode != http.StatusRequestEntityTooLarge {
				t.Errorf("status %d, want 413", r.resp.StatusCode)
			}
			if tt.want413 && r.rtErr != nil {
				t.Errorf("RoundTrip: %v, want the 413 answer", r.rtErr)
			}
			if errors.Is(r.err(), context.DeadlineExceeded) {
				t.Errorf("the call ended only at its deadline: %v", r.err())
			}
			if n := tr.IdleConns(); n != 0 {
				t.Errorf("%d idle connections, want 0: the request was not fully sent", n)
			}
		})
	}
}

// TestRoundTripResponse: the destination's status, headers and body come
// through.
func TestRoundTripResponse(t *testing.T) {
	srv, _ := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header()["X-Multi"] = []string{"b", "a"}
		w.Header().Set("Ce-Type", "t")
		w.WriteHeader(http.StatusCreated)
		io.WriteString(w, "created")
	})
	tr, _ := newTransport(t, &http1.Transport{})
	r := get(t, tr, srv.URL)
	if r.resp.StatusCode != http.StatusCreated {
		t.Errorf("status %d, want 201", r.resp.StatusCode)
	}
	if got := r.resp.Header["X-Multi"]; !slices.Equal(got, []string{"b", "a"}) {
		t.Errorf("X-Multi %q, want [b a]", got)
	}
	if got := r.resp.Header.Get("Ce-Type"); got != "t" {
		t.Errorf("Ce-Type %q, want t", got)
	}
	if r.body != "created" {
		t.Errorf("body %q, want created", r.body)
	}
}

// TestRoundTripResponseTrailers: trailers the destination declares, and
// those it sends undeclared, are in resp.Trailer once the body is read.
func TestRoundTripResponseTrailers(t *testing.T) {
	srv, _ := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Trailer", "X-Declared")
		io.WriteString(w, "body")
		w.(http.Flusher).Flush()
		w.Header().Set("X-Declared", "d")
		w.Header().Set(http.TrailerPrefix+"X-Undeclared", "u")
	})
	tr, dials := newTransport(t, &http1.Transport{})
	for range 2 {
		r := get(t, tr, srv.URL)
		if r.body != "body" {
			t.Errorf("body %q, want body", r.body)
		}
		if got := r.resp.Trailer.Get("X-Declared"); got != "d" {
			t.Errorf("trailer X-Declared %q, want d (trailer %v)", got, r.resp.Trailer)
		}
		if got := r.resp.Trailer.Get("X-Undeclared"); got != "u" {
			t.Errorf("trailer X-Undeclared %q, want u (trailer %v)", got, r.resp.Trailer)
		}
	}
	if n := dials.Load(); n != 1 {
		t.Errorf("2 calls with trailers dialed %d times, want 1", n)
	}
}

// TestRoundTripNoBodyAnswers: answers to HEAD, and 204 and 304 answers,
// have no body even when they announce a length, and leave the
// connection ready for the next call.
func TestRoundTripNoBodyAnswers(t *testing.T) {
	srv, _ := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/head":
			w.Header().Set("Content-Length", "7")
			io.WriteString(w, "content")
		case "/204":
			w.WriteHeader(http.StatusNoContent)
		case "/304":
			w.Header().Set("Etag", `"x"`)
			w.WriteHeader(http.StatusNotModified)
		default:
			io.WriteString(w, "next")
		}
	})
	tests := []struct {
		name, method, path string
		wantStatus         int
	}{
		{name: "HEAD", method: "HEAD", path: "/head", wantStatus: 200},
		{name: "204", method: "GET", path: "/204", wantStatus: 204},
		{name: "304", method: "GET", path: "/304", wantStatus: 304},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr, dials := newTransport(t, &http1.Transport{})
			r := mustCall(t, tr, newRequest(t, newCtx(t), tt.method, srv.URL+tt.path, nil, 0))
			if r.resp.StatusCode != tt.wantStatus || r.body != "" {
				t.Errorf("got %d with body %q, want %d with none", r.resp.StatusCode, r.body, tt.wantStatus)
			}
			if next := get(t, tr, srv.URL+"/next"); next.body != "next" {
				t.Errorf("the next call read %q, want next", next.body)
			}
			if n := dials.Load(); n != 1 {
				t.Errorf("dialed %d times, want 1 (the connection reused)", n)
			}
		})
	}
}

// TestRoundTripInterimAnswers: 1xx interim answers are skipped and the
// final answer returned; the connection stays usable.
func TestRoundTripInterimAnswers(t *testing.T) {
	raw := newRawServer(t, answerEach("HTTP/1.1 100 Continue\r\n\r\n"+
		"HTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload\r\n\r\n"+
		"HTTP/1.1 102 Processing\r\n\r\n"+
		"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nfinal"))
	srv, _ := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Link", "</style.css>; rel=preload")
		w.WriteHeader(http.StatusEarlyHints)
		w.WriteHeader(http.StatusEarlyHints)
		w.WriteHeader(http.StatusAccepted)
		io.WriteString(w, "final")
	})
	tests := []struct {
		name, url  string
		wantStatus int
	}{
		{name: "100, 103 and 102 from a raw destination", url: raw.url, wantStatus: 200},
		{name: "two 103 from net/http", url: srv.URL, wantStatus: 202},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr, dials := newTransport(t, &http1.Transport{})
			for range 2 {
				r := get(t, tr, tt.url)
				if r.resp.StatusCode != tt.wantStatus || r.body != "final" {
					t.Errorf("got %d %q, want %d %q", r.resp.StatusCode, r.body, tt.wantStatus, "final")
				}
			}
			if n := dials.Load(); n != 1 {
				t.Errorf("dialed %d times, want 1", n)
			}
		})
	}
}

// TestRoundTripSwitchingProtocols: a 101 answer is returned as it is.
func TestRoundTripSwitchingProtocols(t *testing.T) {
	srv := newRawServer(t, func(s *rawServer, c net.Conn) {
		if _, err := http.ReadRequest(bufio.NewReader(c)); err != nil {
			return
		}
		io.WriteString(c, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: test\r\n\r\n")
		<-s.done
	})
	tr, _ := newTransport(t, &http1.Transport{})
	req := newRequest(t, newCtx(t), "GET", srv.url, nil, 0)
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", "test")
	done := make(chan result, 1)
	go func() {
		var r result
		r.resp, r.rtErr = tr.RoundTrip(req)
		done <- r
	}()
	r := receive(t, done, "RoundTrip to return the 101")
	if r.rtErr != nil {
		t.Fatal(r.rtErr)
	}
	r.resp.Body.Close()
	if r.resp.StatusCode != http.StatusSwitchingProtocols {
		t.Errorf("status %d, want 101", r.resp.StatusCode)
	}
}

// TestRoundTripBodyUntilClose: an HTTP/1.1 answer with neither a length nor
// chunks, and Connection: close, has the bytes up to the end of the
// connection as its body; the connection is not reused.
func TestRoundTripBodyUntilClose(t *testing.T) {
	srv := newRawServer(t, func(_ *rawServer, c net.Conn) {
		if _, err := http.ReadRequest(bufio.NewReader(c)); err != nil {
			return
		}
		io.WriteString(c, "HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nall of it, until the end")
	})
	tr, dials := newTransport(t, &http1.Transport{})
	for range 2 {
		if r := get(t, tr, srv.url); r.body != "all of it, until the end" {
			t.Errorf("body %q", r.body)
		}
		if n := tr.IdleConns(); n != 0 {
			t.Errorf("%d idle connections, want 0", n)
		}
	}
	if n := dials.Load(); n != 2 {
		t.Errorf("2 calls dialed %d times, want 2", n)
	}
}

// TestRoundTripReusesConnection: sequential calls whose answers are read
// to their end share one connection, idle between calls.
func TestRoundTripReusesConnection(t *testing.T) {
	tests := []struct {
		name     string
		handler  http.HandlerFunc
		wantBody string
	}{
		{name: "with length", handler: func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }, wantBody: "ok"},
		{name: "chunked", handler: func(w http.ResponseWriter, r *http.Request) {
			io.WriteString(w, "o")
			w.(http.Flusher).Flush()
			io.WriteString(w, "k")
		}, wantBody: "ok"},
		{name: "empty", handler: func(w http.ResponseWriter, r *http.Request) {}, wantBody: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv, states := newServer(t, tt.handler)
			tr, dials := newTransport(t, &http1.Transport{})
			for i := range 5 {
				req := newRequest(t, newCtx(t), "POST", srv.URL, strings.NewReader("event"), 5)
				if r := mustCall(t, tr, req); r.body != tt.wantBody {
					t.Errorf("call %d: body %q, want %q", i, r.body, tt.wantBody)
				}
				if n := tr.IdleConns(); n != 1 {
					t.Errorf("after call %d: %d idle connections, want 1", i, n)
				}
			}
			if n := dials.Load(); n != 1 {
				t.Errorf("5 sequential calls dialed %d times, want 1", n)
			}
			if n := states.opened.Load(); n != 1 {
				t.Errorf("the server saw %d connections, want 1", n)
			}
		})
	}
}

// TestRoundTripNotReused: a connection is not used again after an answer
// body closed before its end, an answer with Connection: close, a request
// with Close set, or an HTTP/1.0 answer without keep-alive.
func TestRoundTripNotReused(t *testing.T) {
	big := strings.Repeat("x", 256<<10)
	srv, _ := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/big":
			io.WriteString(w, big)
		case "/close":
			w.Header().Set("Connection", "close")
			io.WriteString(w, "ok")
		default:
			io.WriteString(w, "ok")
		}
	})
	http10 := newRawServer(t, answerEach("HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok"))
	tests := []struct {
		name string
		url  string
		// first makes the first call and leaves its connection as it must not be reused.
		first func(t *testing.T, tr *http1.Transport, url string)
	}{
		{name: "body closed before its end", url: srv.URL + "/big", first: func(t *testing.T, tr *http1.Transport, url string) {
			resp, err := tr.RoundTrip(newRequest(t, newCtx(t), "GET", url, nil, 0))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := io.ReadFull(resp.Body, make([]byte, 10)); err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
		}},
		{name: "body closed unread", url: srv.URL + "/big", first: func(t *testing.T, tr *http1.Transport, url string) {
			resp, err := tr.RoundTrip(newRequest(t, newCtx(t), "GET", url, nil, 0))
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
		}},
		{name: "Connection: close answer", url: srv.URL + "/close", first: func(t *testing.T, tr *http1.Transport, url string) {
			get(t, tr, url)
		}},
		{name: "request with Close", url: srv.URL + "/", first: func(t *testing.T, tr *http1.Transport, url string) {
			req := newRequest(t, newCtx(t), "GET", url, nil, 0)
			req.Close = true
			mustCall(t, tr, req)
		}},
		{name: "HTTP/1.0 answer", url: http10.url, first: func(t *testing.T, tr *http1.Transport, url string) {
			get(t, tr, url)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr, dials := newTransport(t, &http1.Transport{})
			tt.first(t, tr, tt.url)
			if n := tr.IdleConns(); n != 0 {
				t.Errorf("%d idle connections after the first call, want 0", n)
			}
			if r := get(t, tr, tt.url); !strings.HasPrefix(r.body, "ok") && !strings.HasPrefix(r.body, "xxx") {
				t.Errorf("the second call read %q", r.body)
			}
			if n := dials.Load(); n != 2 {
				t.Errorf("2 calls dialed %d times, want 2", n)
			}
		})
	}
}

// TestRoundTripConcurrent: many goroutines calling at once each get their
// own answer, and the idle pool never holds more than MaxIdleConnsPerHost.
func TestRoundTripConcurrent(t *testing.T) {
	const (
		goroutines = 50
		calls      = 20
		maxIdle    = 8
	)
	srv, _ := newServer(t, echo)
	tr, _ := newTransport(t, &http1.Transport{MaxIdleConnsPerHost: maxIdle})
	var (
		wg      sync.WaitGroup
		failed  atomic.Int64
		maxSeen atomic.Int64
		errMu   sync.Mutex
		errs    []error
	)
	for g := range goroutines {
		wg.Go(func() {
			for i := range calls {
				body := fmt.Sprintf("goroutine %d call %d", g, i)
				var req *http.Request
				if i%4 == 3 { // some streamed, some in one write
					req = newRequest(t, newCtx(t), "POST", srv.URL, io.NopCloser(strings.NewReader(body)), -1)
				} else {
					req = newRequest(t, newCtx(t), "POST", srv.URL, strings.NewReader(body), int64(len(body)))
				}
				r := doCall(tr, req)
				if err := r.err(); err != nil || r.body != body {
					failed.Add(1)
					errMu.Lock()
					errs = append(errs, fmt.Errorf("%s: got %q, %v", body, r.body, err))
					errMu.Unlock()
				}
				for {
					n, m := int64(tr.IdleConns()), maxSeen.Load()
					if n <= m || maxSeen.CompareAndSwap(m, n) {
						break
					}
				}
			}
		})
	}
	wg.Wait()
	if n := failed.Load(); n != 0 {
		t.Errorf("%d of %d calls failed, the first: %v", n, goroutines*calls, errs[:min(len(errs), 5)])
	}
	if n := maxSeen.Load(); n > maxIdle {
		t.Errorf("the pool held %d idle connections, want at most %d", n, maxIdle)
	}
	if n := tr.IdleConns(); n < 1 || n > maxIdle {
		t.Errorf("%d idle connections at the end, want 1..%d", n, maxIdle)
	}
}

// TestRoundTripIdlePoolBound: held calls each take a connection; when they
// end, MaxIdleConnsPerHost of them stay idle per host:port and the others
// are closed.
func TestRoundTripIdlePoolBound(t *testing.T) {
	tests := []struct {
		name     string
		maxIdle  int
		hosts    int
		perHost  int
		wantIdle int
	}{
		{name: "bound 2, 5 held calls", maxIdle: 2, hosts: 1, perHost: 5, wantIdle: 2},
		{name: "bound 1 per host, 2 hosts with 3 held calls each", maxIdle: 1, hosts: 2, perHost: 3, wantIdle: 2},
		{name: "bound over the held calls", maxIdle: 10, hosts: 1, perHost: 4, wantIdle: 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var arrived atomic.Int64
			release := make(chan struct{})
			var (
				urls   []string
				states []*connStates
			)
			for range tt.hosts {
				srv, cs := newServer(t, func(w http.ResponseWriter, r *http.Request) {
					arrived.Add(1)
					<-release
					io.WriteString(w, "ok")
				})
				urls, states = append(urls, srv.URL), append(states, cs)
			}
			var once sync.Once
			t.Cleanup(func() { once.Do(func() { close(release) }) })
			tr, dials := newTransport(t, &http1.Transport{MaxIdleConnsPerHost: tt.maxIdle})
			total := tt.hosts * tt.perHost
			res := make(chan result, total)
			for _, u := range urls {
				for range tt.perHost {
					go func() { res <- doCall(tr, newRequest(t, newCtx(t), "GET", u, nil, 0)) }()
				}
			}
			testproc.Eventually(t, waitLimit, fmt.Sprintf("all %d calls are held by the destinations", total), func() bool {
				return arrived.Load() == int64(total)
			})
			once.Do(func() { close(release) })
			for range total {
				if r := receive(t, res, "a held call to end"); r.err() != nil || r.body != "ok" {
					t.Errorf("call: %q, %v", r.body, r.err())
				}
			}
			if n := tr.IdleConns(); n != tt.wantIdle {
				t.Errorf("%d idle connections, want %d", n, tt.wantIdle)
			}
			if n := dials.Load(); n != int64(total) {
				t.Errorf("%d held calls dialed %d times, want %d", total, n, total)
			}
			testproc.Eventually(t, waitLimit, "the destinations see the connections over the bound closed", func() bool {
				var closed int64
				for _, cs := range states {
					closed += cs.closed.Load()
				}
				return closed == int64(total-tt.wantIdle)
			})
		})
	}
}

// plainConn hides every interface of the connection it wraps but net.Conn
// (no syscall.Conn), as a Dial that wraps its connections would.
type plainConn struct{ net.Conn }

// namingConn wraps a connection and names it, as crypto/tls does.
type namingConn struct{ net.Conn }

func (c namingConn) NetConn() net.Conn { return c.Conn }

// TestRoundTripStaleIdleConnection: a destination that closed an idle
// connection (without saying Connection: close) does not fail the next
// call, a POST: the transport sees the connection closed before using it,
// whether Dial returns the TCP connection itself or a wrapper that names
// it (NetConn).
func TestRoundTripStaleIdleConnection(t *testing.T) {
	for _, wrap := range []bool{false, true} {
		t.Run(map[bool]string{false: "TCP connection", true: "wrapped connection"}[wrap], func(t *testing.T) {
			var (
				mu     sync.Mutex
				bodies []string
			)
			srv := newRawServer(t, func(_ *rawServer, c net.Conn) {
				req, err := http.ReadRequest(bufio.NewReader(c))
				if err != nil {
					return
				}
				b, _ := io.ReadAll(req.Body)
				mu.Lock()
				bodies = append(bodies, string(b))
				mu.Unlock()
				io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
				// and closes
			})
			tr, dials := newTransport(t, &http1.Transport{})
			if wrap {
				dial := tr.Dial
				tr.Dial = func(ctx context.Context, network, addr string) (net.Conn, error) {
					c, err := dial(ctx, network, addr)
					if err != nil {
						return nil, err
					}
					return namingConn{c}, nil
				}
			}
			for i, body := range []string{"first", "second", "third"} {
				r := mustCall(t, tr, newRequest(t, newCtx(t), "POST", srv.url, strings.NewReader(body), int64(len(body))))
				if r.body != "ok" {
					t.Errorf("call %d: body %q", i, r.body)
				}
				testproc.Eventually(t, waitLimit, "the destination closed the connection", func() bool {
					return srv.finished.Load() == int64(i+1)
				})
			}
			if n := dials.Load(); n != 3 {
				t.Errorf("dialed %d times, want 3", n)
			}
			mu.Lock()
			defer mu.Unlock()
			if want := []string{"first", "second", "third"}; !slices.Equal(bodies, want) {
				t.Errorf("the destination received %q, want %q (each once)", bodies, want)
			}
		})
	}
}

// TestRoundTripStaleOpaqueConnection pins the documented limit: behind a
// wrapper that hides the TCP connection (no syscall.Conn, no NetConn), an
// idle connection the destination closed is taken as open, and the call
// that finds it fails with an error (never a hang, never a replay of the
// POST); the next call dials afresh and succeeds.
func TestRoundTripStaleOpaqueConnection(t *testing.T) {
	var received atomic.Int64
	srv := newRawServer(t, func(_ *rawServer, c net.Conn) {
		req, err := http.ReadRequest(bufio.NewReader(c))
		if err != nil {
			return
		}
		_, _ = io.ReadAll(req.Body)
		received.Add(1)
		io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
		// and closes
	})
	tr, dials := newTransport(t, &http1.Transport{})
	dial := tr.Dial
	tr.Dial = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return plainConn{c}, nil
	}
	post := func(body string) (*http.Response, error) {
		return tr.RoundTrip(newRequest(t, newCtx(t), "POST", srv.url, strings.NewReader(body), int64(len(body))))
	}
	if r := mustCall(t, tr, newRequest(t, newCtx(t), "POST", srv.url, strings.NewReader("first"), 5)); r.body != "ok" {
		t.Fatalf("first call: body %q", r.body)
	}
	testproc.Eventually(t, waitLimit, "the destination closed the connection", func() bool { return srv.finished.Load() == 1 })
	resp, err := post("second")
	if err == nil {
		resp.Body.Close()
		t.Fatalf("the call on the closed connection succeeded (%s): the connection was checked after all, update the documentation", resp.Status)
	}
	if errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("the call hung until its deadline: %v", err)
	}
	if r := mustCall(t, tr, newRequest(t, newCtx(t), "POST", srv.url, strings.NewReader("third"), 5)); r.body != "ok" {
		t.Fatalf("third call: body %q", r.body)
	}
	if got := dials.Load(); got != 2 {
		t.Errorf("dialed %d times, want 2 (the failed call used the stale connection, the next one dialed)", got)
	}
	if got := received.Load(); got != 2 {
		t.Errorf("the destination received %d requests, want 2 (the second was never replayed)", got)
	}
}

// closeRecorder is a request body that records its Close; a pipe reader
// under it is closed too, which ends a Read blocked on it.
type closeRecorder struct {
	io.Reader
	closed atomic.Bool
}

func (b *closeRecorder) Close() error {
	b.closed.Store(true)
	if pr, ok := b.Reader.(*io.PipeReader); ok {
		pr.Close()
	}
	return nil
}

// TestRoundTripClosesRequestBody: as http.RoundTripper requires, the
// request body is closed whatever the outcome of the call (at the latest
// a moment after RoundTrip returns).
func TestRoundTripClosesRequestBody(t *testing.T) {
	var arrived atomic.Int64
	release := make(chan struct{})
	srv, _ := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/held" {
			arrived.Add(1)
			<-release
			return
		}
		io.Copy(io.Discard, r.Body)
	})
	t.Cleanup(func() { close(release) })
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closedPort := ln.Addr().String()
	ln.Close()
	tests := []struct {
		name          string
		url           string
		body          func() io.Reader
		contentLength int64
		modify        func(*http.Request)
		cancelHeld    bool // cancel the call once the destination holds it
	}{
		{name: "small body, answered", url: srv.URL, body: func() io.Reader { return strings.NewReader("small") }, contentLength: 5},
		{name: "streaming body, answered", url: srv.URL, body: func() io.Reader { return strings.NewReader(strings.Repeat("s", 40000)) }, contentLength: -1},
		{name: "https refused", url: "https://" + closedPort, body: func() io.Reader { return strings.NewReader("small") }, contentLength: 5},
		{name: "invalid header", url: srv.URL, body: func() io.Reader { return strings.NewReader("small") }, contentLength: 5,
			modify: func(r *http.Request) { r.Header["X-Bad"] = []string{"a\r\nb: c"} }},
		{name: "dial error", url: "http://" + closedPort, body: func() io.Reader { return strings.NewReader("small") }, contentLength: 5},
		{name: "body shorter than declared", url: srv.URL, body: func() io.Reader { return strings.NewReader("short") }, contentLength: 10},
		{name: "cancelled while a streaming body stalls", url: srv.URL + "/held", cancelHeld: true, contentLength: -1, body: func() io.Reader {
			pr, pw := io.Pipe()
			t.Cleanup(func() { pw.CloseWithError(errors.New("the test ended")) })
			go pw.Write([]byte("first bytes"))
			return pr
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr, _ := newTransport(t, &http1.Transport{})
			ctx, cancel := context.WithCancel(newCtx(t))
			defer cancel()
			body := &closeRecorder{Reader: tt.body()}
			req := newRequest(t, ctx, "POST", tt.url, body, tt.contentLength)
			if tt.modify != nil {
				tt.modify(req)
			}
			before := arrived.Load()
			res := make(chan result, 1)
			go func() { res <- doCall(tr, req) }()
			if tt.cancelHeld {
				testproc.Eventually(t, waitLimit, "the call is held by the destination", func() bool { return arrived.Load() > before })
				cancel()
			}
			if r := receive(t, res, "the call to end"); errors.Is(r.rtErr, errWatchdog) {
				t.Fatal(r.rtErr)
			}
			testproc.Eventually(t, waitLimit, "the request body is closed", body.closed.Load)
		})
	}
}

// TestIdleConnTimeout: a connection idle for IdleConnTimeout is closed.
func TestIdleConnTimeout(t *testing.T) {
	srv, states := newServer(t, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
	tr, dials := newTransport(t, &http1.Transport{IdleConnTimeout: 200 * time.Millisecond})
	get(t, tr, srv.URL)
	testproc.Eventually(t, waitLimit, "the idle connection times out", func() bool { return tr.IdleConns() == 0 })
	testproc.Eventually(t, waitLimit, "the destination sees the connection closed", func() bool { return states.closed.Load() == 1 })
	get(t, tr, srv.URL)
	if n := dials.Load(); n != 2 {
		t.Errorf("dialed %d times, want 2 (a new connection after the timeout)", n)
	}
}

// TestIdleConnTimeoutKeepsFreshConnections: a connection idle for less than
// IdleConnTimeout is reused.
func TestIdleConnTimeoutKeepsFreshConnections(t *testing.T) {
	srv, _ := newServer(t, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
	tr, dials := newTransport(t, &http1.Transport{IdleConnTimeout: time.Hour})
	for range 3 {
		get(t, tr, srv.URL)
	}
	if n := dials.Load(); n != 1 {
		t.Errorf("dialed %d times, want 1", n)
	}
}

// TestCloseIdleConnections: CloseIdleConnections closes the idle
// connections at once, and the next call dials a new one.
func TestCloseIdleConnections(t *testing.T) {
	srv, states := newServer(t, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
	tr, dials := newTransport(t, &http1.Transport{})
	get(t, tr, srv.URL)
	if n := tr.IdleConns(); n != 1 {
		t.Fatalf("%d idle connections, want 1", n)
	}
	tr.CloseIdleConnections()
	if n := tr.IdleConns(); n != 0 {
		t.Errorf("%d idle connections after CloseIdleConnections, want 0", n)
	}
	testproc.Eventually(t, waitLimit, "the destination sees the connection closed", func() bool { return states.closed.Load() == 1 })
	get(t, tr, srv.URL)
	if n := dials.Load(); n != 2 {
		t.Errorf("dialed %d times, want 2", n)
	}
}

// TestRoundTripContextWhileWaiting: a context cancelled, or past its
// deadline, while the call waits for the answer's head ends the call with
// the context's error; the connection is not reused.
func TestRoundTripContextWhileWaiting(t *testing.T) {
	var arrived atomic.Int64
	release := make(chan struct{})
	srv, _ := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/held" {
			arrived.Add(1)
			<-release
		}
		io.WriteString(w, "ok")
	})
	t.Cleanup(func() { close(release) })
	tests := []struct {
		name    string
		context func() (context.Context, func()) // the context, and what ends it once the call is held
		body    string
		expires bool // the context ends by itself: do not wait for the call to be held
		stalled bool // the body is a pipe that gives its first bytes, then nothing until the test ends
		want    error
	}{
		{name: "cancelled", context: func() (context.Context, func()) {
			ctx, cancel := context.WithCancel(newCtx(t))
			return ctx, cancel
		}, want: context.Canceled},
		{name: "cancelled, with a body", body: "payload", context: func() (context.Context, func()) {
			ctx, cancel := context.WithCancel(newCtx(t))
			return ctx, cancel
		}, want: context.Canceled},
		{name: "cancelled, with a stalled streaming body", stalled: true, context: func() (context.Context, func()) {
			ctx, cancel := context.WithCancel(newCtx(t))
			return ctx, cancel
		}, want: context.Canceled},
		{name: "deadline", context: func() (context.Context, func()) {
			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			t.Cleanup(cancel)
			return ctx, func() {}
		}, expires: true, want: context.DeadlineExceeded},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr, dials := newTransport(t, &http1.Transport{})
			ctx, end := tt.context()
			before := arrived.Load()
			res := make(chan result, 1)
			req := newRequest(t, ctx, "POST", srv.URL+"/held", strings.NewReader(tt.body), int64(len(tt.body)))
			if tt.stalled {
				pr, pw := io.Pipe()
				t.Cleanup(func() { pw.CloseWithError(errors.New("the test ended")) })
				go pw.Write([]byte("first bytes"))
				req = newRequest(t, ctx, "POST", srv.URL+"/held", pr, -1)
			}
			go func() { res <- doCall(tr, req) }()
			if !tt.expires {
				testproc.Eventually(t, waitLimit, "the call is held by the destination", func() bool { return arrived.Load() > before })
			}
			end()
			r := receive(t, res, "the call to end")
			if !errors.Is(r.rtErr, tt.want) {
				t.Errorf("RoundTrip error %v, want %v", r.rtErr, tt.want)
			}
			wantCutConnectionDropped(t, tr, dials, srv.URL+"/ok")
		})
	}
}

// wantCutConnectionDropped: after a call cut by its context on the one
// connection dialed so far, no connection is idle, and the next call, to
// okURL, dials a new one.
func wantCutConnectionDropped(t *testing.T, tr *http1.Transport, dials *atomic.Int64, okURL string) {
	t.Helper()
	if n := tr.IdleConns(); n != 0 {
		t.Errorf("%d idle connections, want 0", n)
	}
	get(t, tr, okURL)
	if n := dials.Load(); n != 2 {
		t.Errorf("dialed %d times, want 2 (the cut connection not reused)", n)
	}
}

// TestRoundTripContextWhileReadingBody: a context cancelled while the
// answer's body is being read ends the read with an error (not io.EOF),
// and the connection is not reused.
func TestRoundTripContextWhileReadingBody(t *testing.T) {
	release := make(chan struct{})
	srv, _ := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/partial" {
			io.WriteString(w, "part")
			w.(http.Flusher).Flush()
			<-release
			return
		}
		io.WriteString(w, "ok")
	})
	t.Cleanup(func() { close(release) })
	tests := []struct {
		name         string
		cancelBefore bool // cancel before the next Read starts; else while it may be blocked
	}{
		{name: "during the read"},
		{name: "before the read", cancelBefore: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr, dials := newTransport(t, &http1.Transport{})
			ctx, cancel := context.WithCancel(newCtx(t))
			defer cancel()
			resp, err := tr.RoundTrip(newRequest(t, ctx, "GET", srv.URL+"/partial", nil, 0))
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			buf := make([]byte, 4)
			if _, err := io.ReadFull(resp.Body, buf); err != nil || string(buf) != "part" {
				t.Fatalf("read %q, %v; want part", buf, err)
			}
			if tt.cancelBefore {
				cancel()
			}
			readErr := make(chan error, 1)
			go func() {
				_, err := resp.Body.Read(make([]byte, 64))
				readErr <- err
			}()
			cancel()
			err = receive(t, readErr, "the body read to end after the cancel")
			if err == nil || err == io.EOF {
				t.Errorf("Read returned %v after the cancel, want an error", err)
			}
			resp.Body.Close()
			wantCutConnectionDropped(t, tr, dials, srv.URL+"/ok")
		})
	}
}

// TestRoundTripContextDoneBefore: a call whose context has already ended
// fails with the context's error and dials nothing.
func TestRoundTripContextDoneBefore(t *testing.T) {
	srv, _ := newServer(t, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	expired, cancel2 := context.WithDeadline(context.Background(), time.Unix(0, 0))
	defer cancel2()
	tests := []struct {
		name string
		ctx  context.Context
		want error
	}{
		{name: "cancelled", ctx: cancelled, want: context.Canceled},
		{name: "deadline passed", ctx: expired, want: context.DeadlineExceeded},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr, dials := newTransport(t, &http1.Transport{})
			r := call(t, tr, newRequest(t, tt.ctx, "POST", srv.URL, strings.NewReader("x"), 1))
			if !errors.Is(r.rtErr, tt.want) {
				t.Errorf("RoundTrip error %v, want %v", r.rtErr, tt.want)
			}
			if n := dials.Load(); n != 0 {
				t.Errorf("dialed %d times, want 0", n)
			}
		})
	}
}

// TestRoundTripContextDoneKeepsIdleConnection: a call whose context ended
// before it started does not spoil the idle connection it would have used.
func TestRoundTripContextDoneKeepsIdleConnection(t *testing.T) {
	srv, _ := newServer(t, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
	tr, dials := newTransport(t, &http1.Transport{})
	get(t, tr, srv.URL)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if r := call(t, tr, newRequest(t, ctx, "GET", srv.URL, nil, 0)); r.rtErr == nil {
		t.Fatal("a call with a cancelled context succeeded")
	}
	get(t, tr, srv.URL)
	if n := dials.Load(); n != 1 {
		t.Errorf("dialed %d times, want 1", n)
	}
}

// TestMaxResponseHeaderBytes: an answer's head up to MaxResponseHeaderBytes
// (64 KiB when zero) comes through; a larger one fails the call with
// ErrResponseHeaderTooLarge and its connection is not reused.
func TestMaxResponseHeaderBytes(t *testing.T) {
	srv, _ := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		n, _ := strconv.Atoi(r.URL.Query().Get("n"))
		w.Header().Set("X-Big", strings.Repeat("b", n))
		io.WriteString(w, "body")
	})
	tests := []struct {
		name   string
		limit  int64
		size   int
		wantOK bool
	}{
		{name: "default, under 64 KiB", size: 60 << 10, wantOK: true},
		{name: "default, over 64 KiB", size: 70 << 10},
		{name: "4 KiB, under", limit: 4 << 10, size: 3 << 10, wantOK: true},
		{name: "4 KiB, over", limit: 4 << 10, size: 5 << 10},
		{name: "4 KiB, far over", limit: 4 << 10, size: 1 << 20},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr, _ := newTransport(t, &http1.Transport{MaxResponseHeaderBytes: tt.limit})
			r := call(t, tr, newRequest(t, newCtx(t), "GET", srv.URL+"/?n="+strconv.Itoa(tt.size), nil, 0))
			if !tt.wantOK {
				if !errors.Is(r.rtErr, http1.ErrResponseHeaderTooLarge) {
					t.Errorf("RoundTrip error %v, want ErrResponseHeaderTooLarge", r.rtErr)
				}
				if n := tr.IdleConns(); n != 0 {
					t.Errorf("%d idle connections, want 0", n)
				}
				return
			}
			if err := r.err(); err != nil {
				t.Fatal(err)
			}
			if len(r.resp.Header.Get("X-Big")) != tt.size || r.body != "body" {
				t.Errorf("got %d header bytes and body %q", len(r.resp.Header.Get("X-Big")), r.body)
			}
		})
	}
}

// TestRoundTripMalformedAnswers: a malformed answer fails the call or the
// read of its body, by itself (not at the context's deadline), and the
// connection is not reused.
func TestRoundTripMalformedAnswers(t *testing.T) {
	tests := []struct {
		name    string
		answer  string
		closes  bool  // the destination closes after the answer; else it keeps the connection open
		wantErr error // errors.Is target, when it matters
	}{
		{name: "garbage status line", answer: "hello world\r\n\r\n"},
		{name: "unknown protocol", answer: "HTTZ/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"},
		{name: "status code not a number", answer: "HTTP/1.1 2x0 OK\r\nContent-Length: 0\r\n\r\n"},
		{name: "header line without colon", answer: "HTTP/1.1 200 OK\r\nNoColonHere\r\nContent-Length: 0\r\n\r\n"},
		{name: "EOF in the middle of the head", answer: "HTTP/1.1 200 OK\r\nContent-Le", closes: true},
		{name: "EOF after the status line", answer: "HTTP/1.1 200 OK\r\n", closes: true},
		{name: "closed before any byte", answer: "", closes: true},
		{name: "Content-Length not a number", answer: "HTTP/1.1 200 OK\r\nContent-Length: ten\r\n\r\n0123456789"},
		{name: "conflicting Content-Lengths", answer: "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\nabc"},
		{name: "chunk size not hex", answer: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nhello\r\n0\r\n\r\n"},
		{name: "chunk longer than its size", answer: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nhello\r\n0\r\n\r\n"},
		{name: "chunked body cut short", answer: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhel", closes: true},
		{name: "Content-Length 10, closed after 5", answer: "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n12345", closes: true, wantErr: io.ErrUnexpectedEOF},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newRawServer(t, func(s *rawServer, c net.Conn) {
				if _, err := http.ReadRequest(bufio.NewReader(c)); err != nil {
					return
				}
				io.WriteString(c, tt.answer)
				if !tt.closes {
					<-s.done
				}
			})
			tr, _ := newTransport(t, &http1.Transport{})
			r := call(t, tr, newRequest(t, newCtx(t), "GET", srv.url, nil, 0))
			err := r.err()
			switch {
			case err == nil:
				t.Errorf("the call succeeded: status %d, body %q", r.resp.StatusCode, r.body)
			case strings.Contains(err.Error(), "PANIC"):
				t.Error(err)
			case errors.Is(err, context.DeadlineExceeded):
				t.Errorf("the call failed only at its deadline: %v", err)
			case tt.wantErr != nil && !errors.Is(err, tt.wantErr):
				t.Errorf("error %v, want %v", err, tt.wantErr)
			}
			if n := tr.IdleConns(); n != 0 {
				t.Errorf("%d idle connections, want 0", n)
			}
		})
	}
}

// TestRoundTripDialError: a dial failure comes back as the dialer's
// *net.OpError.
func TestRoundTripDialError(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	tr, dials := newTransport(t, &http1.Transport{})
	r := call(t, tr, newRequest(t, newCtx(t), "POST", "http://"+addr+"/", strings.NewReader("x"), 1))
	var opErr *net.OpError
	if !errors.As(r.rtErr, &opErr) {
		t.Fatalf("RoundTrip error %v (%T), want a *net.OpError", r.rtErr, r.rtErr)
	}
	if opErr.Op != "dial" {
		t.Errorf("OpError.Op %q, want dial", opErr.Op)
	}
	if n := dials.Load(); n != 1 {
		t.Errorf("dialed %d times, want 1", n)
	}
}

// TestTransportLeavesNoGoroutines: once its calls have ended and its idle
// connections are closed, the transport has left no goroutine behind
// (it runs none but the writer of a streaming body).
func TestTransportLeavesNoGoroutines(t *testing.T) {
	srv, states := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		if r.URL.Path == "/big" {
			io.WriteString(w, strings.Repeat("x", 256<<10))
			return
		}
		w.Write(b)
	})
	before := runtime.NumGoroutine()
	tr, _ := newTransport(t, &http1.Transport{ReadAheadMax: 64})
	for i := range 50 {
		body := strings.Repeat("s", i*10) // within and over the read-ahead
		mustCall(t, tr, newRequest(t, newCtx(t), "POST", srv.URL, strings.NewReader(body), int64(len(body))))
		mustCall(t, tr, newRequest(t, newCtx(t), "POST", srv.URL, io.NopCloser(strings.NewReader(body)), -1))
	}
	var wg sync.WaitGroup
	for range 10 {
		wg.Go(func() {
			for range 10 {
				body := strings.Repeat("c", 100)
				doCall(tr, newRequest(t, newCtx(t), "POST", srv.URL, strings.NewReader(body), int64(len(body))))
			}
		})
	}
	wg.Wait()
	// An answer body closed early, and a call cut by its context.
	resp, err := tr.RoundTrip(newRequest(t, newCtx(t), "GET", srv.URL+"/big", nil, 0))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	ctx, cancel := context.WithCancel(newCtx(t))
	pr, pw := io.Pipe()
	go pw.Write([]byte("started"))
	res := make(chan result, 1)
	go func() { res <- doCall(tr, newRequest(t, ctx, "POST", srv.URL, pr, -1)) }()
	cancel()
	receive(t, res, "the cancelled call to end")
	pw.Close()
	tr.CloseIdleConnections()
	testproc.Eventually(t, waitLimit, "the destination sees every connection closed", func() bool {
		return states.closed.Load() == states.opened.Load()
	})
	t.Cleanup(func() {
		if t.Failed() {
			buf := make([]byte, 1<<20)
			t.Logf("%d goroutines before, now:\n%s", before, buf[:runtime.Stack(buf, true)])
		}
	})
	testproc.Eventually(t, waitLimit, "no goroutine is left", func() bool { return runtime.NumGoroutine() <= before })
}

// BenchmarkSmallPost: a 200-byte POST answered 200 with a small body,
// through this Transport and through net/http's (HTTP/1.1, as configured
// for destinations), one call at a time and 32 per core at once, as a
// proxy's calls come. Besides time and allocations it reports the
// process's CPU time per call (cpu-µs/op: client and the in-process server
// together, the server the same for both clients). One call at a time on
// two cores is where this Transport does worst: each call parks and wakes
// its one goroutine, and the idle core spins looking for work.
func BenchmarkSmallPost(b *testing.B) {
	clients := []struct {
		name  string
		newRT func() http.RoundTripper
	}{
		{"http1", func() http.RoundTripper { return &http1.Transport{Dial: (&net.Dialer{}).DialContext} }},
		{"net-http", func() http.RoundTripper {
			tr := &http.Transport{
				Proxy:               nil,
				DialContext:         (&net.Dialer{}).DialContext,
				MaxIdleConnsPerHost: 1024,
				DisableCompression:  true,
				Protocols:           new(http.Protocols),
			}
			tr.Protocols.SetHTTP1(true)
			return tr
		}},
	}
	for _, c := range clients {
		for _, perCore := range []int{0, 32} {
			name := c.name + "/one-at-a-time"
			if perCore > 0 {
				name = fmt.Sprintf("%s/%d-per-core", c.name, perCore)
			}
			b.Run(name, func(b *testing.B) { benchmarkSmallPost(b, c.newRT(), perCore) })
		}
	}
}

// benchmarkSmallPost runs the calls of BenchmarkSmallPost through rt: one
// at a time when perCore is 0, else perCore goroutines per core.
func benchmarkSmallPost(b *testing.B, rt http.RoundTripper, perCore int) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		io.WriteString(w, `{"accepted":true}`)
	}))
	defer srv.Close()
	defer rt.(interface{ CloseIdleConnections() }).CloseIdleConnections()
	payload := bytes.Repeat([]byte("p"), 200)
	post := func() error {
		req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, srv.URL, bytes.NewReader(payload))
		if err != nil {
			return err
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := rt.RoundTrip(req)
		if err != nil {
			return err
		}
		_, err = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if err == nil && resp.StatusCode != http.StatusOK {
			err = fmt.Errorf("status %d", resp.StatusCode)
		}
		return err
	}
	b.ReportAllocs()
	cpu0 := processCPU(b)
	if perCore == 0 {
		for b.Loop() {
			if err := post(); err != nil {
				b.Fatal(err)
			}
		}
	} else {
		b.SetParallelism(perCore)
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if err := post(); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	b.ReportMetric((processCPU(b)-cpu0).Seconds()*1e6/float64(b.N), "cpu-µs/op")
}

// processCPU is the CPU time (user and system) this process has used.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
