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
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"sync"
	"time"

	"golang.org/x/net/http2"

	"knative.dev/event-forwarding-proxy/internal/h2conn"
)

var (
	errShutdown     = errors.New("h2server: the server is shutting down")
	errIdle         = errors.New("h2server: connection idle")
	errPingTimeout  = errors.New("h2server: the caller did not answer a PING")
	errGoneAway     = errors.New("h2server: connection closed after its last stream")
	errStreamClosed = errors.New("h2server: stream closed")
)

// conn is one caller's connection. Its reading goroutine (serve, the one
// net/http gave it) handles every frame that comes in; handlers write
// their own frames under w's lock. Lock order: w, then mu; mu is never held
// while writing.
type conn struct {
	s      *Server
	nc     net.Conn
	h      http.Handler
	logger *log.Logger
	ctx    context.Context // every request's context derives from it
	cancel context.CancelFunc
	remote string

	// The read loop's (serve's goroutine; c.ctl.Loop checks it under
	// the h2debug tag): the framer, the header block reader and what
	// they read from, the streams opened and not yet handed to a handler
	// (dispatch), and what the caller made the server do for nothing.
	rfr     *http2.Framer
	headers *h2conn.HeaderReader // decodes rfr's header blocks
	br      *bufio.Reader
	pending []*stream
	abuse   abuse

	// Write side, under w's lock. writeShut: our side is closed
	// (closeGently); writes are dropped.
	w         *h2conn.Writer
	writeShut bool

	// The caller's SETTINGS (under mu), the health check, and the
	// dispatch of the frames serve reads.
	ctl h2conn.Control

	mu   sync.Mutex
	cond sync.Cond // a send window grew, a stream or the connection ended, a write deadline passed
	err  error     // set once the connection is closed
	// streams holds the streams the caller may still send on or we may
	// still write on; active counts the streams whose handler is not done
	// (MaxConcurrentStreams counts those).
	streams    map[uint32]*stream
	ourResets  resetRing // the streams we reset last
	active     int
	lastID     uint32 // the highest stream the caller opened
	goingAway  bool
	ctxDone    bool        // c.ctx ended: new requests are cancelled at once
	sendWindow int64       // what we may still send on the connection
	idle       *time.Timer // closeIfIdle, when IdleTimeout is set
}

func newConn(s *Server, ctx context.Context, nc net.Conn, h http.Handler, logger *log.Logger) *conn {
	c := &conn{
		s: s, nc: nc, h: h, logger: logger,
		remote:     nc.RemoteAddr().String(),
		streams:    make(map[uint32]*stream),
		sendWindow: h2conn.InitialWindow,
	}
	c.ctx, c.cancel = context.WithCancel(ctx)
	// The base context ending (the proxy's drain deadline) ends every
	// request: the streams' contexts are not its children (requestContext).
	context.AfterFunc(c.ctx, c.cancelRequests)
	c.cond.L = &c.mu
	c.w = h2conn.NewWriter(nc)
	c.br = bufio.NewReaderSize(nc, 16<<10)
	c.rfr = http2.NewFramer(nil, c.br)
	c.rfr.SetReuseFrames()
	c.headers = h2conn.NewHeaderReader(c.rfr, s.headerListLimit(), h2conn.RequestPseudoHeaders)
	// A server opens no streams: the caller's own limit is not for it.
	c.ctl.Init(c, s.connWindow(), c.w, c.headers, &c.cond, c.write, c.sendWindows, 0)
	// We announce no SETTINGS_MAX_FRAME_SIZE, so the caller may send
	// frames of the default size alone (RFC 9113 4.2). The Framer's own
	// bound is 16 MiB, and it allocates what a frame header announces
	// before reading it: x/net's server bounds it the same way.
	c.rfr.SetMaxReadFrameSize(h2conn.InitialFrame)
	return c
}

// serve sends our SETTINGS, then reads and handles frames until the
// connection breaks or closes.
func (c *conn) serve() {
	err := c.write(func() error {
		return c.w.WriteOpening(c.ctl.Recv.Left(),
			http2.Setting{ID: http2.SettingMaxConcurrentStreams, Val: c.s.maxStreams()},
			http2.Setting{ID: http2.SettingInitialWindowSize, Val: uint32(c.s.streamWindow())},
			http2.Setting{ID: http2.SettingMaxHeaderListSize, Val: c.s.headerListLimit()})
	})
	if err != nil {
		return
	}
	c.ctl.Health.Start(orDefault(c.s.SendPingTimeout, 30*time.Second), orDefault(c.s.PingTimeout, 15*time.Second), c.checkHealth)
	c.mu.Lock()
	if d := c.s.IdleTimeout; d > 0 {
		c.idle = time.AfterFunc(d, c.closeIfIdle)
	}
	c.mu.Unlock()
	c.closeWith(c.linger(c.readLoop()))
}

// readLoop reads and handles frames until one breaks the connection.
func (c *conn) readLoop() error {
	c.ctl.Loop.Enter()
	// The client preface ends with a SETTINGS frame (RFC 9113 3.4).
	_ = c.nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	first := true
	for {
		f, err := c.ctl.ReadFrame()
		if err != nil {
			var se http2.StreamError
			if errors.As(err, &se) {
				c.onStreamError(se)
				if err := c.wasted(); err != nil {
					return err
				}
				continue
			}
			if errors.Is(err, http2.ErrFrameTooLarge) {
				return http2.ConnectionError(http2.ErrCodeFrameSize)
			}
			return err
		}
		if first {
			if sf, ok := f.(*http2.SettingsFrame); !ok || sf.IsAck() {
				return http2.ConnectionError(http2.ErrCodeProtocol)
			}
			_ = c.nc.SetReadDeadline(time.Time{})
			first = false
		}
		// errStreamClosed: a write was dropped (a reset stream, or our
		// side closed); the connection goes on.
		if err := c.ctl.Handle(f); err != nil && !errors.Is(err, errStreamClosed) {
			return err
		}
		if len(c.pending) > 0 && !nextFrameHere(c.br) {
			c.dispatch()
		}
	}
}

// closeWith closes the connection for err: a GOAWAY says why when the
// caller broke the protocol, then every stream ends and every handler
// waiting on one wakes.
func (c *conn) closeWith(err error) {
	var ce http2.ConnectionError
	if errors.As(err, &ce) {
		// Say why (RFC 9113 5.4.1). The deadline cuts a writer stuck on
		// a full socket that holds the write lock; it moves on while the
		// caller still takes what is queued ahead of the GOAWAY.
		stop := c.whileTaken(c.nc.SetWriteDeadline)
		c.w.Lock()
		if !c.writeShut {
			c.mu.Lock()
			last := c.lastID
			c.mu.Unlock()
			// A writer may have set its own, longer deadline meanwhile.
			_ = c.nc.SetWriteDeadline(time.Now().Add(takePause))
			_ = c.w.FR.WriteGoAway(last, http2.ErrCode(ce), nil)
			_ = c.w.BW.Flush()
		}
		c.w.Unlock()
		stop()
	}
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		return
	}
	if err == nil {
		err = io.EOF
	}
	c.err = err
	streams := c.streams
	c.streams = map[uint32]*stream{}
	for _, st := range streams {
		st.endLocked(errConnClosed(err))
	}
	c.cond.Broadcast()
	c.ctl.Health.Stop()
	if c.idle != nil {
		c.idle.Stop()
	}
	c.mu.Unlock()
	c.cancel()
	for _, st := range streams {
		st.cancelRequest()
	}
	_ = c.nc.Close()
	if !h2conn.IsIOError(err) && !errors.Is(err, errIdle) && !errors.Is(err, errGoneAway) && !errors.Is(err, errShutdown) {
		c.logger.Printf("h2server: connection from %s closed: %v", c.remote, err)
	}
}

func errConnClosed(err error) error {
	return fmt.Errorf("h2server: connection closed: %w", err)
}

// write runs fn, which writes frames, under the write lock, then flushes
// them within WriteTimeout. A failed write closes the connection; fn
// returning errStreamClosed (its stream was reset meanwhile) does not.
func (c *conn) write(fn func() error) error {
	c.w.Lock()
	if c.writeShut {
		c.w.Unlock()
		return errStreamClosed // closeGently: nothing more goes out
	}
	_ = c.nc.SetWriteDeadline(time.Now().Add(orDefault(c.s.WriteTimeout, 30*time.Second)))
	err := fn()
	if err == nil || errors.Is(err, errStreamClosed) {
		if ferr := c.w.FlushLocked(); ferr != nil {
			err = ferr
		}
	}
	c.w.Unlock()
	if err != nil && !errors.Is(err, errStreamClosed) {
		c.closeWith(fmt.Errorf("writing: %w", err))
	}
	return err
}

// OnOther takes the frames h2conn's Control leaves to the end but for
// streams: a PRIORITY whose stream depends on itself resets that stream
// (RFC 9113 5.3.1); GOAWAY, the other PRIORITY frames and frames of
// unknown types ask nothing of a server.
func (c *conn) OnOther(f http2.Frame) error {
	if p, ok := f.(*http2.PriorityFrame); ok && p.StreamDep == p.StreamID {
		c.onStreamError(http2.StreamError{StreamID: p.StreamID, Code: http2.ErrCodeProtocol})
		return c.wasted()
	}
	return nil
}

// OnReset takes the caller's RST_STREAM.
func (c *conn) OnReset(f *http2.RSTStreamFrame) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	st := c.streams[f.StreamID]
	if st == nil {
		if f.StreamID > c.lastID {
			return http2.ConnectionError(http2.ErrCodeProtocol)
		}
		return c.wasted()
	}
	st.wireClosed.Store(true) // nothing more may be written on it
	st.endLocked(fmt.Errorf("h2server: the caller reset the stream (%v)", f.ErrCode))
	delete(c.streams, st.id)
	if !st.dispatched {
		c.releaseLocked(st) // no handler will run: it stops counting now
	}
	go st.cancelRequest() // the caller is gone: so is the request
	return c.callerReset()
}

// onStreamError resets the stream a malformed frame was on. A malformed
// HEADERS still opened its stream, which is closed now.
func (c *conn) onStreamError(se http2.StreamError) {
	c.mu.Lock()
	if se.StreamID > c.lastID {
		c.lastID = se.StreamID
	}
	st := c.streams[se.StreamID]
	if st != nil {
		c.resetLocked(st, se.Code, fmt.Errorf("h2server: malformed frame: %w", se))
		c.mu.Unlock()
		return
	}
	c.mu.Unlock()
	c.writeReset(se.StreamID, se.Code)
}

// resetLocked ends st and sends RST_STREAM with code, on a goroutine of its
// own since mu is held. The stream's handler, if still running, finds its
// reads and writes failing.
func (c *conn) resetLocked(st *stream, code http2.ErrCode, err error) {
	c.ourResets.add(st.id, st.recv.Left())
	st.endLocked(err)
	delete(c.streams, st.id)
	st.resetCode.CompareAndSwap(0, uint32(code)+1)
	go func() {
		st.cancelRequest()
		_ = c.write(func() error {
			st.wireGone()
			return nil
		})
	}()
}

// writeReset sends RST_STREAM for a stream that has no record: its
// caller may have sent up to a new stream's window before it sees it.
func (c *conn) writeReset(id uint32, code http2.ErrCode) {
	c.mu.Lock()
	c.ourResets.add(id, max(c.s.streamWindow(), h2conn.InitialWindow))
	c.mu.Unlock()
	c.sendReset(id, code)
}

// sendReset writes RST_STREAM for a stream already in ourResets.
func (c *conn) sendReset(id uint32, code http2.ErrCode) {
	_ = c.write(func() error { return c.w.FR.WriteRSTStream(id, code) })
}
