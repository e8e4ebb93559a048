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
	"bufio"
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"sync"
	"time"

	"golang.org/x/net/http2"

	"knative.dev/event-forwarding-proxy/internal/h2conn"
)

// Limits of RFC 9113 and of the handshake.
const (
	maxStreamID     = math.MaxInt32
	handshakeBudget = 10 * time.Second
)

var (
	errIdleClosed = errors.New("h2c: connection closed while idle")
	errGoneAway   = errors.New("h2c: the destination is closing the connection")
)

// conn is one h2c connection. Its reading goroutine (readLoop) handles
// every frame that comes in; callers write their own frames under w's lock.
// Lock order: Transport.mu, then w's lock, then mu; mu is never held while
// writing.
type conn struct {
	t    *Transport
	pool *pool
	addr string
	nc   net.Conn

	// Read side, owned by readLoop (c.ctl.Loop checks it under the
	// h2debug tag).
	rfr     *http2.Framer
	headers *h2conn.HeaderReader // decodes rfr's header blocks

	// Write side.
	w *h2conn.Writer
	// The destination's SETTINGS (under mu), the health check, and the
	// dispatch of the frames readLoop reads.
	ctl h2conn.Control

	mu   sync.Mutex
	cond sync.Cond // a send window grew, or a stream or the connection ended
	// err, once set, is why the connection takes no more streams; broken
	// says it is also closed.
	err     error
	broken  bool
	streams map[uint32]*stream
	// reserved counts streams promised to callers not yet opened.
	reserved   int
	nextID     uint32
	sendWindow int64 // what the destination lets us send on the connection
	// GOAWAY from the destination.
	goAway   bool
	lastGood uint32
	idle     *time.Timer
}

func newConn(t *Transport, p *pool, addr string, nc net.Conn) *conn {
	c := &conn{
		t: t, pool: p, addr: addr, nc: nc,
		streams:    make(map[uint32]*stream),
		nextID:     1,
		sendWindow: h2conn.InitialWindow,
		reserved:   1, // the dialer's own call
	}
	c.cond.L = &c.mu
	c.w = h2conn.NewWriter(nc)
	c.rfr = http2.NewFramer(nil, bufio.NewReaderSize(nc, 16<<10))
	// We announce no SETTINGS_MAX_FRAME_SIZE: a destination's frames
	// beyond the default size break the protocol (RFC 9113 4.2), and the
	// Framer would allocate what a header announces, up to 16 MiB.
	c.rfr.SetMaxReadFrameSize(h2conn.InitialFrame)
	c.rfr.SetReuseFrames()
	c.headers = h2conn.NewHeaderReader(c.rfr, uint32(min(t.headerLimit(), math.MaxUint32)), h2conn.ResponsePseudoHeaders)
	// 100 streams until the destination's SETTINGS say (RFC 9113 6.5.2).
	c.ctl.Init(c, int64(t.connWindow()), c.w, c.headers, &c.cond, c.write, c.sendWindows, 100)
	return c
}

func (t *Transport) streamWindow() int32 {
	return int32(min(orDefault(t.MaxReceiveBufferPerStream, 256<<10), h2conn.MaxWindow))
}

func (t *Transport) connWindow() int32 {
	return int32(min(orDefault(t.MaxReceiveBufferPerConnection, 4<<20), h2conn.MaxWindow))
}

func (t *Transport) headerLimit() int64 { return orDefault(t.MaxResponseHeaderBytes, 64<<10) }

// handshake sends the client preface and our SETTINGS, and reads the
// destination's SETTINGS, which must come first (RFC 9113 3.4).
func (c *conn) handshake(ctx context.Context) error {
	deadline := time.Now().Add(handshakeBudget)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	_ = c.nc.SetDeadline(deadline)
	stop := context.AfterFunc(ctx, func() { _ = c.nc.SetDeadline(time.Unix(1, 0)) })
	defer stop()

	if _, err := c.w.BW.WriteString(http2.ClientPreface); err != nil {
		return err
	}
	err := c.w.WriteOpening(c.ctl.Recv.Left(),
		http2.Setting{ID: http2.SettingEnablePush, Val: 0},
		http2.Setting{ID: http2.SettingInitialWindowSize, Val: uint32(c.t.streamWindow())},
		http2.Setting{ID: http2.SettingMaxHeaderListSize, Val: c.headers.Limit()})
	if err != nil {
		return err
	}
	if err := c.w.BW.Flush(); err != nil {
		return ctxError(ctx, err)
	}
	f, err := c.rfr.ReadFrame()
	if err != nil {
		return ctxError(ctx, err)
	}
	sf, ok := f.(*http2.SettingsFrame)
	if !ok || sf.IsAck() {
		return fmt.Errorf("the destination answered with a %v frame, not SETTINGS: it does not speak h2c", f.Header().Type)
	}
	table, err := c.ctl.Peer.Apply(sf, c.sendWindows) // no stream is open yet
	if err != nil {
		return err
	}
	if err := c.w.AckSettings(table); err != nil {
		return err
	}
	if err := c.w.BW.Flush(); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	_ = c.nc.SetDeadline(time.Time{})
	c.ctl.Health.Start(orDefault(c.t.SendPingTimeout, 30*time.Second), orDefault(c.t.PingTimeout, 15*time.Second), c.checkHealth)
	c.idle = time.AfterFunc(time.Hour, c.closeIfIdle)
	c.idle.Stop()
	return nil
}

// ctxError is err, a socket error under a deadline that may be ctx's,
// marked as ctx's when ctx ended or its deadline passed: the socket's
// deadline passes a moment before the context says so.
func ctxError(ctx context.Context, err error) error {
	if cerr := ctx.Err(); cerr != nil {
		return fmt.Errorf("%w: %w", cerr, err)
	}
	if d, ok := ctx.Deadline(); ok && !time.Now().Before(d) {
		return fmt.Errorf("%w: %w", context.DeadlineExceeded, err)
	}
	return err
}

// reserve promises the caller a stream on c, if c has room for one.
func (c *conn) reserve() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil || c.goAway || uint32(len(c.streams)+c.reserved) >= c.ctl.Peer.MaxConcurrentStreams ||
		int64(c.nextID)+2*int64(c.reserved) > maxStreamID {
		return false
	}
	c.reserved++
	if c.idle != nil {
		c.idle.Stop()
	}
	return true
}

// unreserve gives back a reservation that opened no stream.
func (c *conn) unreserveLocked() {
	c.reserved--
	c.idleCheckLocked()
}

// readLoop reads and handles frames until the connection breaks.
func (c *conn) readLoop() {
	c.ctl.Loop.Enter()
	var err error
	for {
		var f http2.Frame
		f, err = c.ctl.ReadFrame()
		if err != nil {
			var se http2.StreamError
			if errors.As(err, &se) {
				c.streamError(se.StreamID, se.Code, fmt.Errorf("h2c: the destination sent a malformed stream: %w", err))
				continue
			}
			if hf, ok := f.(*http2.HeadersFrame); ok {
				err = fmt.Errorf("h2c: the answer's headers on stream %d broke the connection: %w", hf.StreamID, err)
			}
			break
		}
		if err = c.ctl.Handle(f); err != nil {
			break
		}
	}
	c.fail(err)
}

// fail breaks the connection: every call on it ends with err.
func (c *conn) fail(err error) {
	var code http2.ErrCode
	var ce http2.ConnectionError
	switch {
	case errors.As(err, &ce):
		code = http2.ErrCode(ce)
	case h2conn.IsIOError(err):
		code = math.MaxUint32
	default:
		code = http2.ErrCodeProtocol
	}
	if code != math.MaxUint32 && c.w.LockWithin(time.Second) {
		// Say why, once the writer before us is done (it may still be
		// on its way out of the lock); a writer stuck on a full socket
		// is cut by the close below instead.
		_ = c.nc.SetWriteDeadline(time.Now().Add(time.Second))
		_ = c.w.FR.WriteGoAway(0, code, nil)
		_ = c.w.BW.Flush()
		c.w.Unlock()
	}
	c.close(fmt.Errorf("h2c: connection to %s broke: %w", c.addr, err))
}

// close closes the connection and ends every stream on it with err.
func (c *conn) close(err error) {
	c.mu.Lock()
	if c.broken {
		c.mu.Unlock()
		return
	}
	c.broken = true
	if c.err == nil {
		c.err = err
	}
	streams := c.streams
	c.streams = map[uint32]*stream{}
	for _, s := range streams {
		s.endLocked(err)
	}
	c.cond.Broadcast()
	c.ctl.Health.Stop()
	if c.idle != nil {
		c.idle.Stop()
	}
	c.mu.Unlock()
	_ = c.nc.Close()
	c.t.forget(c)
}

// write runs fn, which writes frames, under the write lock, then flushes
// them within WriteTimeout. A failed write breaks the connection.
func (c *conn) write(fn func() error) error {
	c.w.Lock()
	c.armWriteLocked()
	err := fn()
	if err == nil {
		err = c.w.FlushLocked()
	}
	c.w.Unlock()
	if err != nil {
		c.close(fmt.Errorf("h2c: writing to %s: %w", c.addr, err))
	}
	return err
}

// armWriteLocked bounds the writes that follow, before any of them: a
// frame larger than the write buffer goes to the socket at once.
func (c *conn) armWriteLocked() {
	_ = c.nc.SetWriteDeadline(time.Now().Add(orDefault(c.t.WriteTimeout, 30*time.Second)))
}

// unlockWrite lets go of the write lock taken by a writer that wrote
// nothing, once it has sent what the writers before it left buffered.
func (c *conn) unlockWrite() {
	err := c.w.FlushLocked()
	c.w.Unlock()
	if err != nil {
		c.close(fmt.Errorf("h2c: writing to %s: %w", c.addr, err))
	}
}

// idleCheckLocked arms the idle timer when c carries no stream.
func (c *conn) idleCheckLocked() {
	if len(c.streams) == 0 && c.reserved == 0 && c.idle != nil && !c.broken {
		if c.goAway {
			go c.close(errGoneAway)
			return
		}
		c.idle.Reset(orDefault(c.t.IdleConnTimeout, 5*time.Minute))
	}
}

func (c *conn) closeIfIdle() {
	c.mu.Lock()
	idle := len(c.streams) == 0 && c.reserved == 0 && c.err == nil
	if idle {
		c.err = errIdleClosed
	}
	c.mu.Unlock()
	if idle {
		c.close(errIdleClosed)
	}
}

// markIdleClosed stops c taking streams if it has none: true if so.
func (c *conn) markIdleClosed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.streams) != 0 || c.reserved != 0 || c.err != nil {
		return false
	}
	c.err = errIdleClosed
	return true
}
