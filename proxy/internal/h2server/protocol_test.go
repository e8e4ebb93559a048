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
	"testing"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"knative.dev/event-forwarding-proxy/internal/h2raw"
	"knative.dev/event-forwarding-proxy/proxy/internal/h2server"
)

// okHandler reads the body and answers with its length and trailers.
var okHandler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	n, err := io.Copy(io.Discard, r.Body)
	if err != nil {
		return
	}
	w.Header().Set("X-Read", fmt.Sprint(n))
	w.Header().Set("X-Trailer", r.Trailer.Get("X-T"))
	_, _ = io.WriteString(w, "ok")
})

func TestServerSettings(t *testing.T) {
	for _, tc := range []struct {
		name       string
		srv        *h2server.Server
		want       map[http2.SettingID]uint32
		connWindow int64
	}{{
		name: "defaults",
		srv:  &h2server.Server{},
		want: map[http2.SettingID]uint32{
			http2.SettingMaxConcurrentStreams: 250,
			http2.SettingInitialWindowSize:    256 << 10,
			http2.SettingMaxHeaderListSize:    http.DefaultMaxHeaderBytes + 320,
		},
		connWindow: 4 << 20,
	}, {
		name: "configured",
		srv:  &h2server.Server{MaxConcurrentStreams: 7, StreamWindow: 100000, ConnWindow: 1 << 20, MaxHeaderBytes: 5000},
		want: map[http2.SettingID]uint32{
			http2.SettingMaxConcurrentStreams: 7,
			http2.SettingInitialWindowSize:    100000,
			http2.SettingMaxHeaderListSize:    5000 + 320,
		},
		connWindow: 1 << 20,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			f := startServer(t, tc.srv, okHandler)
			c := h2raw.Connect(t, f.addr)
			for id, v := range tc.want {
				if got, ok := c.Settings[id]; !ok || got != v {
					t.Errorf("%v: %d (sent: %v), want %d", id, got, ok, v)
				}
			}
			// The connection's WINDOW_UPDATE comes with the SETTINGS; the
			// ack of ours after them.
			c.Until("the ack of our SETTINGS", func() bool { return c.SettingsAcks > 0 })
			if c.ConnWindow != tc.connWindow {
				t.Errorf("connection window %d, want %d", c.ConnWindow, tc.connWindow)
			}
			c.Get(1, "/")
			c.OK(1, "200")
		})
	}
}

func TestPingIsAnswered(t *testing.T) {
	f := startServer(t, nil, okHandler)
	c := h2raw.Connect(t, f.addr)
	for range 3 {
		c.Alive() // checks the ack's data
	}
}

func TestFirstFrameNotSettings(t *testing.T) {
	f := startServer(t, nil, okHandler)
	c := h2raw.Dial(t, f.addr)
	c.Check(c.Framer.WritePing(false, [8]byte{1}))
	c.WantGoAway(http2.ErrCodeProtocol)
}

func TestFirstFrameSettingsAck(t *testing.T) {
	f := startServer(t, nil, okHandler)
	c := h2raw.Dial(t, f.addr)
	c.Check(c.Framer.WriteSettingsAck())
	c.WantGoAway(http2.ErrCodeProtocol)
}

func TestEvenStreamID(t *testing.T) {
	f := startServer(t, nil, okHandler)
	c := h2raw.Connect(t, f.addr)
	c.Get(2, "/")
	c.WantGoAway(http2.ErrCodeProtocol)
}

func TestDecreasingStreamID(t *testing.T) {
	f := startServer(t, nil, okHandler)
	c := h2raw.Connect(t, f.addr)
	c.Get(5, "/")
	c.OK(5, "200")
	c.Alive() // stream 5's writer is done (TestGoAwayWhileWriting is about a busy one)
	c.Get(3, "/")
	for c.GoAway == nil && c.Step() != nil {
	}
	if c.GoAway == nil {
		t.Fatalf("connection closed (%v) without a GOAWAY for a stream id below one already used", c.ClosedErr)
	}
	if code := c.GoAway.Code; code != http2.ErrCodeProtocol && code != http2.ErrCodeStreamClosed {
		t.Errorf("GOAWAY %v, want PROTOCOL_ERROR or STREAM_CLOSED", code)
	}
	if c.GoAway.LastID != 5 {
		t.Errorf("GOAWAY's last stream %d, want 5", c.GoAway.LastID)
	}
}

func TestPushPromiseFromClient(t *testing.T) {
	f := startServer(t, nil, okHandler)
	c := h2raw.Connect(t, f.addr)
	c.Get(1, "/")
	c.OK(1, "200")
	c.Alive()
	c.Check(c.Framer.WritePushPromise(http2.PushPromiseParam{
		StreamID: 1, PromiseID: 2, BlockFragment: c.Block(":method", "GET"), EndHeaders: true,
	}))
	c.WantGoAway(http2.ErrCodeProtocol)
}

// TestMalformedRequests: each request breaks RFC 9113 8.3 or 8.2.2 and is
// reset with PROTOCOL_ERROR, no handler run; the connection serves on.
func TestMalformedRequests(t *testing.T) {
	base := func(skip string, extra ...string) []string {
		var kv []string
		for _, p := range [][2]string{{":method", "POST"}, {":scheme", "http"}, {":path", "/x"}, {":authority", "a.test"}} {
			if p[0] != skip {
				kv = append(kv, p[0], p[1])
			}
		}
		return append(kv, extra...)
	}
	cases := []struct {
		name string
		kv   []string
		end  bool
	}{
		{"no :method", base(":method"), true},
		{"no :path", base(":path"), true},
		{"no :scheme", base(":scheme"), true},
		{"relative :path", []string{":method", "GET", ":scheme", "http", ":path", "x", ":authority", "a"}, true},
		{"connection", base("", "connection", "close"), true},
		{"transfer-encoding", base("", "transfer-encoding", "chunked"), false},
		{"keep-alive", base("", "keep-alive", "5"), true},
		{"upgrade", base("", "upgrade", "h2c"), true},
		{"proxy-connection", base("", "proxy-connection", "x"), true},
		{"te gzip", base("", "te", "gzip"), true},
		{"te trailers, gzip", base("", "te", "trailers, gzip"), true},
		{"content-length not a number", base("", "content-length", "ten"), false},
		{"content-length negative", base("", "content-length", "-1"), false},
		{"content-lengths differ", base("", "content-length", "1", "content-length", "2"), false},
		{"content-length and no body", base("", "content-length", "3"), true},
		{":protocol", base("", ":protocol", "websocket"), true},
		{"CONNECT with :path", []string{":method", "CONNECT", ":scheme", "http", ":path", "/", ":authority", "a:1"}, true},
		{"upper-case name", base("", "X-Upper", "v"), true},
		{"pseudo after regular", append(base(":authority", "x-a", "b"), ":authority", "a"), true},
		{"unknown pseudo", base("", ":bogus", "v"), true},
		{"response pseudo", base("", ":status", "200"), true},
		{"duplicate :path", base("", ":path", "/y"), true},
		{"empty name", base("", "", "v"), true},
		{"name not a token", base("", "x a", "v"), true},
		{"value with a newline", base("", "x-a", "b\nc"), true},
		{"bad authority", base(":authority", ":authority", "a b"), true},
	}
	handled := make(chan string, len(cases)*2)
	f := startServer(t, nil, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		handled <- r.URL.Path
	}))
	c := h2raw.Connect(t, f.addr)
	id := uint32(1)
	for _, tc := range cases {
		c.Headers(id, tc.end, tc.kv...)
		st := c.Response(id)
		if st.RST == nil || *st.RST != http2.ErrCodeProtocol {
			t.Fatalf("%s: status %q, reset %v; want RST_STREAM PROTOCOL_ERROR", tc.name, st.Status, st.RST)
		}
		id += 2
		c.Get(id, "/after") // the connection and its HPACK state are fine
		if st := c.Response(id); st.RST != nil || st.Status != "200" {
			t.Fatalf("after %s: status %q, reset %v", tc.name, st.Status, st.RST)
		}
		id += 2
	}
	close(handled)
	for p := range handled {
		if p != "/after" {
			t.Errorf("a handler ran for malformed request %q", p)
		}
	}
}

func TestTETrailersAllowed(t *testing.T) {
	f := startServer(t, nil, okHandler)
	c := h2raw.Connect(t, f.addr)
	c.Request(1, "GET", "/", true, "te", "trailers")
	c.OK(1, "200")
}

// TestContentLengthMismatch: DATA that disagrees with the content-length
// resets the stream with PROTOCOL_ERROR, and the handler's Read fails.
func TestContentLengthMismatch(t *testing.T) {
	g := newGate(t)
	readErr, started := make(chan error, 4), make(chan struct{}, 4)
	f := startServer(t, nil, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		started <- struct{}{}
		_, err := io.Copy(io.Discard, r.Body)
		readErr <- err
		<-g.ch // the handler's return does not race the reset (see TestResetWinsOverHandlerEnd)
	}))
	c := h2raw.Connect(t, f.addr)
	// Less than declared, then END_STREAM.
	c.Request(1, "POST", "/", false, "content-length", "10")
	recv(t, started, "the handler") // a stream reset in the same burst gets none
	c.Data(1, []byte("12345"), true)
	c.WantReset(1, http2.ErrCodeProtocol)
	if err := recv(t, readErr, "the handler's read"); err == nil {
		t.Error("short body: Read ended cleanly")
	}
	// More than declared.
	c.Request(3, "POST", "/", false, "content-length", "3")
	recv(t, started, "the handler")
	c.Data(3, []byte("12345"), false)
	c.WantReset(3, http2.ErrCodeProtocol)
	if err := recv(t, readErr, "the handler's read"); err == nil {
		t.Error("long body: Read ended cleanly")
	}
	// More than declared, over two frames.
	c.Request(5, "POST", "/", false, "content-length", "4")
	recv(t, started, "the handler")
	c.Data(5, []byte("123"), false)
	c.Data(5, []byte("45"), true)
	c.WantReset(5, http2.ErrCodeProtocol)
	if err := recv(t, readErr, "the handler's read"); err == nil {
		t.Error("long body in two frames: Read ended cleanly")
	}
	g.open()
	c.Alive()
}

// TestRequestTrailers: trailers after DATA reach req.Trailer once the body
// is read to its end.
func TestRequestTrailers(t *testing.T) {
	g := newGate(t)
	f := startServer(t, nil, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := io.Copy(io.Discard, r.Body); err != nil {
			<-g.ch // the handler's return does not race the reset (see TestResetWinsOverHandlerEnd)
			return
		}
		w.Header().Set("X-Read", fmt.Sprint(r.ContentLength))
		w.Header().Set("X-Trailer", r.Trailer.Get("X-T"))
	}))
	c := h2raw.Connect(t, f.addr)
	c.Request(1, "POST", "/", false, "trailer", "X-T")
	c.Data(1, []byte("some body"), false)
	c.Headers(1, true, "x-t", "trailer-value")
	st := c.OK(1, "200")
	if got := st.Header.Get("X-Trailer"); got != "trailer-value" {
		t.Errorf("the handler saw trailer %q", got)
	}
	if got := st.Header.Get("X-Read"); got != "-1" {
		t.Errorf("the request's ContentLength %s, want -1 (unknown)", got)
	}
	// Trailers without END_STREAM, or with pseudo-fields, are malformed.
	c.Request(3, "POST", "/", false)
	c.Headers(3, false, "x-t", "v")
	c.WantReset(3, http2.ErrCodeProtocol)
	c.Request(5, "POST", "/", false)
	c.Headers(5, true, ":path", "/", "x-t", "v")
	c.WantReset(5, http2.ErrCodeProtocol)
	c.Alive()
}

// TestContinuationRequest: a request's header block split over HEADERS
// and CONTINUATION frames.
func TestContinuationRequest(t *testing.T) {
	f := startServer(t, nil, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Got", r.Header.Get("X-Long"))
	}))
	c := h2raw.Connect(t, f.addr)
	long := strings.Repeat("v", 3000)
	block := c.Block(":method", "GET", ":scheme", "http", ":path", "/", ":authority", "a", "x-long", long)
	c.Check(c.Framer.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: block[:10], EndStream: true}))
	c.Check(c.Framer.WriteContinuation(1, false, block[10:100]))
	c.Check(c.Framer.WriteContinuation(1, true, block[100:]))
	st := c.OK(1, "200")
	if st.Header.Get("X-Got") != long {
		t.Errorf("the handler saw X-Long of %d bytes, want %d", len(st.Header.Get("X-Got")), len(long))
	}
}

// TestContinuationFlood: a header block continued far past the header
// list's limit, or past an invalid field, closes the connection before the
// rest is decoded (CVE-2023-45288's CONTINUATION flood).
func TestContinuationFlood(t *testing.T) {
	request := []string{":method", "GET", ":scheme", "http", ":path", "/", ":authority", "a"}
	for _, tc := range []struct {
		name  string
		first []string // the fields of the HEADERS frame's fragment
	}{
		{"past the limit", request},
		{"after an invalid field", append(request[:len(request):len(request)], "X-Upper", "v")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := startServer(t, &h2server.Server{MaxHeaderBytes: 1000}, okHandler)
			c := h2raw.Connect(t, f.addr)
			first := c.Block(tc.first...)
			// No END_HEADERS, and a fragment that is not HPACK: the server
			// stops before it decodes it (COMPRESSION_ERROR if it did).
			c.Burst(func(fr *http2.Framer) {
				c.Check(fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: first, EndStream: true}))
				c.Check(fr.WriteContinuation(1, false, bytes.Repeat([]byte{0xff}, 4096)))
			})
			c.WantGoAway(http2.ErrCodeProtocol)
		})
	}
}

// TestHeaderListTooLarge: a header list over MaxHeaderBytes is answered
// 431 without a handler, and the connection's HPACK state stays in step.
func TestHeaderListTooLarge(t *testing.T) {
	ran := make(chan struct{}, 4)
	f := startServer(t, &h2server.Server{MaxHeaderBytes: 1000}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ran <- struct{}{}
		_, _ = io.Copy(io.Discard, r.Body)
	}))
	c := h2raw.Connect(t, f.addr)
	var big []string
	for i := range 20 {
		big = append(big, fmt.Sprintf("x-h%02d", i), strings.Repeat(fmt.Sprint(i%10), 90))
	}
	c.Request(1, "GET", "/", true, big...)
	if st := c.OK(1, "431"); st.Header.Get("Content-Type") == "" {
		t.Errorf("431 answer without a content-type: %v", st.Header)
	}
	// With a body coming: 431, then RST_STREAM(NO_ERROR) stops the body.
	c.Request(3, "POST", "/", false, big...)
	st := c.Response(3)
	if st.Status != "431" {
		t.Fatalf("stream 3: status %q, want 431", st.Status)
	}
	c.Until("the stream's reset", func() bool { return st.RST != nil })
	if *st.RST != http2.ErrCodeNo {
		t.Errorf("stream 3 reset with %v, want NO_ERROR", *st.RST)
	}
	c.Data(3, []byte("dropped"), true) // may still come: ignored
	c.Get(5, "/small")
	c.OK(5, "200")
	if n := len(ran); n != 1 {
		t.Errorf("%d handlers ran, want only the small request's", n)
	}
}

// TestResponseHeaderTableSize: a client that allows no dynamic HPACK table
// still decodes every answer: the server's encoder honours
// SETTINGS_HEADER_TABLE_SIZE.
func TestResponseHeaderTableSize(t *testing.T) {
	f := startServer(t, nil, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Repeated-Header", "the same value every time")
	}))
	c := h2raw.Dial(t, f.addr)
	c.Decoder = hpack.NewDecoder(0, nil)
	c.Decoder.SetAllowedMaxDynamicTableSize(0)
	c.Framer.ReadMetaHeaders = c.Decoder
	c.Check(c.Framer.WriteSettings(http2.Setting{ID: http2.SettingHeaderTableSize, Val: 0}))
	for id := uint32(1); id < 10; id += 2 {
		c.Get(id, "/")
		if st := c.OK(id, "200"); st.Header.Get("X-Repeated-Header") != "the same value every time" {
			t.Fatalf("stream %d: header %q", id, st.Header.Get("X-Repeated-Header"))
		}
	}
}
