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

// rawClient speaks HTTP/2 frame by frame over a real TCP connection, to
// send what Go's client never would and to see every frame the server
// sends. Its methods are for the test's goroutine only.
type rawClient struct {
	t   testing.TB
	nc  net.Conn
	fr  *http2.Framer
	enc *hpack.Encoder
	dec *hpack.Decoder
	hb  bytes.Buffer

	// What the server sent.
	settings     map[http2.SettingID]uint32
	settingsSeen bool
	settingsAcks int
	pings        [][8]byte // PINGs of the server's
	pingAcks     [][8]byte
	goAway       *goAway
	streams      map[uint32]*rawStream
	closedErr    error // the read error that ended the connection
	// Flow control of what we send: the windows the server gave.
	connWindow    int64
	streamWindows map[uint32]int64
	connUpdates   int64 // sum of WINDOW_UPDATE increments on stream 0

	noPingAck bool // leave the server's PINGs unanswered
}

type goAway struct {
	lastID uint32
	code   http2.ErrCode
}

// rawStream is what the server answered on one stream.
type rawStream struct {
	info       []string // 1xx statuses
	status     string
	header     http.Header
	body       []byte
	dataFrames []int // each DATA frame's payload length
	trailer    http.Header
	ended      bool           // END_STREAM came
	rst        *http2.ErrCode // RST_STREAM came
}

// dialRaw connects to addr and sends the client preface, nothing more.
func dialRaw(t testing.TB, addr string) *rawClient {
	t.Helper()
	nc, err := net.DialTimeout("tcp", addr, wait)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = nc.Close() })
	c := &rawClient{
		t: t, nc: nc,
		fr:            http2.NewFramer(nc, nc),
		settings:      map[http2.SettingID]uint32{},
		streams:       map[uint32]*rawStream{},
		streamWindows: map[uint32]int64{},
		connWindow:    65535,
	}
	c.dec = hpack.NewDecoder(4096, nil)
	c.fr.ReadMetaHeaders = c.dec
	c.enc = hpack.NewEncoder(&c.hb)
	if _, err := nc.Write([]byte(http2.ClientPreface)); err != nil {
		t.Fatal(err)
	}
	return c
}

// connectRaw dials addr and does the whole handshake: our SETTINGS
// (settings), the server's SETTINGS, our ack.
func connectRaw(t testing.TB, addr string, settings ...http2.Setting) *rawClient {
	t.Helper()
	c := dialRaw(t, addr)
	c.check(c.fr.WriteSettings(settings...))
	for !c.settingsSeen {
		c.step()
	}
	return c
}

func (c *rawClient) check(err error) {
	c.t.Helper()
	if err != nil {
		c.t.Fatalf("raw client: %v", err)
	}
}

func (c *rawClient) stream(id uint32) *rawStream {
	st := c.streams[id]
	if st == nil {
		st = &rawStream{}
		c.streams[id] = st
	}
	return st
}

// step reads one frame and takes note of it; it returns nil once the
// connection is closed. A frame not coming within wait fails the test.
func (c *rawClient) step() http2.Frame {
	c.t.Helper()
	if c.closedErr != nil {
		c.t.Fatalf("raw client: reading past the connection's end (%v)", c.closedErr)
	}
	_ = c.nc.SetReadDeadline(time.Now().Add(wait))
	f, err := c.fr.ReadFrame()
	if err != nil {
		if errors.Is(err, os.ErrDeadlineExceeded) {
			c.t.Fatalf("raw client: no frame from the server in %v", wait)
		}
		c.closedErr = err
		return nil
	}
	c.note(f)
	return f
}

// note takes note of a frame the server sent.
func (c *rawClient) note(f http2.Frame) {
	switch f := f.(type) {
	case *http2.SettingsFrame:
		if f.IsAck() {
			c.settingsAcks++
			break
		}
		c.settingsSeen = true
		_ = f.ForeachSetting(func(s http2.Setting) error {
			c.settings[s.ID] = s.Val
			return nil
		})
		c.check(c.fr.WriteSettingsAck())
	case *http2.WindowUpdateFrame:
		if f.StreamID == 0 {
			c.connWindow += int64(f.Increment)
			c.connUpdates += int64(f.Increment)
		} else {
			c.streamWindows[f.StreamID] += int64(f.Increment)
		}
	case *http2.PingFrame:
		if f.IsAck() {
			c.pingAcks = append(c.pingAcks, f.Data)
			break
		}
		c.pings = append(c.pings, f.Data)
		if !c.noPingAck {
			c.check(c.fr.WritePing(true, f.Data))
		}
	case *http2.GoAwayFrame:
		c.goAway = &goAway{lastID: f.LastStreamID, code: f.ErrCode}
	case *http2.RSTStreamFrame:
		code := f.ErrCode
		c.stream(f.StreamID).rst = &code
	case *http2.MetaHeadersFrame:
		st := c.stream(f.StreamID)
		h := http.Header{}
		for _, hf := range f.RegularFields() {
			h.Add(hf.Name, hf.Value)
		}
		switch status := f.PseudoValue("status"); {
		case status == "":
			st.trailer = h
		case strings.HasPrefix(status, "1"):
			st.info = append(st.info, status)
		default:
			st.status, st.header = status, h
		}
		st.ended = st.ended || f.StreamEnded()
	case *http2.DataFrame:
		st := c.stream(f.StreamID)
		st.body = append(st.body, f.Data()...)
		st.dataFrames = append(st.dataFrames, len(f.Data()))
		st.ended = st.ended || f.StreamEnded()
	}
}

// until steps until cond holds, failing if the connection ends first.
func (c *rawClient) until(what string, cond func() bool) {
	c.t.Helper()
	for !cond() {
		if c.step() == nil {
			c.t.Fatalf("raw client: connection closed (%v) while waiting for %s", c.closedErr, what)
		}
	}
}

// untilWithin is until with its own bound d (below wait), for what a
// working server does at once; it reports whether cond came to hold.
func (c *rawClient) untilWithin(d time.Duration, cond func() bool) bool {
	c.t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		_ = c.nc.SetReadDeadline(deadline)
		f, err := c.fr.ReadFrame()
		if err != nil {
			if errors.Is(err, os.ErrDeadlineExceeded) {
				return false
			}
			c.t.Fatalf("raw client: connection closed: %v", err)
		}
		c.note(f)
	}
	return true
}

// response waits until stream id ends, by END_STREAM or RST_STREAM.
func (c *rawClient) response(id uint32) *rawStream {
	c.t.Helper()
	c.until("the end of a stream", func() bool {
		st := c.streams[id]
		return st != nil && (st.ended || st.rst != nil)
	})
	return c.streams[id]
}

// ok waits for stream id's answer and wants it complete, with status.
func (c *rawClient) ok(id uint32, status string) *rawStream {
	c.t.Helper()
	st := c.response(id)
	if st.rst != nil || st.status != status {
		c.t.Fatalf("stream %d: status %q, reset %v; want a complete %s", id, st.status, st.rst, status)
	}
	return st
}

// wantReset waits for stream id to end and wants it reset with code.
func (c *rawClient) wantReset(id uint32, code http2.ErrCode) {
	c.t.Helper()
	st := c.response(id)
	if st.rst == nil {
		c.t.Fatalf("stream %d ended cleanly (status %q, %d body bytes), want RST_STREAM %v", id, st.status, len(st.body), code)
	}
	if *st.rst != code {
		c.t.Fatalf("stream %d reset with %v, want %v", id, *st.rst, code)
	}
}

// wantGoAway waits for a GOAWAY and wants code, then the connection's end.
func (c *rawClient) wantGoAway(code http2.ErrCode) *goAway {
	c.t.Helper()
	for c.goAway == nil {
		if c.step() == nil {
			c.t.Fatalf("connection closed (%v) without a GOAWAY, want %v", c.closedErr, code)
		}
	}
	if c.goAway.code != code {
		c.t.Fatalf("GOAWAY %v, want %v", c.goAway.code, code)
	}
	c.wantClosed()
	return c.goAway
}

// wantClosed reads until the server closes the connection.
func (c *rawClient) wantClosed() {
	c.t.Helper()
	for c.closedErr == nil {
		c.step()
	}
}

// alive checks the connection still works: a PING comes back.
func (c *rawClient) alive() {
	c.t.Helper()
	data := [8]byte{'a', 'l', 'i', 'v', 'e', byte(len(c.pingAcks))}
	c.check(c.fr.WritePing(false, data))
	n := len(c.pingAcks)
	c.until("a PING ack", func() bool { return len(c.pingAcks) > n })
	if c.pingAcks[n] != data {
		c.t.Fatalf("PING ack carries %q, want %q", c.pingAcks[n], data)
	}
	if c.goAway != nil {
		c.t.Fatalf("unexpected GOAWAY %v", c.goAway.code)
	}
}

// block encodes header fields, given as name, value pairs.
func (c *rawClient) block(kv ...string) []byte {
	c.hb.Reset()
	for i := 0; i+1 < len(kv); i += 2 {
		c.check(c.enc.WriteField(hpack.HeaderField{Name: kv[i], Value: kv[i+1]}))
	}
	return append([]byte(nil), c.hb.Bytes()...)
}

// headers sends one HEADERS frame with the fields kv.
func (c *rawClient) headers(id uint32, end bool, kv ...string) {
	c.t.Helper()
	c.check(c.fr.WriteHeaders(http2.HeadersFrameParam{
		StreamID: id, BlockFragment: c.block(kv...), EndStream: end, EndHeaders: true,
	}))
}

// request opens stream id with a request for method and path, and the
// fields extra.
func (c *rawClient) request(id uint32, method, path string, end bool, extra ...string) {
	c.t.Helper()
	kv := append([]string{":method", method, ":scheme", "http", ":path", path, ":authority", "example.test"}, extra...)
	c.headers(id, end, kv...)
}

// get sends a GET on stream id.
func (c *rawClient) get(id uint32, path string) { c.request(id, "GET", path, true) }

// data sends data on stream id in frames of at most 16 KiB, minding the
// windows the server gave (stepping until they allow).
func (c *rawClient) data(id uint32, p []byte, end bool) {
	c.t.Helper()
	if _, ok := c.streamWindows[id]; !ok {
		c.streamWindows[id] = int64(c.initialWindow())
	}
	for first := true; first || len(p) > 0; first = false {
		n := min(len(p), 16384)
		if n > 0 {
			c.until("window to send", func() bool {
				return c.connWindow > 0 && c.streamWindows[id] > 0
			})
			n = int(min(int64(n), c.connWindow, c.streamWindows[id]))
		}
		c.connWindow -= int64(n)
		c.streamWindows[id] -= int64(n)
		c.check(c.fr.WriteData(id, end && n == len(p), p[:n]))
		p = p[n:]
	}
}

// initialWindow is the stream window the server's SETTINGS gave.
func (c *rawClient) initialWindow() uint32 {
	if v, ok := c.settings[http2.SettingInitialWindowSize]; ok {
		return v
	}
	return 65535
}
