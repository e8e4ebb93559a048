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

package h2server_test

import (
	"errors"
	"io"
	"net/http"
	"testing"
	"time"

	"golang.org/x/net/http2"

	"knative.dev/event-forwarding-proxy/internal/h2raw"
)

// TestReadDeadlineWakesBlockedRead: a read deadline set in the past, from
// another goroutine, wakes a Read waiting for the body with
// os.ErrDeadlineExceeded; cleared, the body reads on.
func TestReadDeadlineWakesBlockedRead(t *testing.T) {
	errs := make(chan error, 1)
	cleared := make(chan struct{})
	f := startServer(t, nil, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc := http.NewResponseController(w)
		go func() {
			blockedIn(t, "h2server.(*requestBody).Read")
			_ = rc.SetReadDeadline(time.Now().Add(-time.Second))
		}()
		_, err := r.Body.Read(make([]byte, 10))
		errs <- err
		if err := rc.SetReadDeadline(time.Time{}); err != nil {
			errs <- err
			return
		}
		close(cleared)
		body, err := io.ReadAll(r.Body)
		if err != nil {
			errs <- err
			return
		}
		_, _ = w.Write(body)
	}))
	c := h2raw.Connect(t, f.addr)
	c.Request(1, "POST", "/", false)
	if err := recv(t, errs, "the blocked Read to end"); !isDeadline(err) {
		t.Fatalf("blocked Read returned %v, want os.ErrDeadlineExceeded", err)
	}
	recv(t, cleared, "the deadline cleared")
	c.Data(1, []byte("after the deadline"), true)
	if st := c.OK(1, "200"); string(st.Body) != "after the deadline" {
		t.Errorf("body %q", st.Body)
	}
}

// TestReadDeadlineTimer: a deadline in the future ends the Read waiting
// when it passes.
func TestReadDeadlineTimer(t *testing.T) {
	errs := make(chan error, 1)
	f := startServer(t, nil, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(50 * time.Millisecond))
		_, err := io.ReadAll(r.Body)
		errs <- err
	}))
	c := h2raw.Connect(t, f.addr)
	c.Request(1, "POST", "/", false)
	c.Data(1, []byte("part of it"), false)
	if err := recv(t, errs, "the Read to end"); !isDeadline(err) {
		t.Fatalf("Read returned %v, want os.ErrDeadlineExceeded", err)
	}
	c.Response(1) // the handler returned: some end, the test does not mind which
}

// TestWriteDeadlineWhileWaitingForWindow: a client whose window is tiny and
// that reads nothing more leaves a Write waiting for window; the write
// deadline ends it with os.ErrDeadlineExceeded and the stream is reset.
func TestWriteDeadlineWhileWaitingForWindow(t *testing.T) {
	type result struct {
		n   int
		err error
	}
	results := make(chan result, 1)
	g := newGate(t)
	f := startServer(t, nil, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc := http.NewResponseController(w)
		go func() {
			blockedIn(t, "h2server.(*conn).awaitSend")
			_ = rc.SetWriteDeadline(time.Now().Add(-time.Second))
		}()
		n, err := w.Write(make([]byte, 1000))
		results <- result{n, err}
		<-g.ch // TestResetWinsOverHandlerEnd is about returning at once
	}))
	c := h2raw.Connect(t, f.addr, http2.Setting{ID: http2.SettingInitialWindowSize, Val: 10})
	c.Get(1, "/")
	r := recv(t, results, "the Write to end")
	if !isDeadline(r.err) || r.n != 10 {
		t.Errorf("Write: %d, %v; want the window's 10 bytes and os.ErrDeadlineExceeded", r.n, r.err)
	}
	c.WantReset(1, http2.ErrCodeInternal)
	if st := c.Streams[1]; string(st.Body) != string(make([]byte, 10)) {
		t.Errorf("%d bytes came before the reset, want 10", len(st.Body))
	}
	g.open()
	c.Alive()
}

// TestWriteDeadlineTimer: the same with a deadline that passes while the
// Write waits.
func TestWriteDeadlineTimer(t *testing.T) {
	errs := make(chan error, 1)
	g := newGate(t)
	f := startServer(t, nil, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(50 * time.Millisecond))
		_, err := w.Write(make([]byte, 100))
		errs <- err
		<-g.ch
	}))
	c := h2raw.Connect(t, f.addr, http2.Setting{ID: http2.SettingInitialWindowSize, Val: 0})
	c.Get(1, "/")
	if err := recv(t, errs, "the Write to end"); !isDeadline(err) {
		t.Errorf("Write returned %v, want os.ErrDeadlineExceeded", err)
	}
	c.WantReset(1, http2.ErrCodeInternal)
}

// TestDeadlinesAfterEnd: once a stream ended, its deadlines can no longer
// be set.
func TestDeadlinesAfterEnd(t *testing.T) {
	h, calls := detachingHandler(1)
	f := startServer(t, nil, h)
	c := h2raw.Connect(t, f.addr)
	c.Get(1, "/")
	d := recv(t, calls, "a detached call")
	rc := http.NewResponseController(d.w)
	if err := rc.SetWriteDeadline(time.Now().Add(time.Hour)); err != nil {
		t.Errorf("SetWriteDeadline on a live stream: %v", err)
	}
	d.end(nil)
	c.OK(1, "200")
	if err := rc.SetReadDeadline(time.Now()); !errors.Is(err, http.ErrNotSupported) {
		t.Errorf("SetReadDeadline after the end: %v, want ErrNotSupported", err)
	}
}

// TestFlushSendsHeader: Flush sends the header before any body.
func TestFlushSendsHeader(t *testing.T) {
	g := newGate(t)
	f := startServer(t, nil, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Early", "1")
		if err := http.NewResponseController(w).Flush(); err != nil {
			t.Errorf("FlushError: %v", err)
		}
		<-g.ch
		_, _ = io.WriteString(w, "later")
	}))
	c := h2raw.Connect(t, f.addr)
	c.Get(1, "/")
	c.Until("the flushed header", func() bool { st := c.Streams[1]; return st != nil && st.Status != "" })
	if st := c.Streams[1]; st.Status != "200" || st.Header.Get("X-Early") != "1" || st.Ended {
		t.Errorf("flushed: %+v", st)
	}
	g.open()
	if st := c.OK(1, "200"); string(st.Body) != "later" {
		t.Errorf("body %q", st.Body)
	}
}
