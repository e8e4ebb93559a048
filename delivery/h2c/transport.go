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

// Package h2c is an HTTP/2 client with prior knowledge (h2c) for plain
// http:// destinations, written for calls that are held for minutes.
//
// net/http's HTTP/2 client runs a goroutine per request while it waits for
// its answer, on top of the caller's own: with tens of thousands of held
// calls, their stacks are most of what a held call costs. Here a call runs
// on its caller's goroutine: it writes its HEADERS (and a small body) under
// the connection's write lock, then waits on a channel that the
// connection's one reading goroutine signals. Only a request body that
// streams (unknown length, or longer than 16 KiB) gets a goroutine of its
// own while it is being sent. A held call owns a stream record and a
// channel, nothing else.
//
// Frames are read and written with golang.org/x/net/http2's Framer and
// hpack; flow control, SETTINGS, GOAWAY, PING health checks and stream
// limits are this package's.
package h2c

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/http2"

	"knative.dev/event-forwarding-proxy/internal/callctx"
)

// ErrResponseHeaderTooLarge fails a call whose answer's header list is
// larger than MaxResponseHeaderBytes.
var ErrResponseHeaderTooLarge = errors.New("h2c: the answer's headers are larger than allowed")

// errRetry marks a call that the destination never processed (its stream
// was refused, or went past a GOAWAY's last stream, or its connection was
// unusable before anything of it went out): it may go out again.
var errRetry = errors.New("h2c: the destination did not process the request")

// maxAttempts bounds how often a call that was never processed goes out.
const maxAttempts = 3

// Transport is an http.RoundTripper speaking h2c. Its zero value is usable;
// settings that are zero take the defaults named on them.
type Transport struct {
	// Dial opens connections. If nil, a net.Dialer.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// MaxConnsPerHost bounds the connections to one host:port. A call
	// dials only when every connection carries as many streams as the
	// destination allows (SETTINGS_MAX_CONCURRENT_STREAMS) and no dial is
	// under way; others wait for that dial and share its connection. When
	// the bound is reached, a call waits for a stream, as long as its
	// context lets it. If zero, 64.
	MaxConnsPerHost int
	// MaxResponseHeaderBytes bounds an answer's header list, counted as
	// HTTP/2 does (name, value and 32 bytes per field), and is announced
	// as SETTINGS_MAX_HEADER_LIST_SIZE. If zero, 64 KiB.
	MaxResponseHeaderBytes int64
	// IdleConnTimeout closes a connection that has carried no stream for
	// this long. If zero, 5 minutes.
	IdleConnTimeout time.Duration
	// MaxReceiveBufferPerStream is the flow-control window granted to each
	// stream: how much of an answer's body the destination may send ahead
	// of the caller's reading. If zero, 256 KiB.
	MaxReceiveBufferPerStream int
	// MaxReceiveBufferPerConnection is the window granted to a connection,
	// all its streams together. If zero, 4 MiB.
	MaxReceiveBufferPerConnection int
	// SendPingTimeout: when nothing was read from a connection for this
	// long, a PING checks that the destination is still there. If zero,
	// 30 s.
	SendPingTimeout time.Duration
	// PingTimeout: a PING not acknowledged within this closes the
	// connection, and its calls fail. If zero, 15 s.
	PingTimeout time.Duration
	// WriteTimeout bounds one write of frames to a connection (a
	// destination that stopped reading); past it the connection is closed.
	// If zero, 30 s.
	WriteTimeout time.Duration

	mu    sync.Mutex
	pools map[string]*pool
}

// pool holds the connections to one host:port.
type pool struct {
	conns   []*conn
	dialing int
	// wait, when not nil, is closed when a stream or a connection may
	// have become free. waiters counts the callers looking for room or
	// waiting for it, so that a stream ending takes the transport's lock
	// only when someone may be waiting.
	wait    chan struct{}
	waiters atomic.Int32
}

var _ http.RoundTripper = (*Transport)(nil)

// RoundTrip sends req and returns the destination's answer. The answer's
// body must be read to its end or closed: until then its stream counts
// against the destination's stream limit. req.Body is always closed.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	o, err := newOutgoing(req)
	if err != nil {
		return nil, err
	}
	ctx := req.Context()
	for attempt := 1; ; attempt++ {
		c, err := t.conn(ctx, hostPort(req.URL))
		if err != nil {
			o.done()
			return nil, err
		}
		resp, err := c.roundTrip(ctx, o)
		if err == nil {
			return resp, nil
		}
		if !again(ctx, o, attempt, err) {
			o.done()
			return nil, err
		}
	}
}

// again reports whether a call whose attempt failed with err goes out once
// more: the destination did not process it, and it can be sent again.
func again(ctx context.Context, o *outgoing, attempt int, err error) bool {
	return errors.Is(err, errRetry) && o.replayable() && attempt < maxAttempts && ctx.Err() == nil
}

// Go starts req and returns once its HEADERS (and a body of up to 16 KiB)
// are out, or it failed. done then gets the answer, whose body it must
// read or close, or the error, on a goroutine of its own: while the
// destination holds the call, no goroutine waits for it. Go may block
// for a connection, as RoundTrip does, as long as req's context lets it.
// The request's context ending resets the stream, as with RoundTrip.
func (t *Transport) Go(req *http.Request, done func(*http.Response, error)) {
	o, err := newOutgoing(req)
	if err != nil {
		go done(nil, err)
		return
	}
	o.answered = done
	t.goAttempt(o)
}

// goAttempt starts attempt number o.attempt+1 of a call started with Go.
// What the attempt needs once it is out lives in o and its stream, so that
// a held call keeps no closure of its own.
func (t *Transport) goAttempt(o *outgoing) {
	ctx := o.req.Context()
	c, err := t.conn(ctx, hostPort(o.req.URL))
	if err != nil {
		go t.goFailed(o, err)
		return
	}
	s := newStream(c, o)
	if err := c.start(ctx, s, o); err != nil {
		// The stream may have been ended too: it is not armed, so its
		// answerGo does not run, and this is the one answer.
		go t.goFailed(o, err)
		return
	}
	stop := callctx.AfterFunc(ctx, s.cancelByContext)
	c.mu.Lock()
	s.stopCtx = stop
	s.armed = true
	s.signal() // the answer or the end may be there already
	c.mu.Unlock()
}

// goFailed ends attempt number o.attempt+1 of a Go call with err: the
// call goes out again when it may (again), else its caller gets err.
func (t *Transport) goFailed(o *outgoing, err error) {
	o.attempt++
	if again(o.req.Context(), o, int(o.attempt), err) {
		t.goAttempt(o)
		return
	}
	o.done()
	o.answered(nil, err)
}

// answerGo gives a Go call's caller its answer, or fails the attempt; it
// runs once, on a goroutine of its own (signal).
func (s *stream) answerGo() {
	c := s.c
	c.mu.Lock()
	resp, err, stop := s.resp, s.err, s.stopCtx
	c.mu.Unlock()
	if stop != nil {
		stop()
	}
	if resp != nil {
		s.o.answered(resp, nil)
		return
	}
	c.t.goFailed(s.o, err)
}

// cancelByContext resets a Go call's stream once its context ends.
func (s *stream) cancelByContext() {
	s.c.reset(s, http2.ErrCodeCancel, s.o.req.Context().Err())
}

// conn returns a connection to addr with a stream reserved for the
// caller, dialing one when every connection is full and the bound allows.
func (t *Transport) conn(ctx context.Context, addr string) (*conn, error) {
	for {
		t.mu.Lock()
		if t.pools == nil {
			t.pools = make(map[string]*pool)
		}
		p := t.pools[addr]
		if p == nil {
			p = &pool{}
			t.pools[addr] = p
		}
		// Count as a waiter before looking, so that a stream ending
		// after the look wakes us (see pool.waiters).
		p.waiters.Add(1)
		for _, c := range p.conns {
			if c.reserve() {
				p.waiters.Add(-1)
				t.mu.Unlock()
				return c, nil
			}
		}
		// One dial at a time: a burst of calls waits for it and shares
		// the connection it opens, rather than each dialing its own.
		if p.dialing == 0 && len(p.conns) < orDefault(t.MaxConnsPerHost, 64) {
			p.waiters.Add(-1)
			p.dialing++
			t.mu.Unlock()
			c, err := t.dial(ctx, addr, p)
			t.mu.Lock()
			p.dialing--
			if err == nil {
				p.conns = append(p.conns, c)
			}
			t.wakeLocked(p)
			t.mu.Unlock()
			if err == nil {
				// Only once it is in the pool: a connection that
				// breaks at once must find itself there to leave it.
				go c.readLoop()
			}
			return c, err
		}
		if p.wait == nil {
			p.wait = make(chan struct{})
		}
		wait := p.wait
		t.mu.Unlock()
		select {
		case <-wait:
			p.waiters.Add(-1)
		case <-ctx.Done():
			p.waiters.Add(-1)
			return nil, ctx.Err()
		}
	}
}

// wakeLocked wakes the callers waiting for room in p.
func (t *Transport) wakeLocked(p *pool) {
	if p.wait != nil {
		close(p.wait)
		p.wait = nil
	}
}

// roomFreed is called when a stream or a connection of p may have become
// free: waiting callers look again.
func (t *Transport) roomFreed(p *pool) {
	if p.waiters.Load() == 0 {
		return
	}
	t.mu.Lock()
	t.wakeLocked(p)
	t.mu.Unlock()
}

// forget removes c from its pool: it takes no more streams.
func (t *Transport) forget(c *conn) {
	t.mu.Lock()
	defer t.mu.Unlock()
	p := c.pool
	for i, pc := range p.conns {
		if pc == c {
			p.conns = append(p.conns[:i], p.conns[i+1:]...)
			break
		}
	}
	if len(p.conns) == 0 && p.dialing == 0 && t.pools[c.addr] == p {
		delete(t.pools, c.addr)
	}
	t.wakeLocked(p)
}

func (t *Transport) dial(ctx context.Context, addr string, p *pool) (*conn, error) {
	dial := t.Dial
	if dial == nil {
		dial = (&net.Dialer{}).DialContext
	}
	nc, err := dial(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	c := newConn(t, p, addr, nc)
	if err := c.handshake(ctx); err != nil {
		_ = nc.Close()
		return nil, fmt.Errorf("h2c: starting HTTP/2 with %s: %w", addr, err)
	}
	return c, nil
}

// CloseIdleConnections closes the connections that carry no stream.
func (t *Transport) CloseIdleConnections() {
	t.mu.Lock()
	var idle []*conn
	for _, p := range t.pools {
		for _, c := range p.conns {
			if c.markIdleClosed() {
				idle = append(idle, c)
			}
		}
	}
	t.mu.Unlock()
	for _, c := range idle {
		c.close(errIdleClosed)
	}
}

// Conns reports how many connections are open, to all destinations.
func (t *Transport) Conns() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for _, p := range t.pools {
		n += len(p.conns)
	}
	return n
}

// orDefault returns v, or def when v is not positive.
func orDefault[T int | int64 | time.Duration](v, def T) T {
	if v <= 0 {
		return def
	}
	return v
}
