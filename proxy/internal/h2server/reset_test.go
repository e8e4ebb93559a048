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
	"os"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/http2"

	"knative.dev/event-forwarding-proxy/internal/h2raw"
)

// TestResetWinsOverHandlerEnd: when the server resets a stream (here for
// a request that breaks the protocol, or a write deadline) while its
// handler waits to read or write, the handler's read or write fails and
// it returns at once, as handlers do. The caller must get the RST_STREAM;
// it must not get a clean END_STREAM that makes a failed call look like a
// complete answer.
func TestResetWinsOverHandlerEnd(t *testing.T) {
	f := startServer(t, nil, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/write" {
			_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(20 * time.Millisecond))
			_, _ = w.Write(make([]byte, 1000)) // more than the caller's window of 10
			return
		}
		if _, err := io.Copy(io.Discard, r.Body); err != nil {
			return // no answer: the stream is broken
		}
		_, _ = io.WriteString(w, "ok")
	}))
	c := h2raw.Connect(t, f.addr, http2.Setting{ID: http2.SettingInitialWindowSize, Val: 10})
	type breaker struct {
		name  string
		code  http2.ErrCode
		start func(id uint32)
	}
	breakers := []breaker{
		{"trailers without END_STREAM", http2.ErrCodeProtocol, func(id uint32) {
			c.Request(id, "POST", "/read", false)
			c.Alive() // the handler waits in Read
			c.Headers(id, false, "x-t", "v")
		}},
		{"DATA past the content-length", http2.ErrCodeProtocol, func(id uint32) {
			c.Request(id, "POST", "/read", false, "content-length", "2")
			c.Alive()
			c.Data(id, []byte("three"), false)
		}},
		{"write deadline", http2.ErrCodeInternal, func(id uint32) {
			c.Get(id, "/write")
		}},
	}
	id := uint32(1)
	for _, b := range breakers {
		clean := 0
		for range 10 {
			b.start(id)
			st := c.Response(id)
			switch {
			case st.RST == nil:
				clean++
			case *st.RST != b.code:
				t.Errorf("%s: stream %d reset with %v, want %v", b.name, id, *st.RST, b.code)
			}
			id += 2
		}
		if clean > 0 {
			t.Errorf("%s: %d of 10 streams the server reset ended with a clean END_STREAM instead of RST_STREAM %v", b.name, clean, b.code)
		}
	}
}

// TestEarlyAnswerResetsUnfinishedRequest: a handler that answers before the
// request's body is all in completes its answer, then RST_STREAM(NO_ERROR)
// tells the caller to stop sending (RFC 9113 8.1), as finish means to.
// Without it the caller goes on sending into a stream nobody reads and
// whose window is never given back.
func TestEarlyAnswerResetsUnfinishedRequest(t *testing.T) {
	f := startServer(t, nil, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusRequestEntityTooLarge)
	}))
	c := h2raw.Connect(t, f.addr)
	c.Request(1, "POST", "/", false)
	c.Data(1, []byte(strings.Repeat("b", 1000)), false)
	st := c.Response(1)
	if st.Status != "413" || !st.Ended {
		t.Fatalf("status %q, ended %v, reset %v; want a complete 413", st.Status, st.Ended, st.RST)
	}
	if !c.UntilWithin(2*time.Second, func() bool { return st.RST != nil }) {
		t.Fatal("no RST_STREAM(NO_ERROR) after the early answer: the caller is never told to stop sending its body")
	}
	if *st.RST != http2.ErrCodeNo {
		t.Errorf("reset with %v, want NO_ERROR", *st.RST)
	}
	c.Alive()
}

// TestResetNotSentTwice: a stream the caller reset gets no RST_STREAM of
// ours, nor anything else, once the handler returns.
func TestResetNotSentTwice(t *testing.T) {
	done, started := make(chan error, 1), make(chan struct{}, 1)
	f := startServer(t, nil, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		started <- struct{}{}
		<-r.Context().Done()
		_, err := io.WriteString(w, "too late")
		done <- err
	}))
	c := h2raw.Connect(t, f.addr)
	c.Get(1, "/")
	recv(t, started, "the handler") // a stream reset in the same burst gets none
	c.Check(c.Framer.WriteRSTStream(1, http2.ErrCodeCancel))
	err := recv(t, done, "the handler's write")
	if err == nil {
		t.Error("a write on a stream the caller reset succeeded")
	}
	if errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("write error %v, want the reset's", err)
	}
	c.Alive()
	c.Get(3, "/never-answered")
	recv(t, started, "the handler")
	c.Check(c.Framer.WriteRSTStream(3, http2.ErrCodeCancel))
	recv(t, done, "the handler's write")
	c.Alive()
	for _, id := range []uint32{1, 3} {
		if st := c.Streams[id]; st != nil {
			t.Errorf("stream %d, which the caller reset, got frames: %+v", id, st)
		}
	}
}

// TestGoAwayWhileWriting: a caller that breaks the protocol while the
// server is busy writing an answer on another stream still gets the
// GOAWAY that says why (RFC 9113 5.4.1) before the connection closes.
func TestGoAwayWhileWriting(t *testing.T) {
	f := startServer(t, nil, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		chunk := make([]byte, 16384)
		for {
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	}))
	const conns = 10
	missing := 0
	for range conns {
		c := h2raw.Connect(t, f.addr,
			http2.Setting{ID: http2.SettingInitialWindowSize, Val: 1<<31 - 1},
			http2.Setting{ID: http2.SettingMaxFrameSize, Val: 1 << 20})
		c.Framer.SetMaxReadFrameSize(1 << 20)
		c.Check(c.Framer.WriteWindowUpdate(0, 1<<31-1-65535))
		c.Get(1, "/stream")
		c.Until("the answer streaming", func() bool { st := c.Streams[1]; return st != nil && len(st.Body) > 1<<20 })
		c.Get(2, "/") // even: a connection error
		for c.GoAway == nil && c.Step() != nil {
		}
		if c.GoAway == nil {
			missing++
		} else if c.GoAway.Code != http2.ErrCodeProtocol {
			t.Errorf("GOAWAY %v, want PROTOCOL_ERROR", c.GoAway.Code)
		}
		_ = c.Conn.Close()
	}
	if missing > 0 {
		t.Errorf("%d of %d connections closed for a protocol error without a GOAWAY", missing, conns)
	}
}
