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

import (
	"context"
	"fmt"
	"net/http"

	"golang.org/x/net/http/httpguts"
	"golang.org/x/net/http2"

	"knative.dev/event-forwarding-proxy/internal/h2conn"
)

// maxInformational bounds the 1xx answers a call skips before its final
// one.
const maxInformational = 16

// stream is one call on a connection. While it waits for its answer it
// holds this record and its ready channel, nothing else. The fields below
// ready are guarded by the connection's mu.
type stream struct {
	c  *conn
	id uint32
	// eof: the destination ended the stream; buf holds the rest.
	eof bool
	// sentEnd: our side of the stream is over (END_STREAM or RST).
	sentEnd bool
	// gone: the stream left the connection's table.
	gone bool
	// armed: Go's start is over, answerGo may run; notified: it has been
	// started. stopCtx unhooks a Go call's context watch.
	armed    bool
	notified bool
	o        *outgoing // the call
	// ready is signalled (never blocking) whenever the state below
	// changes: the caller waiting for the answer, or reading the body,
	// looks again. Made by the first to wait (readyLocked): a call
	// started with Go waits for nothing until its answer is there.
	ready   chan struct{}
	stopCtx func() bool

	resp *http.Response
	// err ends the stream: the destination reset it, the connection
	// broke, or the caller gave up.
	err error
	// The answer's body: received and not yet read, buf[off:].
	buf      []byte
	off      int
	declared int64 // the answer's content-length, or -1
	// trailer holds the answer's trailers until the caller reads to EOF.
	trailer  http.Header
	received int64
	informal int // 1xx answers skipped
	// Flow control: what the destination may still send, what the
	// caller read and is not refunded yet, what we may still send.
	recv       h2conn.RecvWindow
	sendWindow int64
}

// readyLocked returns s.ready, made if need be, for a caller that looked
// at s's state under the connection's lock and is about to wait for it to
// change.
func (s *stream) readyLocked() chan struct{} {
	if s.ready == nil {
		s.ready = make(chan struct{}, 1)
	}
	return s.ready
}

func (s *stream) signal() {
	if s.ready != nil {
		select {
		case s.ready <- struct{}{}:
		default:
		}
	}
	if s.armed && !s.notified && (s.resp != nil || s.err != nil) {
		s.notified = true
		go s.answerGo()
	}
}

// endLocked ends s with err unless it already ended.
func (s *stream) endLocked(err error) {
	s.gone = true
	s.sentEnd = true
	if s.err == nil && !(s.eof && s.resp != nil) {
		s.err = err
	}
	s.signal()
}

// roundTrip opens a stream for o on c, which holds a reservation for it,
// and waits for the answer.
func (c *conn) roundTrip(ctx context.Context, o *outgoing) (*http.Response, error) {
	s := newStream(c, o)
	if err := c.start(ctx, s, o); err != nil {
		return nil, err
	}
	return c.await(ctx, s)
}

// await waits for s's answer. It is apart from roundTrip so that the
// select's state is not in the frame under start, on the way to the call's
// deepest point.
func (c *conn) await(ctx context.Context, s *stream) (*http.Response, error) {
	for {
		c.mu.Lock()
		resp, err := s.resp, s.err
		ready := s.readyLocked()
		c.mu.Unlock()
		switch {
		case resp != nil:
			return resp, nil
		case err != nil:
			return nil, err
		}
		select {
		case <-ready:
		case <-ctx.Done():
			c.reset(s, http2.ErrCodeCancel, ctx.Err())
			return nil, ctx.Err()
		}
	}
}

func newStream(c *conn, o *outgoing) *stream {
	return &stream{c: c, o: o, declared: -1}
}

// start opens s on c, which holds a reservation for it, and leaves a body
// that streams to a writer of its own.
func (c *conn) start(ctx context.Context, s *stream, o *outgoing) error {
	stream, err := c.open(s, o)
	if err != nil {
		return err
	}
	if stream {
		o.streaming = true
		go s.writeBody(ctx, o)
	}
	return nil
}

// open assigns s its id and writes its HEADERS, with a small body when
// the windows let it go at once; stream says the body is left to a
// writer. Ids go out in order: both happen under the write lock.
func (c *conn) open(s *stream, o *outgoing) (stream bool, err error) {
	c.w.Lock()
	c.mu.Lock()
	if err := c.refusalLocked(o); err != nil {
		return false, err
	}
	s.id = c.nextID
	c.nextID += 2
	c.reserved--
	c.streams[s.id] = s
	s.sendWindow = c.ctl.Peer.InitialWindow
	s.recv = h2conn.NewRecvWindow(int64(c.t.streamWindow()))
	n := int64(len(o.data))
	inline := o.data != nil && n <= s.sendWindow && n <= c.sendWindow
	if inline {
		s.sendWindow -= n
		c.sendWindow -= n
	}
	s.sentEnd = inline || !o.hasBody()
	sentEnd := s.sentEnd
	maxFrame := int(c.ctl.Peer.MaxFrame.Load())
	c.mu.Unlock()

	c.armWriteLocked()
	// Encoded here rather than through writeHeaderBlock: the hpack
	// encoder's table is the call's deepest point, and one frame less on
	// the way keeps a held call's stack at 4 KiB (docs/benchmarks.md).
	c.w.Block.Reset()
	o.encodeHeaders(c.field)
	err = c.w.WriteHeaderBlock(s.id, sentEnd && !inline, maxFrame)
	for rest := o.data; inline && err == nil; {
		chunk := rest[:min(len(rest), maxFrame)]
		rest = rest[len(chunk):]
		err = c.w.FR.WriteData(s.id, len(rest) == 0, chunk)
		if len(rest) == 0 {
			break
		}
	}
	if err == nil {
		err = c.w.FlushLocked()
	}
	c.w.Unlock()
	if err != nil {
		return false, c.writeFailed(err)
	}
	return !sentEnd, nil
}

// refusalLocked says why c cannot open a stream for o, if it cannot; it
// then gives up o's reservation and both locks. The error paths of open
// live here to keep open's frame small: it is on the way to the call's
// deepest point.
func (c *conn) refusalLocked(o *outgoing) error {
	if c.err != nil {
		err := c.err
		c.unreserveLocked()
		c.mu.Unlock()
		c.unlockWrite()
		return fmt.Errorf("%w: %w", errRetry, err)
	}
	if o.headerSize > int64(c.ctl.Peer.MaxHeaderList) {
		c.unreserveLocked()
		c.mu.Unlock()
		c.unlockWrite()
		c.t.roomFreed(c.pool)
		return fmt.Errorf("h2c: the request's %d header bytes are more than %s accepts (%d)", o.headerSize, c.addr, c.ctl.Peer.MaxHeaderList)
	}
	return nil
}

// writeFailed closes c after a failed write of a stream's opening. The
// destination got at most part of the HEADERS, which it cannot have acted
// on: the call may go out again.
func (c *conn) writeFailed(err error) error {
	err = fmt.Errorf("%w: writing to %s: %w", errRetry, c.addr, err)
	c.close(err)
	return err
}

// writeHeaderBlock encodes a header block with encode (names lower-cased
// here, as HTTP/2 requires) and writes it as HEADERS and CONTINUATION
// frames of at most maxFrame bytes. The caller holds the write lock.
func (c *conn) writeHeaderBlock(id uint32, endStream bool, maxFrame int, encode func(emit func(name, value string))) error {
	c.w.Block.Reset()
	encode(c.field)
	return c.w.WriteHeaderBlock(id, endStream, maxFrame)
}

// field encodes one header field into the block being built; the caller
// holds the write lock.
func (c *conn) field(name, value string) {
	_ = c.w.Enc.WriteField(hpackField(lowerName(name), value))
}

// reset ends s from our side with code and err, and tells the destination.
func (c *conn) reset(s *stream, code http2.ErrCode, err error) {
	c.mu.Lock()
	if s.gone {
		c.mu.Unlock()
		return
	}
	c.dropLocked(s, err)
	c.mu.Unlock()
	c.t.roomFreed(c.pool)
	_ = c.write(func() error { return c.w.FR.WriteRSTStream(s.id, code) })
}

// dropLocked takes s out of the table, ends it with err, and refunds to
// the connection what the destination sent that nobody will read.
func (c *conn) dropLocked(s *stream, err error) {
	delete(c.streams, s.id)
	s.endLocked(err)
	c.ctl.Recv.Consumed(int64(len(s.buf) - s.off))
	s.buf, s.off = nil, 0
	c.cond.Broadcast()
	c.idleCheckLocked()
}

// finishLocked takes s out of the table once both sides ended it.
func (c *conn) finishLocked(s *stream) (freed bool) {
	if s.gone || !s.sentEnd || !s.eof {
		return false
	}
	s.gone = true
	delete(c.streams, s.id)
	c.idleCheckLocked()
	return true
}

// streamError ends stream id with err and resets it with code.
func (c *conn) streamError(id uint32, code http2.ErrCode, err error) {
	c.mu.Lock()
	s := c.streams[id]
	c.mu.Unlock()
	if s != nil {
		c.reset(s, code, err)
		return
	}
	_ = c.write(func() error { return c.w.FR.WriteRSTStream(id, code) })
}

// opened reports whether id is a stream we opened (it may have ended).
func (c *conn) openedLocked(id uint32) bool { return id%2 == 1 && id < c.nextID }

// OnReset takes the destination's RST_STREAM: one on a stream never
// opened breaks the connection, as on the inbound server.
func (c *conn) OnReset(f *http2.RSTStreamFrame) error {
	c.mu.Lock()
	s := c.streams[f.StreamID]
	if s == nil {
		idle := !c.openedLocked(f.StreamID)
		c.mu.Unlock()
		if idle {
			return http2.ConnectionError(http2.ErrCodeProtocol) // RFC 9113 6.4
		}
		return nil // a stream already closed
	}
	err := fmt.Errorf("h2c: %s reset the stream: %v", c.addr, f.ErrCode)
	if f.ErrCode == http2.ErrCodeRefusedStream && s.resp == nil {
		// Refused streams were not processed (RFC 9113 8.7).
		err = fmt.Errorf("%w: %w", errRetry, err)
	}
	c.dropLocked(s, err)
	c.mu.Unlock()
	c.t.roomFreed(c.pool)
	return nil
}

// validFields reports the first invalid header of h, as a message.
func validFields(h http.Header) error {
	for k, vv := range h {
		if !httpguts.ValidHeaderFieldName(k) {
			return fmt.Errorf("h2c: invalid header field name %q", k)
		}
		for _, v := range vv {
			if !httpguts.ValidHeaderFieldValue(v) {
				return fmt.Errorf("h2c: invalid header field value for %q", k)
			}
		}
	}
	return nil
}
