package h2c_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"knative.dev/event-forwarding-proxy/delivery/h2c"
)

// waitLimit bounds every wait of these tests: a call's context, a watchdog
// on calls that a broken transport could block, a polled condition.
const waitLimit = 10 * time.Second

// Compile-time check: the Transport is a RoundTripper.
var _ http.RoundTripper = (*h2c.Transport)(nil)

// newTransport wraps tr's Dial (a net.Dialer when nil) in one that counts
// its dials (the way to tell a reused connection from a new one), and
// closes its idle connections when the test ends.
func newTransport(t testing.TB, tr *h2c.Transport) (*h2c.Transport, *atomic.Int64) {
	t.Helper()
	var dials atomic.Int64
	dial := tr.Dial
	if dial == nil {
		dial = (&net.Dialer{}).DialContext
	}
	tr.Dial = func(ctx context.Context, network, addr string) (net.Conn, error) {
		dials.Add(1)
		return dial(ctx, network, addr)
	}
	t.Cleanup(tr.CloseIdleConnections)
	return tr, &dials
}

// countingListener counts the connections it accepted and those the server
// closed.
type countingListener struct {
	net.Listener
	accepted, closed atomic.Int64
}

func (l *countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	l.accepted.Add(1)
	return &countedConn{Conn: c, l: l}, nil
}

type countedConn struct {
	net.Conn
	l    *countingListener
	once sync.Once
}

func (c *countedConn) Close() error {
	c.once.Do(func() { c.l.closed.Add(1) })
	return c.Conn.Close()
}

// goServer is Go's own h2c server (HTTP/2 with prior knowledge, no TLS) on
// loopback.
type goServer struct {
	url  string
	addr string
	ln   *countingListener
}

// newGoServer starts a Go h2c server running h, configured by conf (nil:
// Go's defaults).
func newGoServer(t testing.TB, h http.HandlerFunc, conf *http.HTTP2Config) *goServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cl := &countingListener{Listener: ln}
	p := new(http.Protocols)
	p.SetUnencryptedHTTP2(true)
	srv := &http.Server{Handler: h, Protocols: p, HTTP2: conf}
	served := make(chan struct{})
	go func() {
		defer close(served)
		srv.Serve(cl)
	}()
	t.Cleanup(func() {
		srv.Close()
		<-served
	})
	return &goServer{url: "http://" + ln.Addr().String(), addr: ln.Addr().String(), ln: cl}
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
// goroutine watched for 5 s longer than the request's context (waitLimit
// if it has no deadline), so that a transport that
// blocks yields errWatchdog instead of hanging the test. A panic in the
// transport is a result error that names it. Safe on any goroutine.
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
	limit := waitLimit
	if d, ok := req.Context().Deadline(); ok {
		limit = time.Until(d)
	}
	select {
	case r := <-done:
		return r
	case <-time.After(limit + 5*time.Second):
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

// goCall runs req through tr on a new goroutine; its result arrives on the
// channel returned.
func goCall(tr http.RoundTripper, req *http.Request) <-chan result {
	res := make(chan result, 1)
	go func() { res <- doCall(tr, req) }()
	return res
}

func receive[T any](t testing.TB, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(waitLimit):
		t.Fatalf("timed out after %s waiting for %s", waitLimit, what)
		panic("unreachable")
	}
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

// closeTracker is a request body that records that it was closed.
type closeTracker struct {
	io.Reader
	closed atomic.Bool
}

func (c *closeTracker) Close() error {
	c.closed.Store(true)
	return nil
}

// pattern returns n bytes that differ from one offset to the next over a
// long period, so that a byte lost, doubled or moved shows.
func pattern(n int) []byte {
	b := make([]byte, n)
	var x uint32 = 2463534242
	for i := range b {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		b[i] = byte(x)
	}
	return b
}
