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

package h2c_test

// Tests of Transport.Go: a call whose answer goes to a function, with no
// goroutine waiting while the destination holds it.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/http2"

	"knative.dev/event-forwarding-proxy/delivery/h2c"
	"knative.dev/event-forwarding-proxy/test/testproc"
)

// goResult is what a call started with Go handed its done function: the
// answer, its body read to the end and closed, or the error.
type goResult struct {
	resp *http.Response
	body string
	err  error // done's, or reading the body's
}

// goRecorder records the calls of a done function: each one's result, and
// how many there were (done must run once).
type goRecorder struct {
	results chan goResult
	calls   atomic.Int64
}

func newGoRecorder() *goRecorder { return &goRecorder{results: make(chan goResult, 2)} }

// done is the done function: it reads the answer's body and records.
func (g *goRecorder) done(resp *http.Response, err error) {
	g.calls.Add(1)
	r := goResult{resp: resp, err: err}
	if err == nil {
		b, rerr := io.ReadAll(resp.Body)
		resp.Body.Close()
		r.body, r.err = string(b), rerr
	}
	select {
	case g.results <- r:
	default: // a third call: calls says so
	}
}

// result waits, bounded, for done's (first) result.
func (g *goRecorder) result(t testing.TB) goResult {
	t.Helper()
	return receive(t, g.results, "done to be called")
}

// startGo runs tr.Go(req, done) and waits, bounded, for Go to return: a Go
// that waits for the answer fails the test instead of hanging it.
func startGo(t testing.TB, tr *h2c.Transport, req *http.Request, done func(*http.Response, error)) {
	t.Helper()
	returned := make(chan struct{})
	go func() {
		defer close(returned)
		tr.Go(req, done)
	}()
	receive(t, returned, "Go to return")
}

// goRecord starts req with Go and returns the record of its done.
func goRecord(t testing.TB, tr *h2c.Transport, req *http.Request) *goRecorder {
	t.Helper()
	g := newGoRecorder()
	startGo(t, tr, req, g.done)
	return g
}

// TestGoAnswer: done gets the answer, status, headers and body, with the
// request it answers; it is called once, and never again.
func TestGoAnswer(t *testing.T) {
	srv := newGoServer(t, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		w.Header().Set("X-Answer", "yes")
		w.WriteHeader(http.StatusOK)
		io.WriteString(w, r.Method+" "+r.URL.Path+" "+string(b))
	}, nil)
	tr, dials := newTransport(t, &h2c.Transport{})
	tests := []struct {
		name, method, path, body, want string
	}{
		{name: "GET", method: "GET", path: "/plain", want: "GET /plain "},
		{name: "POST with a small body", method: "POST", path: "/post", body: "payload", want: "POST /post payload"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := newRequest(t, newCtx(t), tt.method, srv.url+tt.path, strings.NewReader(tt.body), int64(len(tt.body)))
			g := goRecord(t, tr, req)
			r := g.result(t)
			if r.err != nil {
				t.Fatalf("done got %v, want the answer", r.err)
			}
			if r.resp.StatusCode != http.StatusOK || r.body != tt.want || r.resp.Header.Get("X-Answer") != "yes" {
				t.Errorf("answer %d %q, X-Answer %q; want 200 %q, yes", r.resp.StatusCode, r.body, r.resp.Header.Get("X-Answer"), tt.want)
			}
			if r.resp.Request != req {
				t.Errorf("the answer's Request is not the request sent")
			}
			testproc.Consistently(t, 300*time.Millisecond, "done called exactly once", func() bool { return g.calls.Load() == 1 })
		})
	}
	if n := dials.Load(); n != 1 {
		t.Errorf("dialed %d times, want 1", n)
	}
}

// TestGoHeldCallsAddNoGoroutines: 1,000 calls started with Go and held by
// the destination (a frame server with no goroutine per stream) add no
// goroutine per call: there are no callers waiting, and the transport must
// not wait in their place. RoundTrip's test allows one goroutine per
// caller; here the bound is a reader per connection and a few more. Once
// answered, every done gets its answer, and the goroutines are gone.
func TestGoHeldCallsAddNoGoroutines(t *testing.T) {
	const calls = 1000
	srv := newHoldServer(t, 10000)
	base := runtime.NumGoroutine()
	tr, _ := newTransport(t, &h2c.Transport{})
	ctx := newCtx(t)
	// Warm up: one connection, up and idle.
	warm := goRecord(t, tr, newRequest(t, ctx, "GET", srv.url, nil, 0))
	testproc.Eventually(t, waitLimit, "the first call reaches the destination", func() bool { return srv.streams.Load() == 1 })
	srv.answerAll()
	if r := warm.result(t); r.err != nil || r.body != "ok" {
		t.Fatalf("first call: %q, %v; want ok", r.body, r.err)
	}
	runtime.GC()
	before := runtime.NumGoroutine()

	recs := make([]*goRecorder, calls)
	for i := range recs {
		recs[i] = goRecord(t, tr, newRequest(t, ctx, "GET", srv.url, nil, 0))
	}
	testproc.Eventually(t, waitLimit, fmt.Sprintf("%d calls are held", calls), func() bool { return srv.streams.Load() == calls+1 })
	during := runtime.NumGoroutine()
	conns := int(srv.accepted.Load())
	// Per new connection: the transport's reader, one more it may run,
	// the server's reader. The warm connection's are in before.
	bound := (conns-1)*3 + 10
	t.Logf("%d goroutines before, %d with %d calls held on %d connections (bound %d)", before, during, calls, conns, before+bound)
	if during-before > bound {
		buf := make([]byte, 1<<20)
		t.Errorf("%d goroutines more with %d calls held on %d connections, want at most %d (a goroutine per held call?)\n%s",
			during-before, calls, conns, bound, buf[:runtime.Stack(buf, true)])
	}
	var early int
	for _, g := range recs {
		if g.calls.Load() != 0 {
			early++
		}
	}
	if early > 0 {
		t.Errorf("%d done functions ran while their calls were held", early)
	}

	srv.answerAll()
	var failed, twice int
	for _, g := range recs {
		if r := g.result(t); r.err != nil || r.resp.StatusCode != http.StatusOK || r.body != "ok" {
			if failed++; failed <= 5 {
				t.Errorf("a held call: %q, %v; want 200 ok", r.body, r.err)
			}
		}
	}
	for _, g := range recs {
		if g.calls.Load() != 1 {
			twice++
		}
	}
	if failed > 0 || twice > 0 {
		t.Errorf("%d of %d calls failed, %d done functions ran other than once", failed, calls, twice)
	}
	tr.CloseIdleConnections()
	testproc.Eventually(t, waitLimit, "the transport's connections are closed", func() bool { return tr.Conns() == 0 })
	testproc.Eventually(t, waitLimit, "no goroutine is left", func() bool { return runtime.NumGoroutine() <= base })
}

// TestGoStreamingBody: a 100 KiB body, beyond the 64 KiB initial window,
// streams through Go within the windows the destination grants, and
// arrives byte-exact; done gets the answer; the body is closed. Go does
// not wait for a streaming body: it returns once the HEADERS are out, with
// the body's pipe still empty.
func TestGoStreamingBody(t *testing.T) {
	data := pattern(100 << 10)
	srv, got := newCaptureServer(t)
	tests := []struct {
		name string
		pipe bool // unknown length, through a pipe written once Go returned
	}{
		{name: "declared length"},
		{name: "unknown length, written after Go returned", pipe: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr, _ := newTransport(t, &h2c.Transport{})
			body := &closeTracker{Reader: bytes.NewReader(data)}
			req := newRequest(t, newCtx(t), "POST", srv.url+"/body", body, int64(len(data)))
			var pw *io.PipeWriter
			if tt.pipe {
				var pr *io.PipeReader
				pr, pw = io.Pipe()
				t.Cleanup(func() { pr.Close() })
				body = &closeTracker{Reader: pr}
				req = newRequest(t, newCtx(t), "POST", srv.url+"/body", body, -1)
			}
			g := goRecord(t, tr, req)
			if tt.pipe {
				go func() {
					if _, err := pw.Write(data); err == nil {
						pw.Close()
					}
				}()
			}
			c := receive(t, got, "the request at the destination")
			if c.err != nil {
				t.Fatalf("the destination read the request: %v", c.err)
			}
			if !c.req.ended || !bytes.Equal(c.req.body, data) {
				t.Errorf("the destination got %d bytes (ended %v), want the %d sent, byte-exact", len(c.req.body), c.req.ended, len(data))
			}
			if r := g.result(t); r.err != nil || r.resp.StatusCode != http.StatusOK || r.body != "ok" {
				t.Errorf("done got %q, %v; want 200 ok", r.body, r.err)
			}
			testproc.Eventually(t, waitLimit, "the request body is closed", body.Closed.Load)
			if n := g.calls.Load(); n != 1 {
				t.Errorf("done ran %d times, want once", n)
			}
		})
	}
}

// writeCounter is a connection that counts the bytes written to it.
type writeCounter struct {
	net.Conn
	n *atomic.Int64
}

func (c writeCounter) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	c.n.Add(int64(n))
	return n, err
}

// TestGoReturnsBeforeAnswer: Go returns once the call's HEADERS are
// written, while the destination still holds the call; done has not been
// called then, and is once the answer comes.
func TestGoReturnsBeforeAnswer(t *testing.T) {
	srv := newHoldServer(t, 100)
	var written atomic.Int64
	tr, _ := newTransport(t, &h2c.Transport{Dial: func(ctx context.Context, network, addr string) (net.Conn, error) {
		nc, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return writeCounter{Conn: nc, n: &written}, nil
	}})
	// Warm up: the connection is up and idle, nothing left to write.
	warm := goRecord(t, tr, newRequest(t, newCtx(t), "GET", srv.url, nil, 0))
	testproc.Eventually(t, waitLimit, "the first call reaches the destination", func() bool { return srv.streams.Load() == 1 })
	srv.answerAll()
	if r := warm.result(t); r.err != nil || r.body != "ok" {
		t.Fatalf("first call: %q, %v; want ok", r.body, r.err)
	}
	w0 := written.Load()

	g := goRecord(t, tr, newRequest(t, newCtx(t), "GET", srv.url+"/held", nil, 0))
	if w := written.Load(); w <= w0 {
		t.Errorf("Go returned with nothing written (%d bytes before and after): its HEADERS were not out", w)
	}
	select {
	case r := <-g.results:
		t.Fatalf("done was called (%v, %v) before the destination answered", r.resp, r.err)
	default:
	}
	testproc.Eventually(t, waitLimit, "the call is held by the destination", func() bool { return srv.streams.Load() == 2 })
	if n := g.calls.Load(); n != 0 {
		t.Fatalf("done ran %d times while the destination holds the call", n)
	}
	srv.answerAll()
	if r := g.result(t); r.err != nil || r.resp.StatusCode != http.StatusOK || r.body != "ok" {
		t.Errorf("done got %q, %v; want 200 ok", r.body, r.err)
	}
	if n := g.calls.Load(); n != 1 {
		t.Errorf("done ran %d times, want once", n)
	}
}

// strictBody is a request body that records its Close calls and any Read
// after the first Close.
type strictBody struct {
	mu             sync.Mutex
	r              io.Reader
	closes         int
	readAfterClose bool
}

func (b *strictBody) Read(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closes > 0 {
		b.readAfterClose = true
		return 0, errors.New("read after close")
	}
	return b.r.Read(p)
}

func (b *strictBody) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.closes++
	return nil
}

// TestGoResetBeforeStreamingBody: a stream reset (REFUSED_STREAM) as soon
// as its HEADERS arrive, while its body of unknown length is about to
// stream, fails the call in done; the body, which cannot go out again, is
// closed once and not read after. The reset races with Go handing the
// body to its writer, so the test makes many calls; under -race it also
// catches the two touching the call's state unsynchronized.
func TestGoResetBeforeStreamingBody(t *testing.T) {
	const calls = 300
	srv := newFrameServer(t, nil, func(fc *frameConn) {
		for {
			f, err := fc.next()
			if err != nil {
				return
			}
			if hf, ok := f.(*http2.MetaHeadersFrame); ok && fc.writeRST(hf.StreamID, http2.ErrCodeRefusedStream) != nil {
				return
			}
		}
	})
	tr, _ := newTransport(t, &h2c.Transport{})
	var bodies []*strictBody
	var recs []*goRecorder
	for range calls {
		body := &strictBody{r: strings.NewReader(strings.Repeat("b", 100))}
		bodies = append(bodies, body)
		recs = append(recs, goRecord(t, tr, newRequest(t, newCtx(t), "POST", srv.url+"/", body, -1)))
	}
	for i, g := range recs {
		if r := g.result(t); r.err == nil {
			t.Errorf("call %d: done got the answer %q, want an error", i, r.body)
		}
	}
	testproc.Eventually(t, waitLimit, "every request body is closed", func() bool {
		for _, b := range bodies {
			b.mu.Lock()
			closed := b.closes > 0
			b.mu.Unlock()
			if !closed {
				return false
			}
		}
		return true
	})
	var twice, readAfter int
	for _, b := range bodies {
		b.mu.Lock()
		if b.closes > 1 {
			twice++
		}
		if b.readAfterClose {
			readAfter++
		}
		b.mu.Unlock()
	}
	if twice > 0 || readAfter > 0 {
		t.Errorf("of %d request bodies, %d were closed more than once, %d read after Close", calls, twice, readAfter)
	}
}
