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
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"knative.dev/event-forwarding-proxy/delivery/internal/calltest"
)

// frameServer is a loopback HTTP/2 server whose every connection is handled
// by a function the test scripts frame by frame, for the protocol cases Go's
// server does not produce. It holds streams without a goroutine each: one
// goroutine per connection reads its frames.
type frameServer struct {
	url      string
	accepted atomic.Int64
	streams  atomic.Int64  // HEADERS frames that opened a stream, on all connections
	pings    atomic.Int64  // PINGs (not acks) received from clients
	done     chan struct{} // closed when the test ends: handlers blocked on it return
}

// frameConn is one connection of a frameServer, past the connection
// preface and the exchange of SETTINGS.
type frameConn struct {
	srv   *frameServer
	index int64 // 1 for the first connection the server accepted
	conn  net.Conn
	fr    *http2.Framer

	wmu    sync.Mutex // held while writing frames, and encoding header blocks
	enc    *hpack.Encoder
	encBuf bytes.Buffer

	// settings are the client's, from its first SETTINGS frame.
	settings map[http2.SettingID]uint32
	// connWindowGranted sums the client's WINDOW_UPDATE increments on
	// stream 0.
	connWindowGranted atomic.Int64
	lastStream        uint32

	// Set by the handler before it reads frames:
	noPingAck     bool   // leave the client's PINGs unanswered
	onPing        func() // after a client's PING was handled
	onSettingsAck func() // when the client acknowledges one of our SETTINGS
}

// newFrameServer starts a frame server that sends settings in its first
// SETTINGS frame and runs handle on each connection once the prefaces are
// exchanged; the connection is closed when handle returns.
func newFrameServer(t testing.TB, settings []http2.Setting, handle func(fc *frameConn)) *frameServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return newFrameServerOn(t, ln, settings, handle)
}

// newFrameServerOn is newFrameServer on the listener ln.
func newFrameServerOn(t testing.TB, ln net.Listener, settings []http2.Setting, handle func(fc *frameConn)) *frameServer {
	t.Helper()
	s := &frameServer{url: "http://" + ln.Addr().String(), done: make(chan struct{})}
	calltest.ServeConns(t, ln, &s.accepted, func() { close(s.done) }, func(c net.Conn, index int64) {
		fc, err := s.handshake(c, index, settings)
		if err != nil {
			return
		}
		handle(fc)
	})
	return s
}

var errNoPreface = errors.New("the client did not send the HTTP/2 connection preface")

func (s *frameServer) handshake(c net.Conn, index int64, settings []http2.Setting) (*frameConn, error) {
	fc := &frameConn{srv: s, index: index, conn: c, fr: http2.NewFramer(c, c), settings: map[http2.SettingID]uint32{}}
	fc.enc = hpack.NewEncoder(&fc.encBuf)
	fc.fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	if err := fc.fr.WriteSettings(settings...); err != nil {
		return nil, err
	}
	preface := make([]byte, len(http2.ClientPreface))
	if _, err := io.ReadFull(c, preface); err != nil {
		return nil, err
	}
	if string(preface) != http2.ClientPreface {
		return nil, errNoPreface
	}
	f, err := fc.fr.ReadFrame()
	if err != nil {
		return nil, err
	}
	sf, ok := f.(*http2.SettingsFrame)
	if !ok || sf.IsAck() {
		return nil, fmt.Errorf("first frame %v, want SETTINGS", f)
	}
	sf.ForeachSetting(func(st http2.Setting) error {
		fc.settings[st.ID] = st.Val
		return nil
	})
	if v, ok := fc.settings[http2.SettingHeaderTableSize]; ok {
		fc.enc.SetMaxDynamicTableSizeLimit(v)
	}
	if err := fc.fr.WriteSettingsAck(); err != nil {
		return nil, err
	}
	return fc, nil
}

// write runs f with the connection's Framer, excluding other writers.
func (fc *frameConn) write(f func(fr *http2.Framer) error) error {
	fc.wmu.Lock()
	defer fc.wmu.Unlock()
	return f(fc.fr)
}

// writeHeaders writes the header block of the fields kv (name, value, name,
// value...) on stream, in a HEADERS frame and as many CONTINUATION frames
// as frames of 16 KiB need.
func (fc *frameConn) writeHeaders(stream uint32, endStream bool, kv ...string) error {
	fc.wmu.Lock()
	defer fc.wmu.Unlock()
	fc.encBuf.Reset()
	for i := 0; i+1 < len(kv); i += 2 {
		if err := fc.enc.WriteField(hpack.HeaderField{Name: kv[i], Value: kv[i+1]}); err != nil {
			return err
		}
	}
	block := fc.encBuf.Bytes()
	const max = 16 << 10
	first := block[:min(len(block), max)]
	rest := block[len(first):]
	err := fc.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: stream, BlockFragment: first, EndStream: endStream, EndHeaders: len(rest) == 0})
	for err == nil && len(rest) > 0 {
		frag := rest[:min(len(rest), max)]
		rest = rest[len(frag):]
		err = fc.fr.WriteContinuation(stream, len(rest) == 0, frag)
	}
	return err
}

// writeData writes data on stream in DATA frames of at most 16 KiB,
// without regard to the client's flow-control windows (keep it within
// them).
func (fc *frameConn) writeData(stream uint32, endStream bool, data []byte) error {
	return fc.write(func(fr *http2.Framer) error {
		for {
			chunk := data[:min(len(data), 16<<10)]
			data = data[len(chunk):]
			if err := fr.WriteData(stream, endStream && len(data) == 0, chunk); err != nil || len(data) == 0 {
				return err
			}
		}
	})
}

func (fc *frameConn) writeRST(stream uint32, code http2.ErrCode) error {
	return fc.write(func(fr *http2.Framer) error { return fr.WriteRSTStream(stream, code) })
}

// answer writes a complete answer on stream: status, then the body if any.
func (fc *frameConn) answer(stream uint32, status, body string) error {
	if body == "" {
		return fc.writeHeaders(stream, true, ":status", status)
	}
	if err := fc.writeHeaders(stream, false, ":status", status); err != nil {
		return err
	}
	return fc.writeData(stream, true, []byte(body))
}

// next reads the next frame a test cares about. It answers the client's
// SETTINGS and (unless noPingAck) PINGs, records its WINDOW_UPDATEs on the
// connection, and skips those frames and PRIORITY. A DATA frame's bytes are
// valid until the next call.
func (fc *frameConn) next() (http2.Frame, error) {
	for {
		f, err := fc.fr.ReadFrame()
		if err != nil {
			return nil, err
		}
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if f.IsAck() {
				if fc.onSettingsAck != nil {
					fc.onSettingsAck()
				}
				continue
			}
			if err := fc.write(func(fr *http2.Framer) error { return fr.WriteSettingsAck() }); err != nil {
				return nil, err
			}
			continue
		case *http2.PingFrame:
			if f.IsAck() {
				return f, nil
			}
			fc.srv.pings.Add(1)
			if !fc.noPingAck {
				data := f.Data
				if err := fc.write(func(fr *http2.Framer) error { return fr.WritePing(true, data) }); err != nil {
					return nil, err
				}
			}
			if fc.onPing != nil {
				fc.onPing()
			}
			continue
		case *http2.WindowUpdateFrame:
			if f.StreamID == 0 {
				fc.connWindowGranted.Add(int64(f.Increment))
			}
			continue
		case *http2.PriorityFrame:
			continue
		case *http2.MetaHeadersFrame:
			if f.StreamID > fc.lastStream {
				fc.lastStream = f.StreamID
				fc.srv.streams.Add(1)
			}
		}
		return f, nil
	}
}

// rawRequest is a request as a frame server read it.
type rawRequest struct {
	stream    uint32
	fields    []hpack.HeaderField // of the HEADERS, in order, pseudo-headers included
	body      []byte
	trailer   []hpack.HeaderField // of a trailing HEADERS frame
	ended     bool                // the client ended the stream (END_STREAM)
	reset     bool                // the client reset the stream
	resetCode http2.ErrCode
}

// values returns the values of the fields named name, in order.
func (r *rawRequest) values(name string) []string {
	return fieldValues(r.fields, name)
}

func fieldValues(fields []hpack.HeaderField, name string) []string {
	var vals []string
	for _, f := range fields {
		if f.Name == name {
			vals = append(vals, f.Value)
		}
	}
	return vals
}

// readRequest reads the next request of the connection to its end
// (END_STREAM) or reset, granting the client flow-control window for the
// body as it arrives. It expects one stream at a time.
func (fc *frameConn) readRequest() (*rawRequest, error) {
	var hf *http2.MetaHeadersFrame
	for hf == nil {
		f, err := fc.next()
		if err != nil {
			return nil, err
		}
		switch f := f.(type) {
		case *http2.MetaHeadersFrame:
			hf = f
		case *http2.RSTStreamFrame, *http2.DataFrame:
			// The end of a stream answered before.
			if f.Header().StreamID > fc.lastStream {
				return nil, fmt.Errorf("got %v on a stream not opened", f)
			}
		default:
			return nil, fmt.Errorf("got %v, want a request's HEADERS", f)
		}
	}
	r := &rawRequest{stream: hf.StreamID, fields: hf.Fields, ended: hf.StreamEnded()}
	for !r.ended && !r.reset {
		f, err := fc.next()
		if err != nil {
			return r, err
		}
		if id := f.Header().StreamID; id != r.stream {
			if _, ok := f.(*http2.RSTStreamFrame); ok && id < r.stream {
				continue // the end of a stream answered before
			}
			return r, fmt.Errorf("got %v while reading stream %d", f, r.stream)
		}
		switch f := f.(type) {
		case *http2.DataFrame:
			r.body = append(r.body, f.Data()...)
			r.ended = f.StreamEnded()
			if n := f.Header().Length; n > 0 && !r.ended {
				err = fc.write(func(fr *http2.Framer) error {
					if err := fr.WriteWindowUpdate(0, n); err != nil {
						return err
					}
					return fr.WriteWindowUpdate(r.stream, n)
				})
				if err != nil {
					return r, err
				}
			}
		case *http2.MetaHeadersFrame:
			r.trailer = f.Fields
			r.ended = f.StreamEnded()
			if !r.ended {
				return r, errors.New("trailing HEADERS without END_STREAM")
			}
		case *http2.RSTStreamFrame:
			r.reset, r.resetCode = true, f.ErrCode
		default:
			return r, fmt.Errorf("got %v while reading stream %d", f, r.stream)
		}
	}
	return r, nil
}

// captured is a request a capture server read, or why it could not.
type captured struct {
	req *rawRequest
	err error
}

// newCaptureServer starts a frame server that reads each request to its
// end, sends it on the channel returned and answers 200 with the body
// "ok".
func newCaptureServer(t testing.TB) (*frameServer, <-chan captured) {
	t.Helper()
	got := make(chan captured, 64)
	s := newFrameServer(t, nil, func(fc *frameConn) {
		for {
			r, err := fc.readRequest()
			if err != nil && (errors.Is(err, io.EOF) || isClosedErr(err)) {
				return
			}
			select {
			case got <- captured{r, err}:
			case <-fc.srv.done:
				return
			}
			if err != nil {
				return
			}
			if r.ended {
				if err := fc.answer(r.stream, "200", "ok"); err != nil {
					return
				}
			}
		}
	})
	return s, got
}

// isClosedErr reports whether err is the end of a connection.
func isClosedErr(err error) bool {
	return errors.Is(err, net.ErrClosed) || errors.Is(err, io.ErrUnexpectedEOF) ||
		strings.Contains(err.Error(), "connection reset by peer")
}

// holdStreams is a frame handler that reads every frame and answers
// nothing, until the connection ends.
func holdStreams(fc *frameConn) {
	for {
		if _, err := fc.next(); err != nil {
			return
		}
	}
}
