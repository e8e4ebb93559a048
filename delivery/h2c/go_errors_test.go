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

// Transport.Go when the call does not simply get its answer: contexts,
// refused streams, GOAWAY, broken connections, invalid requests, dials
// that fail, a stream limit reached.

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/net/http2"

	"knative.dev/event-forwarding-proxy/delivery/h2c"
	"knative.dev/event-forwarding-proxy/test/testproc"
)

// streamEvent is a frame a watch server read: a request's HEADERS, or a
// RST_STREAM.
type streamEvent struct {
	stream uint32
	path   string // of HEADERS
	reset  bool
	code   http2.ErrCode // of RST_STREAM
}

// newWatchServer starts a frame server that reports the HEADERS of every
// request and every RST_STREAM on the channel returned. It answers /ok
// with 200 "ok" at once, /part with 200 and the first bytes ("part") of a
// body it never ends, and holds any other path.
func newWatchServer(t testing.TB) (*frameServer, <-chan streamEvent) {
	t.Helper()
	events := make(chan streamEvent, 64)
	srv := newFrameServer(t, nil, func(fc *frameConn) {
		for {
			f, err := fc.next()
			if err != nil {
				return
			}
			var ev streamEvent
			switch f := f.(type) {
			case *http2.MetaHeadersFrame:
				ev = streamEvent{stream: f.StreamID, path: fieldValues(f.Fields, ":path")[0]}
				switch ev.path {
				case "/ok":
					err = fc.answer(f.StreamID, "200", "ok")
				case "/part":
					if err = fc.writeHeaders(f.StreamID, false, ":status", "200"); err == nil {
						err = fc.writeData(f.StreamID, false, []byte("part"))
					}
				}
			case *http2.RSTStreamFrame:
				ev = streamEvent{stream: f.StreamID, reset: true, code: f.ErrCode}
			default:
				continue
			}
			if err != nil {
				return
			}
			select {
			case events <- ev:
			case <-fc.srv.done:
				return
			}
		}
	})
	return srv, events
}

// TestGoContextWhileHeld: the request's context ending while the
// destination holds the call resets the stream (RST_STREAM CANCEL) and
// done gets an error wrapping the context's; the connection carries the
// next call.
func TestGoContextWhileHeld(t *testing.T) {
	tests := []struct {
		name    string
		context func(t *testing.T) (context.Context, func()) // the context, and what ends it once the call is held
		want    error
	}{
		{name: "cancelled", context: cancellable, want: context.Canceled},
		{name: "deadline", context: func(t *testing.T) (context.Context, func()) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			t.Cleanup(cancel)
			return ctx, func() {}
		}, want: context.DeadlineExceeded},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv, events := newWatchServer(t)
			tr, dials := newTransport(t, &h2c.Transport{})
			ctx, end := tt.context(t)
			g := goRecord(t, tr, newRequest(t, ctx, "GET", srv.url+"/held", nil, 0))
			held := receive(t, events, "the call's HEADERS at the destination")
			if held.reset || held.path != "/held" {
				t.Fatalf("the destination saw %+v first, want the call's HEADERS", held)
			}
			if errors.Is(tt.want, context.Canceled) && g.calls.Load() != 0 {
				t.Fatalf("done ran while the destination holds the call and its context is live")
			}
			end()
			r := g.result(t)
			if !errors.Is(r.err, tt.want) || r.resp != nil {
				t.Errorf("done got %v, %v; want no answer and an error wrapping %v", r.resp, r.err, tt.want)
			}
			rst := receive(t, events, "RST_STREAM at the destination")
			if !rst.reset || rst.stream != held.stream || rst.code != http2.ErrCodeCancel {
				t.Errorf("the destination saw %+v, want RST_STREAM CANCEL on stream %d", rst, held.stream)
			}
			next := goRecord(t, tr, newRequest(t, newCtx(t), "GET", srv.url+"/ok", nil, 0))
			if r := next.result(t); r.err != nil || r.body != "ok" {
				t.Errorf("next call: %q, %v; want ok", r.body, r.err)
			}
			if n, c := dials.Load(), g.calls.Load(); n != 1 || c != 1 {
				t.Errorf("dialed %d times, done of the held call ran %d times; want 1 and 1", n, c)
			}
		})
	}
}

// TestGoContextAfterAnswer: once done got the answer, the request's
// context ending makes reading the body fail (not io.EOF), and resets the
// stream.
func TestGoContextAfterAnswer(t *testing.T) {
	for _, readFirst := range []bool{false, true} {
		t.Run("read first "+strconv.FormatBool(readFirst), func(t *testing.T) {
			srv, events := newWatchServer(t)
			tr, _ := newTransport(t, &h2c.Transport{})
			ctx, cancel := context.WithCancel(newCtx(t))
			defer cancel()
			answers := make(chan *http.Response, 1)
			startGo(t, tr, newRequest(t, ctx, "GET", srv.url+"/part", nil, 0), func(resp *http.Response, err error) {
				if err != nil {
					t.Errorf("done got %v, want the answer", err)
				}
				answers <- resp
			})
			resp := receive(t, answers, "done to get the answer")
			if resp == nil {
				t.FailNow()
			}
			defer resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("status %d, want 200", resp.StatusCode)
			}
			held := receive(t, events, "the call's HEADERS at the destination")
			if readFirst {
				buf := make([]byte, 4)
				if _, err := io.ReadFull(resp.Body, buf); err != nil || string(buf) != "part" {
					t.Fatalf("first bytes %q, %v; want part", buf, err)
				}
			}
			cancel()
			read := make(chan error, 1)
			go func() {
				_, err := io.ReadAll(resp.Body)
				read <- err
			}()
			if err := receive(t, read, "the body's read to end"); !errors.Is(err, context.Canceled) {
				t.Errorf("reading the body after the context ended: %v, want an error wrapping context.Canceled", err)
			}
			rst := receive(t, events, "RST_STREAM at the destination")
			if !rst.reset || rst.stream != held.stream || rst.code != http2.ErrCodeCancel {
				t.Errorf("the destination saw %+v, want RST_STREAM CANCEL on stream %d", rst, held.stream)
			}
		})
	}
}

// TestGoRetried: a call the destination refuses (REFUSED_STREAM) or drops
// with a GOAWAY whose last stream is below it, before answering, goes out
// again (on a new connection after GOAWAY) when its body can be sent again,
// and done gets the answer, once; otherwise done gets an error.
func TestGoRetried(t *testing.T) {
	tests := []struct {
		name        string
		goAway      bool
		body        io.Reader
		length      int64
		wantBody    string // "": done gets an error
		wantStreams int64  // the streams the destination saw
		wantConns   int64
	}{
		{name: "refused, no body", wantBody: "|/", wantStreams: 2, wantConns: 1},
		{name: "refused, small body", body: strings.NewReader("payload"), length: 7, wantBody: "payload", wantStreams: 2, wantConns: 1},
		{name: "refused, body of unknown length", body: strings.NewReader("streamed"), length: -1, wantStreams: 1, wantConns: 1},
		{name: "GOAWAY, no body", goAway: true, wantBody: "|/", wantStreams: 2, wantConns: 2},
		{name: "GOAWAY, small body", goAway: true, body: strings.NewReader("payload"), length: 7, wantBody: "payload", wantStreams: 2, wantConns: 2},
		{name: "GOAWAY, body of unknown length", goAway: true, body: strings.NewReader("streamed"), length: -1, wantStreams: 1, wantConns: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newFrameServer(t, nil, func(fc *frameConn) {
				echoStreams(fc, func(fc *frameConn, hf *http2.MetaHeadersFrame) bool {
					if fc.srv.streams.Load() != 1 {
						return false
					}
					if tt.goAway {
						fc.write(func(fr *http2.Framer) error { return fr.WriteGoAway(0, http2.ErrCodeNo, nil) })
					} else {
						fc.writeRST(hf.StreamID, http2.ErrCodeRefusedStream)
					}
					return true
				})
			})
			tr, dials := newTransport(t, &h2c.Transport{})
			g := goRecord(t, tr, newRequest(t, newCtx(t), "POST", srv.url+"/", tt.body, tt.length))
			r := g.result(t)
			if tt.wantBody == "" && r.err == nil {
				t.Errorf("done got the answer %q, want an error: the body cannot be sent again", r.body)
			}
			if tt.wantBody != "" && (r.err != nil || r.body != tt.wantBody) {
				t.Errorf("done got %q, %v; want %q", r.body, r.err, tt.wantBody)
			}
			if n := srv.streams.Load(); n != tt.wantStreams {
				t.Errorf("the destination saw %d streams, want %d", n, tt.wantStreams)
			}
			if n, d := srv.accepted.Load(), dials.Load(); n != tt.wantConns || d != tt.wantConns {
				t.Errorf("the server accepted %d connections, the transport dialed %d; want %d", n, d, tt.wantConns)
			}
			testproc.Consistently(t, 100*time.Millisecond, "done called exactly once", func() bool { return g.calls.Load() == 1 })
		})
	}
}

// TestGoConnectionBroken: a connection closed abruptly while it carries
// held calls fails every one (none hangs, none goes out again: they were
// sent), and leaves the pool.
func TestGoConnectionBroken(t *testing.T) {
	const held = 20
	conns := make(chan net.Conn, 4)
	srv := newFrameServer(t, nil, func(fc *frameConn) {
		conns <- fc.conn
		holdStreams(fc)
	})
	tr, dials := newTransport(t, &h2c.Transport{})
	var recs []*goRecorder
	for range held {
		recs = append(recs, goRecord(t, tr, newRequest(t, newCtx(t), "GET", srv.url+"/held", nil, 0)))
	}
	testproc.Eventually(t, waitLimit, "every call is held", func() bool { return srv.streams.Load() == held })
	receive(t, conns, "the server's connection").Close()
	for i, g := range recs {
		if r := g.result(t); r.err == nil || r.resp != nil {
			t.Errorf("call %d: done got %v, %v; want an error", i, r.resp, r.err)
		}
	}
	testproc.Eventually(t, waitLimit, "the broken connection leaves the pool", func() bool { return tr.Conns() == 0 })
	for i, g := range recs {
		if n := g.calls.Load(); n != 1 {
			t.Errorf("call %d: done ran %d times, want once", i, n)
		}
	}
	if n, d, s := srv.accepted.Load(), dials.Load(), srv.streams.Load(); n != 1 || d != 1 || s != held {
		t.Errorf("accepted %d, dialed %d, %d streams; want 1, 1, %d (no call goes out again)", n, d, s, held)
	}
}

// TestGoInvalidRequest: an invalid request fails in done, once, with
// nothing sent (the next call takes the next stream id), and its body
// closed.
func TestGoInvalidRequest(t *testing.T) {
	srv, got := newCaptureServer(t)
	tr, dials := newTransport(t, &h2c.Transport{})
	first := goRecord(t, tr, newRequest(t, newCtx(t), "GET", srv.url+"/first", nil, 0))
	if c := receive(t, got, "the first request"); c.err != nil || c.req.stream != 1 {
		t.Fatalf("first request: %+v, %v; want stream 1", c.req, c.err)
	}
	if r := first.result(t); r.err != nil || r.body != "ok" {
		t.Fatalf("first call: %q, %v; want ok", r.body, r.err)
	}
	tests := []struct {
		name   string
		modify func(req *http.Request)
	}{
		{name: "newline in a header value", modify: func(req *http.Request) { req.Header.Set("X-Bad", "a\nb") }},
		{name: "space in a header name", modify: func(req *http.Request) { req.Header["X Bad"] = []string{"v"} }},
		{name: "invalid method", modify: func(req *http.Request) { req.Method = "BAD METHOD" }},
		{name: "https", modify: func(req *http.Request) { req.URL.Scheme = "https" }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body := &closeTracker{Reader: strings.NewReader("payload")}
			req := newRequest(t, newCtx(t), "POST", srv.url+"/invalid", body, 7)
			tt.modify(req)
			g := goRecord(t, tr, req)
			if r := g.result(t); r.err == nil || r.resp != nil {
				t.Errorf("done got %v, %v; want an error", r.resp, r.err)
			}
			testproc.Eventually(t, waitLimit, "the request body is closed", body.Closed.Load)
			testproc.Consistently(t, 100*time.Millisecond, "done called exactly once", func() bool { return g.calls.Load() == 1 })
		})
	}
	next := goRecord(t, tr, newRequest(t, newCtx(t), "GET", srv.url+"/next", nil, 0))
	c := receive(t, got, "the next request")
	if c.err != nil || c.req.stream != 3 || fieldValues(c.req.fields, ":path")[0] != "/next" {
		t.Errorf("after the invalid calls the destination got %+v, %v; want /next on stream 3 (nothing sent in between)", c.req, c.err)
	}
	if r := next.result(t); r.err != nil || r.body != "ok" {
		t.Errorf("next call: %q, %v; want ok", r.body, r.err)
	}
	if n := dials.Load(); n != 1 {
		t.Errorf("dialed %d times, want 1", n)
	}
}

// refusingURL returns the URL of a loopback port that a socket holds,
// bound and not listening, until the test ends: a dial to it is refused.
func refusingURL(t testing.TB) string {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Close(fd) })
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		t.Fatal(err)
	}
	return "http://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(sa.(*syscall.SockaddrInet4).Port))
}

// TestGoDialFailure: a destination that refuses the connection fails the
// call in done, once, with the dial's error; no connection is left.
func TestGoDialFailure(t *testing.T) {
	tr, dials := newTransport(t, &h2c.Transport{})
	g := goRecord(t, tr, newRequest(t, newCtx(t), "GET", refusingURL(t)+"/", nil, 0))
	if r := g.result(t); !errors.Is(r.err, syscall.ECONNREFUSED) || r.resp != nil {
		t.Errorf("done got %v, %v; want the dial's error (connection refused)", r.resp, r.err)
	}
	testproc.Consistently(t, 100*time.Millisecond, "done called exactly once", func() bool { return g.calls.Load() == 1 })
	if n, c := dials.Load(), tr.Conns(); n < 1 || c != 0 {
		t.Errorf("dialed %d times, %d connections open; want a dial and none open", n, c)
	}
}

// TestGoWaitsForStreamSlot: with one connection of one stream, taken by a
// held call, Go waits for a stream as long as its request's context lets
// it: cancelled, done gets context.Canceled and nothing went out; once the
// first call is answered, the next call takes the stream.
func TestGoWaitsForStreamSlot(t *testing.T) {
	srv := newHoldServer(t, 1)
	tr, dials := newTransport(t, &h2c.Transport{MaxConnsPerHost: 1})
	first := goRecord(t, tr, newRequest(t, newCtx(t), "GET", srv.url+"/first", nil, 0))
	testproc.Eventually(t, waitLimit, "the first call is held", func() bool { return srv.streams.Load() == 1 })

	ctx, cancel := context.WithCancel(newCtx(t))
	waiting := newGoRecorder()
	req := newRequest(t, ctx, "GET", srv.url+"/waiting", nil, 0)
	returned := make(chan struct{})
	go func() {
		defer close(returned)
		tr.Go(req, waiting.done)
	}()
	cancel()
	receive(t, returned, "Go to return once its context ended")
	if r := waiting.result(t); !errors.Is(r.err, context.Canceled) || r.resp != nil {
		t.Errorf("a call waiting for a stream, cancelled: %v, %v; want context.Canceled", r.resp, r.err)
	}
	if n := srv.streams.Load(); n != 1 {
		t.Errorf("%d streams reached the destination while its one stream was taken, want 1", n)
	}

	srv.answerAll()
	if r := first.result(t); r.err != nil || r.body != "ok" {
		t.Errorf("first call: %q, %v; want ok", r.body, r.err)
	}
	next := goRecord(t, tr, newRequest(t, newCtx(t), "GET", srv.url+"/next", nil, 0))
	testproc.Eventually(t, waitLimit, "the next call is held", func() bool { return srv.streams.Load() == 2 })
	srv.answerAll()
	if r := next.result(t); r.err != nil || r.body != "ok" {
		t.Errorf("next call: %q, %v; want ok", r.body, r.err)
	}
	if n, a := dials.Load(), srv.accepted.Load(); n != 1 || a != 1 {
		t.Errorf("dialed %d times, the server accepted %d; want 1 and 1", n, a)
	}
}

// failingConn is a connection whose Writes fail, writing nothing, once
// fail is set.
type failingConn struct {
	net.Conn
	fail *atomic.Bool
}

func (c failingConn) Write(p []byte) (int, error) {
	if c.fail.Load() {
		return 0, errors.New("the test broke the connection's writes")
	}
	return c.Conn.Write(p)
}

// TestGoHeadersWriteFails: a call whose HEADERS cannot be written (the
// connection's writes fail) was not processed: it goes out again, once, on
// a new connection, and done gets the answer, once.
func TestGoHeadersWriteFails(t *testing.T) {
	srv, got := newCaptureServer(t)
	var broken atomic.Bool // the first connection's writes fail
	var dialed atomic.Bool
	tr, dials := newTransport(t, &h2c.Transport{Dial: func(ctx context.Context, network, addr string) (net.Conn, error) {
		nc, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		if err != nil || dialed.Swap(true) {
			return nc, err
		}
		return failingConn{Conn: nc, fail: &broken}, nil
	}})
	warm := goRecord(t, tr, newRequest(t, newCtx(t), "GET", srv.url+"/first", nil, 0))
	if c := receive(t, got, "the first request"); c.err != nil {
		t.Fatal(c.err)
	}
	if r := warm.result(t); r.err != nil || r.body != "ok" {
		t.Fatalf("first call: %q, %v; want ok", r.body, r.err)
	}
	broken.Store(true)
	g := goRecord(t, tr, newRequest(t, newCtx(t), "GET", srv.url+"/again", nil, 0))
	if r := g.result(t); r.err != nil || r.body != "ok" {
		t.Errorf("done got %q, %v; want ok from a new connection", r.body, r.err)
	}
	if c := receive(t, got, "the call at the destination"); c.err != nil || fieldValues(c.req.fields, ":path")[0] != "/again" {
		t.Errorf("the destination got %+v, %v; want /again", c.req, c.err)
	}
	testproc.Consistently(t, 300*time.Millisecond, "done called once, and the call sent once", func() bool {
		if n, more := g.calls.Load(), len(got); n != 1 || more != 0 {
			t.Logf("done ran %d times; the destination got %d more requests", n, more)
			return false
		}
		return true
	})
	if n, a := dials.Load(), srv.accepted.Load(); n != 2 || a != 2 {
		t.Errorf("dialed %d times, the server accepted %d; want 2 and 2", n, a)
	}
}
