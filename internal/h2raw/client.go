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

// Package h2raw is a raw HTTP/2 client for tests: it speaks HTTP/2 frame
// by frame over a real TCP connection, to send what Go's client never
// would (floods, resets, malformed and oversized frames) and to see every
// frame a server sends. The inbound server's tests and the hostile-peer
// suite (test/hostile) share it.
package h2raw

import (
	"bytes"
	"errors"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// Wait bounds how long Step waits for a frame, and Dial for the
// connection: past it, the test fails.
const Wait = 10 * time.Second

// Client is one raw HTTP/2 connection. Its methods are for the test's
// goroutine only; a failure fails T.
type Client struct {
	T      testing.TB
	Conn   net.Conn
	Framer *http2.Framer
	enc    *hpack.Encoder
	// Decoder reads the server's header blocks (Framer.ReadMetaHeaders
	// is it): replace both to change its table size.
	Decoder *hpack.Decoder
	hb      bytes.Buffer

	// What the server sent.
	Settings     map[http2.SettingID]uint32
	SettingsSeen bool
	SettingsAcks int
	Pings        [][8]byte // PINGs of the server's
	PingAcks     [][8]byte
	GoAway       *GoAway
	Streams      map[uint32]*Stream
	ClosedErr    error // the read error that ended the connection
	// Flow control of what we send: the windows the server gave.
	ConnWindow    int64
	StreamWindows map[uint32]int64
	ConnUpdates   int64 // sum of WINDOW_UPDATE increments on stream 0

	NoPingAck bool // leave the server's PINGs unanswered
}

// GoAway is the GOAWAY the server sent.
type GoAway struct {
	LastID uint32
	Code   http2.ErrCode
}

// Stream is what the server answered on one stream.
type Stream struct {
	Info       []string // 1xx statuses
	Status     string
	Header     http.Header
	Body       []byte
	DataFrames []int // each DATA frame's payload length
	Trailer    http.Header
	Ended      bool           // END_STREAM came
	RST        *http2.ErrCode // RST_STREAM came
}

// Dial connects to addr and sends the client preface, nothing more.
func Dial(t testing.TB, addr string) *Client {
	t.Helper()
	nc, err := (&net.Dialer{Timeout: Wait}).DialContext(t.Context(), "tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = nc.Close() })
	c := &Client{
		T: t, Conn: nc,
		Framer:        http2.NewFramer(nc, nc),
		Settings:      map[http2.SettingID]uint32{},
		Streams:       map[uint32]*Stream{},
		StreamWindows: map[uint32]int64{},
		ConnWindow:    65535,
	}
	c.Decoder = hpack.NewDecoder(4096, nil)
	c.Framer.ReadMetaHeaders = c.Decoder
	c.enc = hpack.NewEncoder(&c.hb)
	if _, err := nc.Write([]byte(http2.ClientPreface)); err != nil {
		t.Fatal(err)
	}
	return c
}

// Connect dials addr and does the whole handshake: our SETTINGS
// (settings), the server's SETTINGS, our ack.
func Connect(t testing.TB, addr string, settings ...http2.Setting) *Client {
	t.Helper()
	c := Dial(t, addr)
	c.Check(c.Framer.WriteSettings(settings...))
	for !c.SettingsSeen {
		c.Step()
	}
	return c
}

// Check fails the test on a write error.
func (c *Client) Check(err error) {
	c.T.Helper()
	if err != nil {
		c.T.Fatalf("raw client: %v", err)
	}
}

// Stream returns the record of what the server sent on stream id.
func (c *Client) Stream(id uint32) *Stream {
	st := c.Streams[id]
	if st == nil {
		st = &Stream{}
		c.Streams[id] = st
	}
	return st
}

// Step reads one frame and takes note of it; it returns nil once the
// connection is closed. A frame not coming within Wait fails the test.
func (c *Client) Step() http2.Frame {
	c.T.Helper()
	if c.ClosedErr != nil {
		c.T.Fatalf("raw client: reading past the connection's end (%v)", c.ClosedErr)
	}
	_ = c.Conn.SetReadDeadline(time.Now().Add(Wait))
	f, err := c.Framer.ReadFrame()
	if err != nil {
		if errors.Is(err, os.ErrDeadlineExceeded) {
			c.T.Fatalf("raw client: no frame from the server in %v", Wait)
		}
		c.ClosedErr = err
		return nil
	}
	c.note(f)
	return f
}

// note takes note of a frame the server sent.
func (c *Client) note(f http2.Frame) {
	switch f := f.(type) {
	case *http2.SettingsFrame:
		if f.IsAck() {
			c.SettingsAcks++
			break
		}
		c.SettingsSeen = true
		_ = f.ForeachSetting(func(s http2.Setting) error {
			c.Settings[s.ID] = s.Val
			return nil
		})
		c.Check(c.Framer.WriteSettingsAck())
	case *http2.WindowUpdateFrame:
		if f.StreamID == 0 {
			c.ConnWindow += int64(f.Increment)
			c.ConnUpdates += int64(f.Increment)
		} else {
			c.StreamWindows[f.StreamID] += int64(f.Increment)
		}
	case *http2.PingFrame:
		if f.IsAck() {
			c.PingAcks = append(c.PingAcks, f.Data)
			break
		}
		c.Pings = append(c.Pings, f.Data)
		if !c.NoPingAck {
			c.Check(c.Framer.WritePing(true, f.Data))
		}
	case *http2.GoAwayFrame:
		c.GoAway = &GoAway{LastID: f.LastStreamID, Code: f.ErrCode}
	case *http2.RSTStreamFrame:
		code := f.ErrCode
		c.Stream(f.StreamID).RST = &code
	case *http2.MetaHeadersFrame:
		st := c.Stream(f.StreamID)
		h := http.Header{}
		for _, hf := range f.RegularFields() {
			h.Add(hf.Name, hf.Value)
		}
		switch status := f.PseudoValue("status"); {
		case status == "":
			st.Trailer = h
		case strings.HasPrefix(status, "1"):
			st.Info = append(st.Info, status)
		default:
			st.Status, st.Header = status, h
		}
		st.Ended = st.Ended || f.StreamEnded()
	case *http2.DataFrame:
		st := c.Stream(f.StreamID)
		st.Body = append(st.Body, f.Data()...)
		st.DataFrames = append(st.DataFrames, len(f.Data()))
		st.Ended = st.Ended || f.StreamEnded()
	}
}

// Until steps until cond holds, failing if the connection ends first.
func (c *Client) Until(what string, cond func() bool) {
	c.T.Helper()
	for !cond() {
		if c.Step() == nil {
			c.T.Fatalf("raw client: connection closed (%v) while waiting for %s", c.ClosedErr, what)
		}
	}
}

// UntilWithin is Until with its own bound d (below Wait), for what a
// working server does at once; it reports whether cond came to hold.
func (c *Client) UntilWithin(d time.Duration, cond func() bool) bool {
	c.T.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		_ = c.Conn.SetReadDeadline(deadline)
		f, err := c.Framer.ReadFrame()
		if err != nil {
			if errors.Is(err, os.ErrDeadlineExceeded) {
				return false
			}
			c.T.Fatalf("raw client: connection closed: %v", err)
		}
		c.note(f)
	}
	return true
}

// ReadUntil steps until cond holds, the connection ends (ClosedErr is
// then set) or deadline passes, and reports whether cond came to hold.
// Unlike Until it never fails the test, for a server that may lack the
// defence a test measures. Past the deadline the connection may be left
// in the middle of a frame: close it.
func (c *Client) ReadUntil(deadline time.Time, cond func() bool) bool {
	c.T.Helper()
	for !cond() {
		if c.ClosedErr != nil {
			return false
		}
		_ = c.Conn.SetReadDeadline(deadline)
		f, err := c.Framer.ReadFrame()
		if err != nil {
			if !errors.Is(err, os.ErrDeadlineExceeded) {
				c.ClosedErr = err
			}
			return cond()
		}
		c.note(f)
	}
	return true
}

// Response waits until stream id ends, by END_STREAM or RST_STREAM.
func (c *Client) Response(id uint32) *Stream {
	c.T.Helper()
	c.Until("the end of a stream", func() bool {
		st := c.Streams[id]
		return st != nil && (st.Ended || st.RST != nil)
	})
	return c.Streams[id]
}

// OK waits for stream id's answer and wants it complete, with status.
func (c *Client) OK(id uint32, status string) *Stream {
	c.T.Helper()
	st := c.Response(id)
	if st.RST != nil || st.Status != status {
		c.T.Fatalf("stream %d: status %q, reset %v; want a complete %s", id, st.Status, st.RST, status)
	}
	return st
}

// WantReset waits for stream id to end and wants it reset with code.
func (c *Client) WantReset(id uint32, code http2.ErrCode) {
	c.T.Helper()
	st := c.Response(id)
	if st.RST == nil {
		c.T.Fatalf("stream %d ended cleanly (status %q, %d body bytes), want RST_STREAM %v", id, st.Status, len(st.Body), code)
	}
	if *st.RST != code {
		c.T.Fatalf("stream %d reset with %v, want %v", id, *st.RST, code)
	}
}

// WantGoAway waits for a GOAWAY and wants code, then the connection's end.
func (c *Client) WantGoAway(code http2.ErrCode) *GoAway {
	c.T.Helper()
	for c.GoAway == nil {
		if c.Step() == nil {
			c.T.Fatalf("connection closed (%v) without a GOAWAY, want %v", c.ClosedErr, code)
		}
	}
	if c.GoAway.Code != code {
		c.T.Fatalf("GOAWAY %v, want %v", c.GoAway.Code, code)
	}
	c.WantClosed()
	return c.GoAway
}

// WantClosed reads until the server closes the connection.
func (c *Client) WantClosed() {
	c.T.Helper()
	for c.ClosedErr == nil {
		c.Step()
	}
}

// Alive checks the connection still works: a PING comes back.
func (c *Client) Alive() {
	c.T.Helper()
	data := [8]byte{'a', 'l', 'i', 'v', 'e', byte(len(c.PingAcks))}
	c.Check(c.Framer.WritePing(false, data))
	n := len(c.PingAcks)
	c.Until("a PING ack", func() bool { return len(c.PingAcks) > n })
	if c.PingAcks[n] != data {
		c.T.Fatalf("PING ack carries %q, want %q", c.PingAcks[n], data)
	}
	if c.GoAway != nil {
		c.T.Fatalf("unexpected GOAWAY %v", c.GoAway.Code)
	}
}

// Block encodes header fields, given as name, value pairs.
func (c *Client) Block(kv ...string) []byte {
	c.hb.Reset()
	for i := 0; i+1 < len(kv); i += 2 {
		c.Check(c.enc.WriteField(hpack.HeaderField{Name: kv[i], Value: kv[i+1]}))
	}
	return append([]byte(nil), c.hb.Bytes()...)
}

// Headers sends one HEADERS frame with the fields kv.
func (c *Client) Headers(id uint32, end bool, kv ...string) {
	c.T.Helper()
	c.Check(c.Framer.WriteHeaders(http2.HeadersFrameParam{
		StreamID: id, BlockFragment: c.Block(kv...), EndStream: end, EndHeaders: true,
	}))
}

// Request opens stream id with a request for method and path, and the
// fields extra.
func (c *Client) Request(id uint32, method, path string, end bool, extra ...string) {
	c.T.Helper()
	kv := append([]string{":method", method, ":scheme", "http", ":path", path, ":authority", "example.test"}, extra...)
	c.Headers(id, end, kv...)
}

// Get sends a GET on stream id.
func (c *Client) Get(id uint32, path string) { c.Request(id, "GET", path, true) }

// Data sends data on stream id in frames of at most 16 KiB, minding the
// windows the server gave (stepping until they allow).
func (c *Client) Data(id uint32, p []byte, end bool) {
	c.T.Helper()
	if _, ok := c.StreamWindows[id]; !ok {
		c.StreamWindows[id] = int64(c.InitialWindow())
	}
	for first := true; first || len(p) > 0; first = false {
		n := min(len(p), 16384)
		if n > 0 {
			c.Until("window to send", func() bool {
				return c.ConnWindow > 0 && c.StreamWindows[id] > 0
			})
			n = int(min(int64(n), c.ConnWindow, c.StreamWindows[id]))
		}
		c.ConnWindow -= int64(n)
		c.StreamWindows[id] -= int64(n)
		c.Check(c.Framer.WriteData(id, end && n == len(p), p[:n]))
		p = p[n:]
	}
}

// InitialWindow is the stream window the server's SETTINGS gave.
func (c *Client) InitialWindow() uint32 {
	if v, ok := c.Settings[http2.SettingInitialWindowSize]; ok {
		return v
	}
	return 65535
}

// Burst writes what frames writes in one write, so that the server reads
// it as one burst.
func (c *Client) Burst(frames func(fr *http2.Framer)) {
	c.T.Helper()
	var b bytes.Buffer
	fr := http2.NewFramer(&b, nil)
	frames(fr)
	_, err := c.Conn.Write(b.Bytes())
	c.Check(err)
}

// OpenAndReset writes HEADERS and RST_STREAM for n streams from first, in
// one burst.
func (c *Client) OpenAndReset(first uint32, n int) {
	block := c.Block(":method", "POST", ":scheme", "http", ":path", "/", ":authority", "example.test")
	c.Burst(func(fr *http2.Framer) {
		for i := range n {
			id := first + uint32(2*i)
			c.Check(fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: block, EndHeaders: true}))
			c.Check(fr.WriteRSTStream(id, http2.ErrCodeCancel))
		}
	})
}
