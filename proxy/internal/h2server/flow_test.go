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

	"knative.dev/event-forwarding-proxy/internal/h2raw"
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
	c := h2raw.Connect(t, f.addr)
	c.Request(1, "POST", "/", false)
	chunk := make([]byte, 16384)
	for range 3 {
		c.Check(c.Framer.WriteData(1, false, chunk))
	}
	c.Check(c.Framer.WriteData(1, false, chunk[:65535-3*16384])) // exactly the window
	c.Alive()
	if st := c.Streams[1]; st != nil && st.RST != nil {
		t.Fatalf("reset at exactly the window: %v", *st.RST)
	}
	c.Check(c.Framer.WriteData(1, false, chunk[:1])) // one byte over
	c.WantReset(1, http2.ErrCodeFlowControl)
	c.Alive()
}

func TestDataBeyondConnWindow(t *testing.T) {
	g := newGate(t)
	f := startServer(t, &h2server.Server{StreamWindow: 65535, ConnWindow: 65535}, holdHandler(g))
	c := h2raw.Connect(t, f.addr)
	chunk := make([]byte, 16384)
	c.Request(1, "POST", "/", false)
	c.Request(3, "POST", "/", false)
	c.Check(c.Framer.WriteData(1, false, chunk))
	c.Check(c.Framer.WriteData(3, false, chunk))
	c.Check(c.Framer.WriteData(1, false, chunk))
	c.Check(c.Framer.WriteData(3, false, chunk[:65535-3*16384])) // exactly the window
	c.Alive()
	c.Check(c.Framer.WriteData(1, false, chunk[:1]))
	c.WantGoAway(http2.ErrCodeFlowControl)
}

func TestDataAfterEndStream(t *testing.T) {
	g := newGate(t)
	f := startServer(t, nil, holdHandler(g))
	c := h2raw.Connect(t, f.addr)
	c.Request(1, "POST", "/", false)
	c.Data(1, []byte("body"), true)
	c.Check(c.Framer.WriteData(1, false, []byte("more")))
	c.WantReset(1, http2.ErrCodeStreamClosed)
	c.Alive()
}

func TestDataOnIdleStream(t *testing.T) {
	f := startServer(t, nil, okHandler)
	c := h2raw.Connect(t, f.addr)
	c.Check(c.Framer.WriteData(7, true, []byte("x")))
	c.WantGoAway(http2.ErrCodeProtocol)
}

func TestWindowUpdateOverflow(t *testing.T) {
	t.Run("connection", func(t *testing.T) {
		f := startServer(t, nil, okHandler)
		c := h2raw.Connect(t, f.addr)
		c.Check(c.Framer.WriteWindowUpdate(0, math.MaxInt32-65535)) // exactly 2^31-1
		c.Alive()
		c.Check(c.Framer.WriteWindowUpdate(0, 1))
		c.WantGoAway(http2.ErrCodeFlowControl)
	})
	t.Run("stream", func(t *testing.T) {
		g := newGate(t)
		f := startServer(t, nil, holdHandler(g))
		c := h2raw.Connect(t, f.addr)
		c.Get(1, "/")
		c.Check(c.Framer.WriteWindowUpdate(1, math.MaxInt32-65535))
		c.Alive()
		c.Check(c.Framer.WriteWindowUpdate(1, 1))
		c.WantReset(1, http2.ErrCodeFlowControl)
		c.Alive()
	})
	t.Run("settings", func(t *testing.T) {
		// INITIAL_WINDOW_SIZE grows open streams' windows too (RFC 9113
		// 6.9.2): past 2^31-1 it is a connection error.
		g := newGate(t)
		f := startServer(t, nil, holdHandler(g))
		c := h2raw.Connect(t, f.addr)
		c.Get(1, "/")
		c.Check(c.Framer.WriteWindowUpdate(1, math.MaxInt32-65535))
		c.Alive()
		c.Check(c.Framer.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 65536}))
		c.WantGoAway(http2.ErrCodeFlowControl)
	})
}

func TestWindowUpdateOnIdleStream(t *testing.T) {
	f := startServer(t, nil, okHandler)
	c := h2raw.Connect(t, f.addr)
	c.Check(c.Framer.WriteWindowUpdate(9, 100))
	c.WantGoAway(http2.ErrCodeProtocol)
}

func TestResetOnIdleStream(t *testing.T) {
	f := startServer(t, nil, okHandler)
	c := h2raw.Connect(t, f.addr)
	c.Check(c.Framer.WriteRSTStream(1, http2.ErrCodeCancel))
	c.WantGoAway(http2.ErrCodeProtocol)
}

// TestResetOnClosedStreamIgnored: RST_STREAM and WINDOW_UPDATE for a
// stream that ended are no error.
func TestResetOnClosedStreamIgnored(t *testing.T) {
	f := startServer(t, nil, okHandler)
	c := h2raw.Connect(t, f.addr)
	c.Get(1, "/")
	c.OK(1, "200")
	c.Check(c.Framer.WriteWindowUpdate(1, 10))
	c.Check(c.Framer.WriteRSTStream(1, http2.ErrCodeCancel))
	c.Alive()
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
	c := h2raw.Connect(t, f.addr)
	c.Get(1, "/1")
	c.Get(3, "/3")
	c.Get(5, "/5")
	c.WantReset(5, http2.ErrCodeRefusedStream)
	g1.open()
	c.OK(1, "200")
	// The handler of stream 1 may not yet be counted done the moment its
	// END_STREAM is out: a refusal is retried, as a client would.
	id := uint32(7)
	for ; ; id += 2 {
		c.Get(id, "/7")
		st := c.Response(id)
		if st.RST == nil {
			break
		}
		if *st.RST != http2.ErrCodeRefusedStream || id > 7+2*50 {
			t.Fatalf("stream %d reset with %v after a handler ended", id, *st.RST)
		}
	}
	if st := c.Streams[id]; st.Status != "200" || string(st.Body) != "/7" {
		t.Errorf("stream %d: %q %q", id, st.Status, st.Body)
	}
	g3.open()
	c.OK(3, "200")
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
	c := h2raw.Connect(t, f.addr)
	c.Request(1, "POST", "/wait", false)
	c.Data(1, []byte("part"), false)
	recv(t, started, "the handler") // a stream reset in the same burst gets none
	c.Check(c.Framer.WriteRSTStream(1, http2.ErrCodeCancel))
	if err := recv(t, canceled, "the handler to see its context end"); err == nil {
		t.Error("context done without an error")
	}
	c.Data(1, []byte("late"), false) // after our reset: ignored, refunded
	c.Alive()
	id := uint32(3)
	for ; ; id += 2 { // stream 1 counts until its handler is done
		c.Get(id, "/next")
		if st := c.Response(id); st.RST == nil {
			break
		} else if *st.RST != http2.ErrCodeRefusedStream || id > 3+2*50 {
			t.Fatalf("stream %d reset with %v", id, *st.RST)
		}
	}
	if st := c.Streams[id]; st.Status != "200" {
		t.Errorf("stream %d: status %q", id, st.Status)
	}
}

// TestPaddingRefunded: padding and the pad length count against the
// windows and must be given back. More padded DATA than the connection
// window, over several streams, all goes through.
func TestPaddingRefunded(t *testing.T) {
	f := startServer(t, &h2server.Server{StreamWindow: 65535, ConnWindow: 65535}, okHandler)
	c := h2raw.Connect(t, f.addr)
	pad := make([]byte, 255)
	data := []byte("sixteen bytes!!!")
	const frames = 100 // 100 * (1+16+255) = 27200 bytes a stream
	total := 0
	for i := range 6 {
		id := uint32(2*i + 1)
		c.Request(id, "POST", "/", false)
		if _, ok := c.StreamWindows[id]; !ok {
			c.StreamWindows[id] = int64(c.InitialWindow())
		}
		for j := range frames {
			const size = 1 + 16 + 255
			c.Until("window for padded DATA", func() bool {
				return c.ConnWindow >= size && c.StreamWindows[id] >= size
			})
			c.ConnWindow -= size
			c.StreamWindows[id] -= size
			c.Check(c.Framer.WriteDataPadded(id, j == frames-1, data, pad))
			total += size
		}
		if st := c.OK(id, "200"); st.Header.Get("X-Read") != fmt.Sprint(frames*len(data)) {
			t.Fatalf("stream %d: the handler read %s bytes", id, st.Header.Get("X-Read"))
		}
	}
	if total <= 65535 {
		t.Fatalf("sent %d bytes, not past the connection window", total)
	}
	c.Alive()
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
	c := h2raw.Connect(t, f.addr)
	body := []byte(strings.Repeat("u", 60000))
	c.Request(1, "POST", "/unread", false)
	c.Data(1, body, true)
	c.Alive() // the server has the body
	g.open()
	c.OK(1, "200")
	c.Request(3, "POST", "/read", false)
	c.Data(3, body, true) // needs stream 1's bytes back
	if st := c.OK(3, "200"); st.Header.Get("X-Read") != "60000" {
		t.Errorf("stream 3: read %s", st.Header.Get("X-Read"))
	}
}

// TestSettingsInitialWindowChange: a client that starts with no window for
// the server's DATA, then opens it by SETTINGS, gets its answer.
func TestSettingsInitialWindowChange(t *testing.T) {
	f := startServer(t, nil, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(strings.Repeat("z", 100000)))
	}))
	c := h2raw.Connect(t, f.addr, http2.Setting{ID: http2.SettingInitialWindowSize, Val: 0})
	c.Get(1, "/")
	c.Until("the answer's header", func() bool { st := c.Streams[1]; return st != nil && st.Status != "" })
	c.Alive()
	if n := len(c.Streams[1].Body); n != 0 {
		t.Fatalf("%d bytes sent into a zero window", n)
	}
	c.Check(c.Framer.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 70000}))
	c.Check(c.Framer.WriteWindowUpdate(0, 100000))
	c.Until("the window's worth", func() bool { return len(c.Streams[1].Body) >= 70000 })
	c.Check(c.Framer.WriteWindowUpdate(1, 30000))
	st := c.OK(1, "200")
	if len(st.Body) != 100000 {
		t.Errorf("%d bytes, want 100000", len(st.Body))
	}
	for _, n := range st.DataFrames {
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
	c := h2raw.Connect(t, f.addr)
	const n = 2000
	refused := 0
	for i := range uint32(n) {
		id := 2*i + 1
		c.Get(id, "/")
		if st := c.Response(id); st.RST != nil {
			refused++
		}
	}
	if refused > 0 {
		t.Errorf("%d of %d sequential requests refused, each sent after the previous answer's END_STREAM", refused, n)
	}
}
