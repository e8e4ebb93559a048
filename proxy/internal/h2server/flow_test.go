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
	"fmt"
	"io"
	"math"
	"net/http"
	"strings"
	"testing"

	"golang.org/x/net/http2"

	"knative.dev/event-forwarding-proxy/proxy/internal/h2server"
)

// holdHandler holds every request, unread, until g opens (at the latest
// when the test ends), whatever becomes of the request meanwhile.
func holdHandler(g *gate) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		<-g.ch
		_, _ = io.WriteString(w, "released")
	})
}

func TestDataBeyondStreamWindow(t *testing.T) {
	g := newGate(t)
	f := startServer(t, &h2server.Server{StreamWindow: 65535}, holdHandler(g))
	c := connectRaw(t, f.addr)
	c.request(1, "POST", "/", false)
	chunk := make([]byte, 16384)
	for range 3 {
		c.check(c.fr.WriteData(1, false, chunk))
	}
	c.check(c.fr.WriteData(1, false, chunk[:65535-3*16384])) // exactly the window
	c.alive()
	if st := c.streams[1]; st != nil && st.rst != nil {
		t.Fatalf("reset at exactly the window: %v", *st.rst)
	}
	c.check(c.fr.WriteData(1, false, chunk[:1])) // one byte over
	c.wantReset(1, http2.ErrCodeFlowControl)
	c.alive()
}

func TestDataBeyondConnWindow(t *testing.T) {
	g := newGate(t)
	f := startServer(t, &h2server.Server{StreamWindow: 65535, ConnWindow: 65535}, holdHandler(g))
	c := connectRaw(t, f.addr)
	chunk := make([]byte, 16384)
	c.request(1, "POST", "/", false)
	c.request(3, "POST", "/", false)
	c.check(c.fr.WriteData(1, false, chunk))
	c.check(c.fr.WriteData(3, false, chunk))
	c.check(c.fr.WriteData(1, false, chunk))
	c.check(c.fr.WriteData(3, false, chunk[:65535-3*16384])) // exactly the window
	c.alive()
	c.check(c.fr.WriteData(1, false, chunk[:1]))
	c.wantGoAway(http2.ErrCodeFlowControl)
}

func TestDataAfterEndStream(t *testing.T) {
	g := newGate(t)
	f := startServer(t, nil, holdHandler(g))
	c := connectRaw(t, f.addr)
	c.request(1, "POST", "/", false)
	c.data(1, []byte("body"), true)
	c.check(c.fr.WriteData(1, false, []byte("more")))
	c.wantReset(1, http2.ErrCodeStreamClosed)
	c.alive()
}

func TestDataOnIdleStream(t *testing.T) {
	f := startServer(t, nil, okHandler)
	c := connectRaw(t, f.addr)
	c.check(c.fr.WriteData(7, true, []byte("x")))
	c.wantGoAway(http2.ErrCodeProtocol)
}

func TestWindowUpdateOverflow(t *testing.T) {
	t.Run("connection", func(t *testing.T) {
		f := startServer(t, nil, okHandler)
		c := connectRaw(t, f.addr)
		c.check(c.fr.WriteWindowUpdate(0, math.MaxInt32-65535)) // exactly 2^31-1
		c.alive()
		c.check(c.fr.WriteWindowUpdate(0, 1))
		c.wantGoAway(http2.ErrCodeFlowControl)
	})
	t.Run("stream", func(t *testing.T) {
		g := newGate(t)
		f := startServer(t, nil, holdHandler(g))
		c := connectRaw(t, f.addr)
		c.get(1, "/")
		c.check(c.fr.WriteWindowUpdate(1, math.MaxInt32-65535))
		c.alive()
		c.check(c.fr.WriteWindowUpdate(1, 1))
		c.wantReset(1, http2.ErrCodeFlowControl)
		c.alive()
	})
	t.Run("settings", func(t *testing.T) {
		// INITIAL_WINDOW_SIZE grows open streams' windows too (RFC 9113
		// 6.9.2): past 2^31-1 it is a connection error.
		g := newGate(t)
		f := startServer(t, nil, holdHandler(g))
		c := connectRaw(t, f.addr)
		c.get(1, "/")
		c.check(c.fr.WriteWindowUpdate(1, math.MaxInt32-65535))
		c.alive()
		c.check(c.fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 65536}))
		c.wantGoAway(http2.ErrCodeFlowControl)
	})
}

func TestWindowUpdateOnIdleStream(t *testing.T) {
	f := startServer(t, nil, okHandler)
	c := connectRaw(t, f.addr)
	c.check(c.fr.WriteWindowUpdate(9, 100))
	c.wantGoAway(http2.ErrCodeProtocol)
}

func TestResetOnIdleStream(t *testing.T) {
	f := startServer(t, nil, okHandler)
	c := connectRaw(t, f.addr)
	c.check(c.fr.WriteRSTStream(1, http2.ErrCodeCancel))
	c.wantGoAway(http2.ErrCodeProtocol)
}

// TestResetOnClosedStreamIgnored: RST_STREAM and WINDOW_UPDATE for a
// stream that ended are no error.
func TestResetOnClosedStreamIgnored(t *testing.T) {
	f := startServer(t, nil, okHandler)
	c := connectRaw(t, f.addr)
	c.get(1, "/")
	c.ok(1, "200")
	c.check(c.fr.WriteWindowUpdate(1, 10))
	c.check(c.fr.WriteRSTStream(1, http2.ErrCodeCancel))
	c.alive()
}

// TestMaxConcurrentStreams: streams past MaxConcurrentStreams, their
// handlers held, are refused; once a handler is done a new one is taken.
func TestMaxConcurrentStreams(t *testing.T) {
	g1, g3 := newGate(t), newGate(t)
	f := startServer(t, &h2server.Server{MaxConcurrentStreams: 2}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/1":
			g1.hold(r)
		case "/3":
			g3.hold(r)
		}
		_, _ = io.WriteString(w, r.URL.Path)
	}))
	c := connectRaw(t, f.addr)
	c.get(1, "/1")
	c.get(3, "/3")
	c.get(5, "/5")
	c.wantReset(5, http2.ErrCodeRefusedStream)
	g1.open()
	c.ok(1, "200")
	// The handler of stream 1 may not yet be counted done the moment its
	// END_STREAM is out: a refusal is retried, as a client would.
	id := uint32(7)
	for ; ; id += 2 {
		c.get(id, "/7")
		st := c.response(id)
		if st.rst == nil {
			break
		}
		if *st.rst != http2.ErrCodeRefusedStream || id > 7+2*50 {
			t.Fatalf("stream %d reset with %v after a handler ended", id, *st.rst)
		}
	}
	if st := c.streams[id]; st.status != "200" || string(st.body) != "/7" {
		t.Errorf("stream %d: %q %q", id, st.status, st.body)
	}
	g3.open()
	c.ok(3, "200")
}

// TestResetCancelsRequest: the caller's RST_STREAM cancels the request's
// context, and its stream stops counting once the handler returns.
func TestResetCancelsRequest(t *testing.T) {
	canceled, started := make(chan error, 1), make(chan struct{}, 1)
	f := startServer(t, &h2server.Server{MaxConcurrentStreams: 1}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/wait" {
			started <- struct{}{}
			<-r.Context().Done()
			canceled <- r.Context().Err()
			return
		}
		_, _ = io.WriteString(w, "ok")
	}))
	c := connectRaw(t, f.addr)
	c.request(1, "POST", "/wait", false)
	c.data(1, []byte("part"), false)
	recv(t, started, "the handler") // a stream reset in the same burst gets none
	c.check(c.fr.WriteRSTStream(1, http2.ErrCodeCancel))
	if err := recv(t, canceled, "the handler to see its context end"); err == nil {
		t.Error("context done without an error")
	}
	c.data(1, []byte("late"), false) // after our reset: ignored, refunded
	c.alive()
	id := uint32(3)
	for ; ; id += 2 { // stream 1 counts until its handler is done
		c.get(id, "/next")
		if st := c.response(id); st.rst == nil {
			break
		} else if *st.rst != http2.ErrCodeRefusedStream || id > 3+2*50 {
			t.Fatalf("stream %d reset with %v", id, *st.rst)
		}
	}
	if st := c.streams[id]; st.status != "200" {
		t.Errorf("stream %d: status %q", id, st.status)
	}
}

// TestPaddingRefunded: padding and the pad length count against the
// windows and must be given back. More padded DATA than the connection
// window, over several streams, all goes through.
func TestPaddingRefunded(t *testing.T) {
	f := startServer(t, &h2server.Server{StreamWindow: 65535, ConnWindow: 65535}, okHandler)
	c := connectRaw(t, f.addr)
	pad := make([]byte, 255)
	data := []byte("sixteen bytes!!!")
	const frames = 100 // 100 * (1+16+255) = 27200 bytes a stream
	total := 0
	for i := range 6 {
		id := uint32(2*i + 1)
		c.request(id, "POST", "/", false)
		if _, ok := c.streamWindows[id]; !ok {
			c.streamWindows[id] = int64(c.initialWindow())
		}
		for j := range frames {
			const size = 1 + 16 + 255
			c.until("window for padded DATA", func() bool {
				return c.connWindow >= size && c.streamWindows[id] >= size
			})
			c.connWindow -= size
			c.streamWindows[id] -= size
			c.check(c.fr.WriteDataPadded(id, j == frames-1, data, pad))
			total += size
		}
		if st := c.ok(id, "200"); st.header.Get("X-Read") != fmt.Sprint(frames*len(data)) {
			t.Fatalf("stream %d: the handler read %s bytes", id, st.header.Get("X-Read"))
		}
	}
	if total <= 65535 {
		t.Fatalf("sent %d bytes, not past the connection window", total)
	}
	c.alive()
}

// TestUnreadBodyRefunded: a handler that answers without reading its body
// gives the connection window back, so other streams can send.
func TestUnreadBodyRefunded(t *testing.T) {
	g := newGate(t)
	f := startServer(t, &h2server.Server{StreamWindow: 65535, ConnWindow: 65535}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/unread" {
			g.hold(r)
			_, _ = io.WriteString(w, "did not read")
			return
		}
		okHandler(w, r)
	}))
	c := connectRaw(t, f.addr)
	body := []byte(strings.Repeat("u", 60000))
	c.request(1, "POST", "/unread", false)
	c.data(1, body, true)
	c.alive() // the server has the body
	g.open()
	c.ok(1, "200")
	c.request(3, "POST", "/read", false)
	c.data(3, body, true) // needs stream 1's bytes back
	if st := c.ok(3, "200"); st.header.Get("X-Read") != "60000" {
		t.Errorf("stream 3: read %s", st.header.Get("X-Read"))
	}
}

// TestSettingsInitialWindowChange: a client that starts with no window for
// the server's DATA, then opens it by SETTINGS, gets its answer.
func TestSettingsInitialWindowChange(t *testing.T) {
	f := startServer(t, nil, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(strings.Repeat("z", 100000)))
	}))
	c := connectRaw(t, f.addr, http2.Setting{ID: http2.SettingInitialWindowSize, Val: 0})
	c.get(1, "/")
	c.until("the answer's header", func() bool { st := c.streams[1]; return st != nil && st.status != "" })
	c.alive()
	if n := len(c.streams[1].body); n != 0 {
		t.Fatalf("%d bytes sent into a zero window", n)
	}
	c.check(c.fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 70000}))
	c.check(c.fr.WriteWindowUpdate(0, 100000))
	c.until("the window's worth", func() bool { return len(c.streams[1].body) >= 70000 })
	c.check(c.fr.WriteWindowUpdate(1, 30000))
	st := c.ok(1, "200")
	if len(st.body) != 100000 {
		t.Errorf("%d bytes, want 100000", len(st.body))
	}
	for _, n := range st.dataFrames {
		if n > 16384 {
			t.Errorf("a DATA frame of %d bytes, past the default frame size", n)
		}
	}
}

// TestStreamSlotFreeOnceAnswered: once both sides sent END_STREAM the
// stream is closed (RFC 9113 5.1) and no longer counts against
// MaxConcurrentStreams (5.1.2). A client that runs one request at a time
// on a connection that allows one never exceeds the limit, and must never
// see REFUSED_STREAM.
func TestStreamSlotFreeOnceAnswered(t *testing.T) {
	f := startServer(t, &h2server.Server{MaxConcurrentStreams: 1}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	c := connectRaw(t, f.addr)
	const n = 2000
	refused := 0
	for i := range uint32(n) {
		id := 2*i + 1
		c.get(id, "/")
		if st := c.response(id); st.rst != nil {
			refused++
		}
	}
	if refused > 0 {
		t.Errorf("%d of %d sequential requests refused, each sent after the previous answer's END_STREAM", refused, n)
	}
}
