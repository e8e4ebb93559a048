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

package h2c

// The answer's side of a stream: its HEADERS, DATA and trailers as the
// reading goroutine gets them, and the body the caller reads.

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/textproto"
	"strconv"
	"strings"

	"golang.org/x/net/http2"

	"knative.dev/event-forwarding-proxy/internal/h2conn"
)

// OnHeaders takes an answer's headers, an informational answer's, or its
// trailers.
func (c *conn) OnHeaders(f *h2conn.HeaderBlock) error {
	c.mu.Lock()
	s := c.streams[f.StreamID]
	if s == nil {
		opened := c.openedLocked(f.StreamID)
		c.mu.Unlock()
		if !opened {
			return http2.ConnectionError(http2.ErrCodeProtocol)
		}
		return nil // a stream we already ended
	}
	if f.Truncated {
		c.mu.Unlock()
		c.streamError(s.id, http2.ErrCodeCancel, fmt.Errorf("%w (%d bytes)", ErrResponseHeaderTooLarge, c.t.headerLimit()))
		return nil
	}
	if s.resp != nil {
		c.mu.Unlock()
		return c.onTrailers(s, f)
	}
	status := f.PseudoValue("status")
	code, err := parseStatus(status)
	if err == nil && code < 200 && (code == http.StatusSwitchingProtocols || f.StreamEnded()) {
		err = fmt.Errorf("h2c: %s answered %d, which HTTP/2 does not allow here", c.addr, code)
	}
	if err == nil && code < 200 {
		s.informal++
		if s.informal > maxInformational {
			// A destination that floods interim answers would keep the
			// reading goroutine busy, and the connection's other calls
			// waiting, after this call failed: the connection goes.
			c.mu.Unlock()
			return fmt.Errorf("h2c: %s sent more than %d informational answers: %w", c.addr, maxInformational,
				http2.ConnectionError(http2.ErrCodeEnhanceYourCalm))
		}
	}
	if err != nil {
		c.mu.Unlock()
		c.streamError(s.id, http2.ErrCodeProtocol, err)
		return nil
	}
	if code < 200 {
		c.mu.Unlock()
		return nil // 1xx: the final answer comes next
	}
	resp, err := c.response(s, f, code)
	if err != nil {
		c.mu.Unlock()
		c.streamError(s.id, http2.ErrCodeProtocol, err)
		return nil
	}
	s.resp = resp
	if f.StreamEnded() {
		s.eof = true
	}
	freed := c.finishLocked(s)
	s.signal()
	c.mu.Unlock()
	if freed {
		c.t.roomFreed(c.pool)
	}
	return nil
}

func parseStatus(v string) (int, error) {
	if len(v) != 3 || v[0] < '1' || v[0] > '9' || v[1] < '0' || v[1] > '9' || v[2] < '0' || v[2] > '9' {
		return 0, fmt.Errorf("h2c: the answer's :status %q is not an HTTP status", v)
	}
	return int(v[0]-'0')*100 + int(v[1]-'0')*10 + int(v[2]-'0'), nil
}

// response builds the answer from its HEADERS.
func (c *conn) response(s *stream, f *h2conn.HeaderBlock, code int) (*http.Response, error) {
	fields := f.RegularFields()
	resp := &http.Response{
		Status:        strconv.Itoa(code) + " " + http.StatusText(code),
		StatusCode:    code,
		Proto:         "HTTP/2.0",
		ProtoMajor:    2,
		Header:        make(http.Header, len(fields)),
		ContentLength: -1,
		Request:       s.o.req,
	}
	for _, hf := range fields {
		key := textproto.CanonicalMIMEHeaderKey(hf.Name)
		switch key {
		case "Trailer":
			if resp.Trailer == nil {
				resp.Trailer = make(http.Header)
			}
			for k := range strings.SplitSeq(hf.Value, ",") {
				if k = strings.TrimSpace(k); k != "" {
					resp.Trailer[textproto.CanonicalMIMEHeaderKey(k)] = nil
				}
			}
		case "Content-Length":
			n, err := strconv.ParseUint(hf.Value, 10, 63)
			if err != nil || (s.declared >= 0 && int64(n) != s.declared) {
				return nil, fmt.Errorf("h2c: %s sent an invalid content-length %q", c.addr, hf.Value)
			}
			s.declared = int64(n)
			resp.ContentLength = int64(n)
			resp.Header[key] = append(resp.Header[key], hf.Value)
		default:
			resp.Header[key] = append(resp.Header[key], hf.Value)
		}
	}
	if s.o.req.Method == http.MethodHead || code == http.StatusNotModified {
		// Such an answer names the length of a body it does not carry
		// (RFC 9110 9.3.2, 15.4.5): the length is not the body's.
		s.declared = -1
	}
	if f.StreamEnded() {
		if s.declared > 0 {
			return nil, fmt.Errorf("h2c: %s declared %d body bytes and sent none", c.addr, s.declared)
		}
		resp.Body = http.NoBody
	} else {
		resp.Body = &body{s: s}
	}
	return resp, nil
}

func (c *conn) onTrailers(s *stream, f *h2conn.HeaderBlock) error {
	if !f.StreamEnded() {
		c.streamError(s.id, http2.ErrCodeProtocol, fmt.Errorf("h2c: %s sent a second header block that does not end the stream", c.addr))
		return nil
	}
	c.mu.Lock()
	if s.gone {
		c.mu.Unlock()
		return nil
	}
	// Kept aside: the caller's resp.Trailer gets them on the Read that
	// returns io.EOF, as net/http does, so the caller may look at the
	// map before then without racing this goroutine.
	s.trailer = make(http.Header, len(f.RegularFields()))
	for _, hf := range f.RegularFields() {
		key := textproto.CanonicalMIMEHeaderKey(hf.Name)
		s.trailer[key] = append(s.trailer[key], hf.Value)
	}
	freed, rst := c.endBodyLocked(s)
	c.mu.Unlock()
	c.afterEnd(s.id, freed, rst)
	return nil
}

// endBodyLocked marks the answer's body complete, or ends the stream when
// its length is not the declared one. The caller, once it let go of mu,
// sends the reset if rst and wakes waiting callers if freed.
func (c *conn) endBodyLocked(s *stream) (freed, rst bool) {
	if s.declared >= 0 && s.received != s.declared {
		c.dropLocked(s, fmt.Errorf("h2c: %s declared %d body bytes and sent %d", c.addr, s.declared, s.received))
		return true, true
	}
	s.eof = true
	s.signal()
	return c.finishLocked(s), false
}

// afterEnd does what endBodyLocked left to its caller.
func (c *conn) afterEnd(id uint32, freed, rst bool) {
	if rst {
		_ = c.write(func() error { return c.w.FR.WriteRSTStream(id, http2.ErrCodeProtocol) })
	}
	if freed {
		c.t.roomFreed(c.pool)
	}
}

// OnData takes a DATA frame: its bytes go to the answer's body, or are
// refunded at once when nothing will read them.
func (c *conn) OnData(f *http2.DataFrame) error {
	n := int64(f.Length) // padding included: it counts against the windows
	data := f.Data()
	c.mu.Lock()
	s := c.streams[f.StreamID]
	if s == nil || s.resp == nil || s.eof {
		opened := c.openedLocked(f.StreamID)
		refund := c.connRefundLocked(n) // nobody reads it
		c.mu.Unlock()
		switch {
		case !opened:
			return http2.ConnectionError(http2.ErrCodeProtocol)
		case s != nil && s.resp == nil:
			c.streamError(s.id, http2.ErrCodeProtocol, fmt.Errorf("h2c: %s sent body bytes before its answer's headers", c.addr))
		case s != nil:
			c.streamError(s.id, http2.ErrCodeStreamClosed, fmt.Errorf("h2c: %s sent body bytes after the end of the stream", c.addr))
		}
		c.refund(0, refund, 0)
		return nil
	}
	if !s.recv.Take(n) {
		c.mu.Unlock()
		c.streamError(s.id, http2.ErrCodeFlowControl, fmt.Errorf("h2c: %s sent more than the stream's window", c.addr))
		return nil
	}
	s.received += int64(len(data))
	if s.declared >= 0 && s.received > s.declared {
		c.mu.Unlock()
		c.streamError(s.id, http2.ErrCodeProtocol, fmt.Errorf("h2c: %s sent more than its declared %d body bytes", c.addr, s.declared))
		return nil
	}
	if len(data) > 0 {
		if s.off == len(s.buf) {
			s.buf, s.off = s.buf[:0], 0
		}
		s.buf = append(s.buf, data...)
	}
	// Padding is nobody's to read: refunded at once.
	pad := n - int64(len(data))
	var freed, rst bool
	if f.StreamEnded() {
		freed, rst = c.endBodyLocked(s)
	}
	s.signal()
	connRefund, streamRefund := c.connRefundLocked(pad), c.streamRefundLocked(s, pad)
	c.mu.Unlock()
	c.afterEnd(s.id, freed, rst)
	c.refund(s.id, connRefund, streamRefund)
	return nil
}

// connRefundLocked returns how much to give back to the connection's
// window now, with n more bytes consumed: nothing until half of it waits.
func (c *conn) connRefundLocked(n int64) int64 {
	return c.ctl.Recv.ConsumedRefund(n, int64(c.t.connWindow()))
}

// streamRefundLocked is connRefundLocked for s's window; a stream that
// ended gets nothing back.
func (c *conn) streamRefundLocked(s *stream, n int64) int64 {
	s.recv.Consumed(n)
	if s.eof || s.gone {
		return 0
	}
	return s.recv.Refund(int64(c.t.streamWindow()))
}

// refund sends the WINDOW_UPDATE frames for what was consumed.
func (c *conn) refund(id uint32, conn, st int64) {
	if conn == 0 && st == 0 {
		return
	}
	_ = c.write(func() error { return c.w.WriteWindowUpdates(id, conn, st) })
}

// body is an answer's body: it reads what the reading goroutine put in
// the stream's buffer.
type body struct {
	s      *stream
	closed bool
}

var errBodyClosed = errors.New("h2c: read on a closed response body")

// bodyEndLocked is what a read past the body's last byte returns: io.EOF
// once the body ended, with the trailers now in the answer, or why the
// stream ended before it.
func (s *stream) bodyEndLocked() error {
	if !s.eof {
		return s.err
	}
	if s.trailer != nil {
		if s.resp.Trailer == nil {
			s.resp.Trailer = make(http.Header, len(s.trailer))
		}
		for k, v := range s.trailer {
			s.resp.Trailer[k] = v
		}
		s.trailer = nil
	}
	return io.EOF
}

func (b *body) Read(p []byte) (int, error) {
	s := b.s
	c := s.c
	for {
		c.mu.Lock()
		switch {
		case b.closed:
			c.mu.Unlock()
			return 0, errBodyClosed
		case s.off < len(s.buf):
			n := copy(p, s.buf[s.off:])
			s.off += n
			connRefund, streamRefund := c.connRefundLocked(int64(n)), c.streamRefundLocked(s, int64(n))
			c.mu.Unlock()
			c.refund(s.id, connRefund, streamRefund)
			return n, nil
		case s.eof || s.err != nil:
			err := s.bodyEndLocked()
			c.mu.Unlock()
			return 0, err
		}
		ready := s.readyLocked()
		c.mu.Unlock()
		select {
		case <-ready:
		case <-s.o.req.Context().Done():
			err := s.o.req.Context().Err()
			c.reset(s, http2.ErrCodeCancel, err)
			return 0, err
		}
	}
}

// Close ends the body; before its end, it resets the stream, so the
// destination stops sending.
func (b *body) Close() error {
	s := b.s
	c := s.c
	c.mu.Lock()
	closed, done := b.closed, s.gone
	b.closed = true
	c.mu.Unlock()
	if closed {
		return nil
	}
	if !done {
		c.reset(s, http2.ErrCodeCancel, errBodyClosed)
	}
	c.mu.Lock()
	refund := c.connRefundLocked(int64(len(s.buf) - s.off))
	s.buf, s.off = nil, 0
	c.mu.Unlock()
	c.refund(0, refund, 0)
	return nil
}
