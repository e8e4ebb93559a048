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
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"knative.dev/event-forwarding-proxy/delivery/http1"
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

// newOKServer starts a loopback HTTP/1.1 server that answers every call
// "ok".
func newOKServer(t *testing.T) (*httptest.Server, *connStates) {
	t.Helper()
	return newServer(t, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
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
