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

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/http2"

	"knative.dev/event-forwarding-proxy/delivery/h2c"
	"knative.dev/event-forwarding-proxy/test/testproc"
)

// heldServer is a Go h2c server whose handler for /held counts the call,
// then waits until its request's context ends (a reset stream) or the
// test releases it; /ok answers at once.
type heldServer struct {
	*goServer
	arrived atomic.Int64
	ended   chan error // a /held handler's request context ended: its error
	release chan struct{}
}

func newHeldServer(t *testing.T, conf *http.HTTP2Config) *heldServer {
	t.Helper()
	s := &heldServer{ended: make(chan error, 64), release: make(chan struct{})}
	s.goServer = newGoServer(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/held" {
			s.arrived.Add(1)
			select {
			case <-r.Context().Done():
				s.ended <- r.Context().Err()
				return
			case <-s.release:
			}
		}
		io.Copy(io.Discard, r.Body)
		io.WriteString(w, "ok")
	}, conf)
	t.Cleanup(func() { close(s.release) })
	return s
}

// TestContextWhileWaiting: a context cancelled, or past its deadline,
// while the call waits for its answer ends the call with an error
// satisfying errors.Is(err, ctx.Err()); the stream is reset (the handler's
// context ends); the transport serves the next call.
func TestContextWhileWaiting(t *testing.T) {
	type waitCase struct {
		name    string
		context func(t *testing.T) (context.Context, func()) // the context, and what ends it once the call is held
		body    string
		// expires, if set, is a deadline instead of context: the context
		// ends by itself, and the test does not wait for the call to be
		// held. A slow machine may not even have sent the call by then:
		// the test then tries again, with twice the time.
		expires time.Duration
		stalled bool // the body is a pipe that gives its first bytes, then nothing until the test ends
		want    error
	}
	tests := []waitCase{
		{name: "cancelled", context: cancellable, want: context.Canceled},
		{name: "cancelled, with a body", context: cancellable, body: "payload", want: context.Canceled},
		{name: "cancelled, with a stalled streaming body", context: cancellable, stalled: true, want: context.Canceled},
		{name: "deadline", expires: 300 * time.Millisecond, want: context.DeadlineExceeded},
	}
	// call makes one call of tt. It reports false, having checked nothing,
	// when a context that expires by itself did before the call reached
	// the destination.
	call := func(t *testing.T, tt waitCase) bool {
		t.Helper()
		srv := newHeldServer(t, nil)
		tr, _ := newTransport(t, &h2c.Transport{})
		var ctx context.Context
		end := func() {}
		if tt.expires > 0 {
			var cancel func()
			ctx, cancel = context.WithTimeout(context.Background(), tt.expires)
			t.Cleanup(cancel)
		} else {
			ctx, end = tt.context(t)
		}
		req := newRequest(t, ctx, "POST", srv.url+"/held", strings.NewReader(tt.body), int64(len(tt.body)))
		if tt.stalled {
			pr, pw := io.Pipe()
			t.Cleanup(func() { pw.CloseWithError(errors.New("the test ended")) })
			go pw.Write([]byte("first bytes"))
			req = newRequest(t, ctx, "POST", srv.url+"/held", pr, -1)
		}
		res := goCall(tr, req)
		if tt.expires == 0 {
			testproc.Eventually(t, waitLimit, "the call is held by the destination", func() bool { return srv.arrived.Load() == 1 })
		}
		end()
		r := receive(t, res, "the call to end")
		if tt.expires > 0 && srv.arrived.Load() == 0 {
			return false
		}
		if !errors.Is(r.RTErr, tt.want) {
			t.Errorf("RoundTrip error %v, want one wrapping %v", r.RTErr, tt.want)
		}
		if err := receive(t, srv.ended, "the handler's request context to end"); !errors.Is(err, context.Canceled) {
			t.Errorf("the handler's context ended with %v, want context.Canceled", err)
		}
		get(t, tr, srv.url+"/ok")
		return true
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for !call(t, tt) {
				if tt.expires >= waitLimit {
					t.Fatalf("the call never reached the destination before its context expired (%v)", tt.expires)
				}
				t.Logf("the context expired after %v, before the call reached the destination: again, with twice the time", tt.expires)
				tt.expires *= 2
			}
		})
	}
}

func cancellable(t *testing.T) (context.Context, func()) {
	ctx, cancel := context.WithCancel(newCtx(t))
	return ctx, cancel
}

// TestContextAfterHeaders: once the answer came, cancelling the request's
// context makes Body.Read fail (not io.EOF); closing the body resets the
// stream.
func TestContextAfterHeaders(t *testing.T) {
	tests := []struct {
		name         string
		cancelBefore bool // cancel before the next Read starts; else while it may be blocked
	}{
		{name: "during the read"},
		{name: "before the read", cancelBefore: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ended := make(chan struct{})
			srv := newGoServer(t, func(w http.ResponseWriter, r *http.Request) {
				io.WriteString(w, "part")
				w.(http.Flusher).Flush()
				<-r.Context().Done()
				close(ended)
			}, nil)
			tr, _ := newTransport(t, &h2c.Transport{})
			ctx, cancel := context.WithCancel(newCtx(t))
			defer cancel()
			resp, err := tr.RoundTrip(newRequest(t, ctx, "GET", srv.url, nil, 0))
			if err != nil {
				t.Fatal(err)
			}
			buf := make([]byte, 4)
			if _, err := io.ReadFull(resp.Body, buf); err != nil || string(buf) != "part" {
				t.Fatalf("first bytes %q, %v; want part", buf, err)
			}
			if tt.cancelBefore {
				cancel()
			}
			done := make(chan error, 1)
			go func() {
				_, err := resp.Body.Read(make([]byte, 10))
				done <- err
			}()
			if !tt.cancelBefore {
				cancel()
			}
			if err := receive(t, done, "Read to end"); err == nil || errors.Is(err, io.EOF) {
				t.Errorf("Read after cancel: %v, want an error other than io.EOF", err)
			}
			resp.Body.Close()
			receive(t, ended, "the handler's context to end")
		})
	}
}

// TestBodyCloseBeforeEOF: closing an answer's body before its end resets
// the stream (the destination's handler sees its context cancelled) and
// the connection carries the next call.
func TestBodyCloseBeforeEOF(t *testing.T) {
	ended := make(chan error, 1)
	srv := newGoServer(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/big" {
			io.WriteString(w, "ok")
			return
		}
		chunk := pattern(16 << 10)
		for range 1 << 20 / len(chunk) * 8 { // 8 MiB, far beyond the windows
			if _, err := w.Write(chunk); err != nil {
				break
			}
		}
		select {
		case <-r.Context().Done():
			ended <- r.Context().Err()
		case <-time.After(waitLimit):
			ended <- errors.New("the handler's context did not end")
		}
	}, nil)
	tr, dials := newTransport(t, &h2c.Transport{})
	resp, err := tr.RoundTrip(newRequest(t, newCtx(t), "GET", srv.url+"/big", nil, 0))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(resp.Body, make([]byte, 100)); err != nil {
		t.Fatal(err)
	}
	if err := resp.Body.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	if err := receive(t, ended, "the handler to end"); !errors.Is(err, context.Canceled) {
		t.Errorf("the handler: %v, want its context cancelled", err)
	}
	if r := get(t, tr, srv.url+"/ok"); r.Body != "ok" {
		t.Errorf("next call: %q, want ok", r.Body)
	}
	if n, c := dials.Load(), tr.Conns(); n != 1 || c != 1 {
		t.Errorf("dialed %d times, %d connections open; want 1 and 1", n, c)
	}
	if n := srv.ln.accepted.Load(); n != 1 {
		t.Errorf("the server accepted %d connections, want 1", n)
	}
}

// TestWaitForStreamSlot: with one connection allowed and one stream per
// connection, a second call waits for the first to end (bounded by its
// context), then runs on the same connection.
func TestWaitForStreamSlot(t *testing.T) {
	srv := newHeldServer(t, &http.HTTP2Config{MaxConcurrentStreams: 1})
	tr, dials := newTransport(t, &h2c.Transport{MaxConnsPerHost: 1})
	first := goCall(tr, newRequest(t, newCtx(t), "GET", srv.url+"/held", nil, 0))
	testproc.Eventually(t, waitLimit, "the first call is held", func() bool { return srv.arrived.Load() == 1 })
	second := goCall(tr, newRequest(t, newCtx(t), "GET", srv.url+"/held", nil, 0))

	ctx, cancel := context.WithTimeout(newCtx(t), 200*time.Millisecond)
	defer cancel()
	if r := call(t, tr, newRequest(t, ctx, "GET", srv.url+"/ok", nil, 0)); !errors.Is(r.RTErr, context.DeadlineExceeded) {
		t.Errorf("a call waiting for a slot past its deadline: %v, want context.DeadlineExceeded", r.RTErr)
	}
	ctx, cancel = context.WithCancel(newCtx(t))
	res := goCall(tr, newRequest(t, ctx, "GET", srv.url+"/ok", nil, 0))
	cancel()
	if r := receive(t, res, "the cancelled call"); !errors.Is(r.RTErr, context.Canceled) {
		t.Errorf("a call waiting for a slot, cancelled: %v, want context.Canceled", r.RTErr)
	}
	if n := srv.arrived.Load(); n != 1 {
		t.Errorf("%d calls reached the destination while one slot was taken, want 1", n)
	}
	srv.release <- struct{}{}
	if r := receive(t, first, "the first call"); r.Err() != nil || r.Body != "ok" {
		t.Errorf("first call: %q, %v; want ok", r.Body, r.Err())
	}
	testproc.Eventually(t, waitLimit, "the second call reaches the destination", func() bool { return srv.arrived.Load() == 2 })
	srv.release <- struct{}{}
	if r := receive(t, second, "the second call"); r.Err() != nil || r.Body != "ok" {
		t.Errorf("second call: %q, %v; want ok", r.Body, r.Err())
	}
	if n, c := dials.Load(), srv.ln.accepted.Load(); n != 1 || c != 1 {
		t.Errorf("dialed %d times, the server accepted %d; want 1 and 1", n, c)
	}
}

// TestBodyCloseSendsCancel: closing an answer's body before its end sends
// RST_STREAM with the code CANCEL.
func TestBodyCloseSendsCancel(t *testing.T) {
	resets := make(chan http2.ErrCode, 1)
	srv := newFrameServer(t, nil, func(fc *frameConn) {
		r, err := fc.readRequest()
		if err != nil {
			return
		}
		fc.writeHeaders(r.stream, false, ":status", "200")
		fc.writeData(r.stream, false, []byte("partial"))
		for {
			f, err := fc.next()
			if err != nil {
				return
			}
			if rst, ok := f.(*http2.RSTStreamFrame); ok && rst.StreamID == r.stream {
				resets <- rst.ErrCode
			}
		}
	})
	tr, _ := newTransport(t, &h2c.Transport{})
	resp, err := tr.RoundTrip(newRequest(t, newCtx(t), "GET", srv.url, nil, 0))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(resp.Body, make([]byte, 3)); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if code := receive(t, resets, "RST_STREAM at the destination"); code != http2.ErrCodeCancel {
		t.Errorf("RST_STREAM %v, want CANCEL", code)
	}
}
