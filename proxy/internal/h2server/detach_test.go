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
	"bytes"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"golang.org/x/net/http2"

	"knative.dev/event-forwarding-proxy/internal/h2raw"
	"knative.dev/event-forwarding-proxy/proxy/internal/h2server"
)

// detached is a call whose handler detached and returned.
type detached struct {
	w   http.ResponseWriter
	r   *http.Request
	end func(p any)
}

// detachingHandler detaches every stream, hands it to the test on the
// channel it returns, and returns.
func detachingHandler(n int) (http.Handler, chan detached) {
	calls := make(chan detached, n)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		end := w.(detacher).Detach()
		calls <- detached{w, r, end}
	}), calls
}

// TestDetachAnswerLater: handlers detach and return; once none of their
// goroutines is left, other goroutines read the bodies and write the
// answers, then end the streams. Every client gets its whole answer.
func TestDetachAnswerLater(t *testing.T) {
	const n = 20
	h, calls := detachingHandler(n)
	f := startServer(t, nil, h)
	c := f.client(t)
	type result struct {
		i      int
		status int
		body   []byte
		done   string
		err    error
	}
	results := make(chan result, n)
	for i := range n {
		go func() {
			body := bytes.Repeat([]byte{byte('a' + i)}, 1000*i+1)
			resp, err := c.Post(fmt.Sprintf("%s/%d", f.url, i), "text/plain", bytes.NewReader(body))
			if err != nil {
				results <- result{i: i, err: err}
				return
			}
			got, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			results <- result{i, resp.StatusCode, got, resp.Header.Get("X-Done"), err}
		}()
	}
	var held []detached
	for range n {
		held = append(held, recv(t, calls, "a detached call"))
	}
	eventually(t, "no handler goroutine left for the detached calls", func() bool {
		return goroutinesIn(runHandlerFrame) == 0
	})
	var wg sync.WaitGroup
	for _, d := range held {
		wg.Add(1)
		go func() {
			defer wg.Done()
			body, err := io.ReadAll(d.r.Body)
			if err != nil {
				d.end(fmt.Errorf("reading a detached body: %w", err))
				return
			}
			d.w.Header().Set("X-Done", "yes")
			d.w.WriteHeader(http.StatusCreated)
			_, _ = d.w.Write([]byte(d.r.URL.Path + ":"))
			_, _ = d.w.Write(body)
			d.end(nil)
		}()
	}
	wg.Wait()
	for range n {
		r := recv(t, results, "an answer")
		want := fmt.Sprintf("/%d:%s", r.i, strings.Repeat(string(rune('a'+r.i)), 1000*r.i+1))
		if r.err != nil || r.status != 201 || string(r.body) != want || r.done != "yes" {
			t.Errorf("call %d: %d, %d bytes, X-Done %q, %v", r.i, r.status, len(r.body), r.done, r.err)
		}
	}
}

// TestDetachEndWithPanicValue: end with a panic value resets the stream,
// quietly for http.ErrAbortHandler, logged for anything else; the
// connection serves on. One raw connection carries every stream, so that
// "serves on" is that connection's next answer, not a client's choice of
// connection (Go's client may dial again after a reset, as its health
// check of a connection allows).
func TestDetachEndWithPanicValue(t *testing.T) {
	h, calls := detachingHandler(4)
	f := startServer(t, nil, h)
	c := h2raw.Connect(t, f.addr)
	for i, tc := range []struct {
		name   string
		p      any
		logged bool
	}{{"ErrAbortHandler", http.ErrAbortHandler, false}, {"other", "detached-boom", true}} {
		id := uint32(2*i + 1)
		c.Get(id, "/"+tc.name)
		d := recv(t, calls, "a detached call")
		_, _ = io.WriteString(d.w, "partial")
		_ = http.NewResponseController(d.w).Flush()
		d.end(tc.p)
		c.WantReset(id, http2.ErrCodeInternal)
		if got := strings.Contains(f.log.String(), "detached-boom"); got != tc.logged {
			t.Errorf("%s: logged %v, want %v:\n%s", tc.name, got, tc.logged, f.log)
		}
	}
	c.Get(5, "/after")
	recv(t, calls, "a detached call").end(nil)
	c.OK(5, "200")
	if n := f.accepted.Load(); n != 1 {
		t.Errorf("after the resets: %d connections, want the one", n)
	}
}

// TestDetachTrailers: a detached stream's writer declares trailers and
// sets them after the body; end sends them.
func TestDetachTrailers(t *testing.T) {
	h, calls := detachingHandler(1)
	f := startServer(t, nil, h)
	c := h2raw.Connect(t, f.addr)
	c.Get(1, "/")
	d := recv(t, calls, "a detached call")
	d.w.Header().Set("Trailer", "X-Done")
	_, _ = io.WriteString(d.w, "body")
	d.w.Header().Set("X-Done", "yes")
	d.w.Header().Set(http.TrailerPrefix+"X-Also", "too")
	d.end(nil)
	st := c.OK(1, "200")
	if string(st.Body) != "body" || st.Trailer.Get("X-Done") != "yes" || st.Trailer.Get("X-Also") != "too" {
		t.Errorf("body %q, trailers %v", st.Body, st.Trailer)
	}
}

// TestDetachConnectionClosed: the connection of a detached stream closes;
// the request's context ends, the writer's writes fail, and end still
// returns without a panic.
func TestDetachConnectionClosed(t *testing.T) {
	h, calls := detachingHandler(1)
	f := startServer(t, nil, h)
	c := h2raw.Connect(t, f.addr)
	c.Request(1, "POST", "/", false)
	c.Data(1, []byte("some"), false)
	d := recv(t, calls, "a detached call")
	eventually(t, "the handler's goroutine to end", func() bool { return goroutinesIn(runHandlerFrame) == 0 })
	_ = c.Conn.Close()
	recv(t, d.r.Context().Done(), "the request's context to end")
	if _, err := d.w.Write([]byte("answer")); err == nil {
		t.Error("a write on a closed connection succeeded")
	}
	if _, err := io.ReadAll(d.r.Body); err == nil {
		t.Error("reading the body of a closed connection ended cleanly")
	}
	d.end(nil)
}

// TestDetachEndInsideHandler: a handler may end its stream itself before
// it returns; its return then does nothing more.
func TestDetachEndInsideHandler(t *testing.T) {
	f := startServer(t, nil, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		end := w.(detacher).Detach()
		_, _ = io.WriteString(w, "ended early")
		end(nil)
	}))
	c := h2raw.Connect(t, f.addr)
	for id := uint32(1); id < 10; id += 2 {
		c.Get(id, "/")
		if st := c.OK(id, "200"); string(st.Body) != "ended early" {
			t.Errorf("stream %d: body %q", id, st.Body)
		}
	}
	c.Alive()
	for id, st := range c.Streams {
		if st.RST != nil {
			t.Errorf("stream %d reset with %v after its clean end", id, *st.RST)
		}
	}
}

// TestDetachedStreamsCount: a detached stream counts against
// MaxConcurrentStreams until it ends.
func TestDetachedStreamsCount(t *testing.T) {
	h, calls := detachingHandler(2)
	f := startServer(t, &h2server.Server{MaxConcurrentStreams: 1}, h)
	c := h2raw.Connect(t, f.addr)
	c.Get(1, "/")
	d := recv(t, calls, "a detached call")
	eventually(t, "the handler's goroutine to end", func() bool { return goroutinesIn(runHandlerFrame) == 0 })
	c.Get(3, "/")
	c.WantReset(3, http2.ErrCodeRefusedStream)
	d.end(nil)
	c.OK(1, "200")
	for id := uint32(5); ; id += 2 { // see TestStreamSlotFreeOnceAnswered
		c.Get(id, "/")
		c.Alive() // the HEADERS were handled: a refusal went out before the PING's ack
		if st := c.Streams[id]; st != nil && st.RST != nil {
			if *st.RST != http2.ErrCodeRefusedStream || id > 5+2*50 {
				t.Fatalf("stream %d reset with %v", id, *st.RST)
			}
			continue
		}
		recv(t, calls, "a detached call").end(nil)
		c.OK(id, "200")
		break
	}
}

// TestDetachedHandlerPanics: a handler that panics after Detach has its
// stream reset at once; the end it handed out does nothing then.
func TestDetachedHandlerPanics(t *testing.T) {
	ends := make(chan func(any), 1)
	f := startServer(t, nil, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ends <- w.(detacher).Detach()
		panic(http.ErrAbortHandler)
	}))
	c := h2raw.Connect(t, f.addr)
	c.Get(1, "/")
	c.WantReset(1, http2.ErrCodeInternal)
	end := recv(t, ends, "the handler's end")
	end(nil)
	c.Alive()
	if st := c.Streams[1]; st.Ended {
		t.Error("END_STREAM after the reset")
	}
}
