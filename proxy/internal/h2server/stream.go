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

package h2server

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"sync/atomic"
	"time"

	"golang.org/x/net/http2"

	"knative.dev/event-forwarding-proxy/internal/h2conn"
)

// stream is one request. While its handler is detached and the answer
// not yet there, it is all the request holds on the server side, with its
// http.Request. Fields below "guarded by c.mu" are; the response half
// (responseWriter) belongs to whoever writes the answer.
type stream struct {
	c  *conn
	id uint32
	// req is the request until its handler has it and its body is over
	// (dropReq): a held call then keeps no copy of it here, and the
	// forwarder's outbound one is all that is left. The read loop's.
	req  *http.Request
	rctx requestState // req's context (requestContext)

	// wireClosed: END_STREAM or RST_STREAM went out, or the caller reset
	// the stream; nothing more is written on it. Set under the write
	// lock, or by the reading goroutine when the caller's RST_STREAM
	// comes.
	wireClosed atomic.Bool
	// resetCode, if not 0, is the RST_STREAM code (plus one) a fault asked
	// for: the next writer sends it instead of its frame (wireGone).
	resetCode atomic.Uint32
	// headersOut: the answer's final HEADERS went out (guarded by the
	// write lock).
	headersOut bool

	// guarded by c.mu
	// ready is signalled (never blocking) when the body's state changes
	// or the read deadline passes: the reader waiting on it looks again.
	// Made by the first to wait.
	ready chan struct{}
	// err ends the stream: the caller reset it, the connection closed, or
	// it was reset for a fault.
	err error
	// The request body: received and not read yet, buf[off:]; eof: the
	// caller ended its side (buf holds the rest).
	buf       []byte
	off       int
	eof       bool
	bodyShut  bool // the handler closed the body: what comes is dropped
	continued bool // a 100 Continue went out, or none is due
	declared  int64
	received  int64
	// Flow control: what the caller may still send on the stream, what
	// was read and is not refunded yet, what we may still send.
	recv       h2conn.RecvWindow
	sendWindow int64
	// Deadlines (ResponseController): zero means none; their timers
	// signal the waiters once they pass.
	readDeadline, writeDeadline time.Time
	readTimer, writeTimer       *time.Timer
	finished                    bool // finish ran
	released                    bool // no longer counted active (release)
	dispatched                  bool // its handler was started (conn.dispatch); the read loop's

	rw responseState // the answer; owned by its writer
}

func (st *stream) readyLocked() chan struct{} {
	if st.ready == nil {
		st.ready = make(chan struct{}, 1)
	}
	return st.ready
}

func (st *stream) signalLocked() {
	if st.ready != nil {
		select {
		case st.ready <- struct{}{}:
		default:
		}
	}
}

// endLocked ends st with err unless it ended already, and wakes its
// reader and writer.
func (st *stream) endLocked(err error) {
	if st.err == nil {
		st.err = err
	}
	st.signalLocked()
	st.c.cond.Broadcast()
}

// OnHeaders opens a stream, or takes a request's trailers.
func (c *conn) OnHeaders(f *h2conn.HeaderBlock) error {
	id := f.StreamID
	if id%2 == 0 {
		return http2.ConnectionError(http2.ErrCodeProtocol)
	}
	c.mu.Lock()
	if st := c.streams[id]; st != nil && !(st.eof && st.wireClosed.Load()) {
		defer c.mu.Unlock()
		return c.onTrailersLocked(st, f)
	}
	// Not open, or both sides ended it (its record is about to go).
	if id <= c.lastID {
		ours := c.ourResets.has(id)
		c.mu.Unlock()
		switch {
		case len(f.PseudoFields()) > 0:
			// A new request on a used stream id (RFC 9113 5.1.1).
			return http2.ConnectionError(http2.ErrCodeProtocol)
		case ours:
			// Trailers sent before the caller saw our RST_STREAM, which
			// RFC 9113 5.1 tells us to ignore. The block was decoded:
			// the HPACK state stays in step.
			return c.wasted()
		default:
			// Trailers on a stream both sides had ended (RFC 9113 5.1),
			// as x/net's server answers.
			return http2.ConnectionError(http2.ErrCodeStreamClosed)
		}
	}
	c.lastID = id
	switch {
	case f.HasPriority() && f.Priority.StreamDep == id:
		// A stream cannot depend on itself (RFC 9113 5.3.1).
		c.mu.Unlock()
		c.writeReset(id, http2.ErrCodeProtocol)
		return c.wasted()
	case c.goingAway || c.err != nil:
		c.mu.Unlock()
		c.writeReset(id, http2.ErrCodeRefusedStream)
		return nil
	case f.Truncated:
		c.mu.Unlock()
		c.refuseHeaderList(id, f.StreamEnded())
		return c.wasted()
	case c.active >= int(c.s.maxStreams()):
		// The caller went past our SETTINGS, or still runs handlers of
		// streams it reset: refused, it may try again (RFC 9113 8.7).
		c.mu.Unlock()
		c.writeReset(id, http2.ErrCodeRefusedStream)
		return nil
	}
	c.mu.Unlock()

	st := &stream{c: c, id: id}
	req, err := c.newRequest(st, f)
	if err != nil {
		c.writeReset(id, http2.ErrCodeProtocol)
		return c.wasted()
	}
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		st.cancelRequest()
		return nil
	}
	st.req = req
	// At least RFC 9113's initial window: the caller may send that much
	// before it sees our SETTINGS (6.9.3).
	st.recv = h2conn.NewRecvWindow(max(c.s.streamWindow(), h2conn.InitialWindow))
	st.sendWindow = c.ctl.Peer.InitialWindow
	st.eof = f.StreamEnded()
	if c.ctxDone {
		defer st.cancelRequest()
	}
	c.streams[id] = st
	c.active++
	if c.idle != nil {
		c.idle.Stop()
	}
	c.mu.Unlock()
	c.ctl.Loop.Check()
	c.pending = append(c.pending, st) // dispatch starts its handler
	return nil
}

// onTrailersLocked takes the trailers that end a request's body.
func (c *conn) onTrailersLocked(st *stream, f *h2conn.HeaderBlock) error {
	if st.eof {
		c.resetLocked(st, http2.ErrCodeStreamClosed, errors.New("h2server: HEADERS after the request ended"))
		return nil
	}
	if !f.StreamEnded() || len(f.PseudoFields()) > 0 || f.Truncated {
		c.resetLocked(st, http2.ErrCodeProtocol, errors.New("h2server: malformed trailers"))
		return nil
	}
	if st.declared >= 0 && st.received != st.declared {
		c.resetLocked(st, http2.ErrCodeProtocol, errBodyLength)
		return nil
	}
	for _, hf := range f.RegularFields() {
		if st.req.Trailer == nil {
			st.req.Trailer = make(http.Header)
		}
		k := canonicalKey(hf.Name)
		st.req.Trailer[k] = append(st.req.Trailer[k], hf.Value)
	}
	st.eof = true
	st.dropReq()
	st.signalLocked()
	return nil
}

// dropReq forgets the request once its handler has it and no trailer can
// come for it any more; on the read loop.
func (st *stream) dropReq() {
	if st.dispatched && st.eof {
		st.req = nil
	}
}

var errBodyLength = errors.New("h2server: the body's length differs from its content-length")

// OnData takes a DATA frame: its bytes go to the stream's body, or are
// refunded at once when nothing will read them.
func (c *conn) OnData(f *http2.DataFrame) error {
	n := int64(f.Length)
	data := f.Data()
	c.mu.Lock()
	st := c.streams[f.StreamID]
	if st == nil || st.eof || st.err != nil {
		if f.StreamID > c.lastID {
			c.mu.Unlock()
			return http2.ConnectionError(http2.ErrCodeProtocol) // an idle stream
		}
		grow := c.refundLocked(n)
		closed := st == nil || st.wireClosed.Load() // our END_STREAM or reset is out
		// DATA sent before the caller saw our own RST_STREAM is ignored
		// (RFC 9113 5.1); on any other closed stream it is STREAM_CLOSED,
		// as x/net's server answers. The flood rule bounds how often.
		// Bytes within the window the stream had when we reset it are
		// what a caller had on its way, as when a large request is
		// answered before its body is read: not a flood.
		ours := closed && c.ourResets.has(f.StreamID)
		onItsWay := ours && n > 0 && c.ourResets.spend(f.StreamID, n)
		if !closed {
			c.resetLocked(st, http2.ErrCodeStreamClosed, errors.New("h2server: DATA after the request ended"))
		}
		c.mu.Unlock()
		c.sendWindowUpdates(0, grow, 0)
		if closed && !ours {
			c.writeReset(f.StreamID, http2.ErrCodeStreamClosed)
		}
		if onItsWay {
			return nil
		}
		return c.wasted()
	}
	if !st.recv.Take(n) {
		grow := c.refundLocked(n)
		c.resetLocked(st, http2.ErrCodeFlowControl, errors.New("h2server: the caller overflowed the stream's window"))
		c.mu.Unlock()
		c.sendWindowUpdates(0, grow, 0)
		// DATA past the window is a wasted frame whether the stream is
		// still open (a handler that answered has not yet let it go) or
		// already closed: the caller's frames count the same, however
		// late the handler's goroutine runs.
		return c.wasted()
	}
	st.received += int64(len(data))
	if st.declared >= 0 && (st.received > st.declared || f.StreamEnded() && st.received != st.declared) {
		grow := c.refundLocked(n)
		c.resetLocked(st, http2.ErrCodeProtocol, errBodyLength)
		c.mu.Unlock()
		c.sendWindowUpdates(0, grow, 0)
		return nil
	}
	// Padding, and what a closed body drops, is refunded at once.
	drop := n - int64(len(data))
	if st.bodyShut {
		drop = n
	} else if len(data) > 0 {
		if st.off == len(st.buf) {
			st.buf, st.off = st.buf[:0], 0
		}
		st.buf = append(st.buf, data...)
	}
	st.eof = f.StreamEnded()
	st.dropReq()
	var grow, sgrow int64
	if drop > 0 {
		grow = c.refundLocked(drop)
		if !st.eof {
			sgrow = st.refundLocked(drop)
		}
	}
	st.signalLocked()
	c.mu.Unlock()
	c.sendWindowUpdates(f.StreamID, grow, sgrow)
	if n == 0 && !st.eof {
		return c.wasted() // an empty DATA frame that ends nothing
	}
	return nil
}

// refundLocked gives the caller back n bytes of st's window, once enough
// add up; it returns what to send.
func (st *stream) refundLocked(n int64) (grow int64) {
	st.recv.Consumed(n)
	if st.eof || st.err != nil {
		return 0
	}
	return st.recv.Refund(st.c.s.streamWindow())
}

// requestBody is a stream's request body, for its handler.
type requestBody stream

func (b *requestBody) Read(p []byte) (int, error) {
	st := (*stream)(b)
	c := st.c
	c.mu.Lock()
	if !st.continued {
		st.continued = true
		if st.rw.expectContinue {
			c.mu.Unlock()
			_ = (*responseWriter)(st).writeContinue()
			c.mu.Lock()
		}
	}
	for {
		switch {
		case st.bodyShut:
			c.mu.Unlock()
			return 0, http.ErrBodyReadAfterClose
		case st.off < len(st.buf):
			n := copy(p, st.buf[st.off:])
			st.off += n
			if st.off == len(st.buf) {
				st.buf, st.off = nil, 0 // a held call keeps no body buffer
			}
			grow, sgrow := c.refundLocked(int64(n)), st.refundLocked(int64(n))
			c.mu.Unlock()
			c.sendWindowUpdates(st.id, grow, sgrow)
			return n, nil
		case st.eof:
			c.mu.Unlock()
			return 0, io.EOF
		case st.err != nil:
			err := st.err
			c.mu.Unlock()
			return 0, err
		case len(p) == 0:
			c.mu.Unlock()
			return 0, nil
		case passed(st.readDeadline):
			c.mu.Unlock()
			return 0, os.ErrDeadlineExceeded
		}
		ready := st.readyLocked()
		c.mu.Unlock()
		<-ready
		c.mu.Lock()
	}
}

// Close drops the rest of the body: what is buffered and what comes.
func (b *requestBody) Close() error {
	st := (*stream)(b)
	c := st.c
	c.mu.Lock()
	if st.bodyShut {
		c.mu.Unlock()
		return nil
	}
	st.bodyShut = true
	grow := c.refundLocked(int64(len(st.buf) - st.off))
	st.buf, st.off = nil, 0
	st.signalLocked()
	c.mu.Unlock()
	c.sendWindowUpdates(0, grow, 0)
	return nil
}

func passed(t time.Time) bool { return !t.IsZero() && !time.Now().Before(t) }

// setDeadline sets one of st's deadlines (d, with its timer) to t.
func (st *stream) setDeadline(d *time.Time, timer **time.Timer, t time.Time) error {
	c := st.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if st.finished {
		return fmt.Errorf("h2server: deadline set after the request ended: %w", http.ErrNotSupported)
	}
	*d = t
	if *timer != nil {
		(*timer).Stop()
	}
	if t.IsZero() {
		return nil
	}
	wake := func() {
		c.mu.Lock()
		st.signalLocked()
		c.cond.Broadcast()
		c.mu.Unlock()
	}
	if until := time.Until(t); until > 0 {
		if *timer == nil {
			*timer = time.AfterFunc(until, wake)
		} else {
			(*timer).Reset(until)
		}
		return nil
	}
	st.signalLocked()
	c.cond.Broadcast()
	return nil
}

// refuseHeaderList answers a request whose header list went past
// MaxHeaderBytes with a 431 and no handler, as net/http does for HTTP/1.1,
// and stops the body if one is coming.
func (c *conn) refuseHeaderList(id uint32, ended bool) {
	_ = c.write(func() error {
		c.w.Block.Reset()
		c.encode(":status", "431")
		c.encode("content-type", "text/plain; charset=utf-8")
		if err := c.writeBlockLocked(id, true); err != nil {
			return err
		}
		if !ended {
			return c.w.FR.WriteRSTStream(id, http2.ErrCodeNo)
		}
		return nil
	})
}

// wireGone is called under the write lock before a frame of st is
// written: it sends the reset a fault asked for, if any, and reports
// whether nothing more may be written on st. A handler that ends its answer as the stream is
// reset under it thus cannot slip a clean END_STREAM in before the reset.
func (st *stream) wireGone() bool {
	if st.wireClosed.Load() {
		return true
	}
	if code := st.resetCode.Load(); code != 0 {
		st.wireClosed.Store(true)
		_ = st.c.w.FR.WriteRSTStream(st.id, http2.ErrCode(code-1))
		return true
	}
	return false
}

// release stops counting st against MaxConcurrentStreams, once: called
// under the write lock right before the frame that ends the stream goes
// out, so that a caller that opens its next stream on seeing it is not
// refused.
func (c *conn) release(st *stream) {
	c.mu.Lock()
	c.releaseLocked(st)
	c.mu.Unlock()
}

func (c *conn) releaseLocked(st *stream) {
	if !st.released {
		st.released = true
		c.streamDoneLocked()
	}
}
