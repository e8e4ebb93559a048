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

// Package http1 is an HTTP/1.1 client for plain http:// destinations, made
// for a proxy that holds many calls at once and forwards many small ones.
//
// net/http's Transport runs two goroutines per connection (one writes, one
// reads) and hands every request and answer across channels, and each
// connection keeps a 4 KiB read buffer and a 4 KiB write buffer for its
// whole life. This Transport runs a call on the caller's goroutine: the
// request head (and a small body) goes out in one write, and the wait for
// the answer holds no buffer at all. The read buffer is taken from a pool
// only once the destination's first bytes are there, and given back when
// the answer's body ends. Only a large or streaming request body gets a
// goroutine, which writes it while the caller waits for the answer.
//
// What it does not do: TLS (https destinations keep net/http's transport),
// proxies, compression, redirects, protocol upgrades (a 101 answer is
// returned with no body and the connection is closed), and replaying a
// request the destination may have received: a call fails rather than
// risks reaching its destination twice, unless nothing of it was written.
package http1

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"runtime"
	"sync"
	"syscall"
	"time"

	"knative.dev/event-forwarding-proxy/internal/aside"
)

// Transport is an HTTP/1.1 http.RoundTripper for plain http://
// destinations. Its zero value needs only Dial. It is safe for concurrent
// use; it keeps idle connections per host:port and keeps no goroutine of
// its own (a dial runs on a short-lived one, dialAside).
type Transport struct {
	// Dial opens connections ("tcp", "host:port"). Required.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// MaxIdleConnsPerHost bounds the idle connections kept per host:port.
	// If zero, 1024.
	MaxIdleConnsPerHost int
	// IdleConnTimeout closes a connection idle this long. If zero, 5
	// minutes.
	IdleConnTimeout time.Duration
	// MaxResponseHeaderBytes bounds an answer's head (status line and
	// headers). If zero, 64 KiB.
	MaxResponseHeaderBytes int64
	// ReadAheadMax: a request body of declared length up to this many
	// bytes is read whole before the call and written with the head in one
	// write. If zero, 16 KiB.
	ReadAheadMax int64

	mu   sync.Mutex
	idle map[string][]*conn // per host:port, most recently used last
	n    int                // idle connections, all hosts
}

// ErrResponseHeaderTooLarge fails a call whose answer's head is larger
// than MaxResponseHeaderBytes.
var ErrResponseHeaderTooLarge = errors.New("http1: the answer's head is larger than allowed")

var _ http.RoundTripper = (*Transport)(nil)

// RoundTrip sends req and returns the destination's answer. The answer's
// body must be read to its end (or closed) for the connection to serve
// another call. Cancelling the request's context cuts the call, and the
// reading of the answer's body, at once.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL == nil {
		closeBody(req)
		return nil, errors.New("http1: nil request URL")
	}
	if req.URL.Scheme != "http" {
		closeBody(req)
		return nil, fmt.Errorf("http1: unsupported scheme %q", req.URL.Scheme)
	}
	if req.URL.Host == "" {
		closeBody(req)
		return nil, errors.New("http1: no host in request URL")
	}
	ctx := req.Context()
	if err := ctx.Err(); err != nil {
		closeBody(req)
		return nil, err
	}
	addr := hostPort(req.URL)
	o, err := encode(req, req.URL.Host, orDefault(t.ReadAheadMax, 16<<10))
	if err != nil {
		return nil, err
	}
	defer o.done()
	for {
		c, err := t.conn(ctx, addr)
		if err != nil {
			return nil, err
		}
		resp, err := c.roundTrip(ctx, req, o)
		if errors.Is(err, errNothingWritten) && o.replayable() && c.reused {
			continue // a connection the destination had closed: try another
		}
		return resp, err
	}
}

// conn returns an idle connection to addr that still looks open, or a new one.
func (t *Transport) conn(ctx context.Context, addr string) (*conn, error) {
	for {
		c := t.takeIdle(addr)
		if c == nil {
			break
		}
		if c.alive() {
			c.reused = true
			return c, nil
		}
		_ = c.nc.Close()
	}
	nc, err := t.dialAside(ctx, addr)
	if err != nil {
		if cerr := cut(ctx); cerr != nil {
			// The call's deadline or its caller, not the destination.
			//nolint:errorlint // only the cut is wrapped: the call is classified by it, not by the dial error
			return nil, fmt.Errorf("http1: the call was cut while dialing %s (%v): %w", addr, err, cerr)
		}
		return nil, err
	}
	return newConn(t, addr, nc), nil
}

// dialAside dials addr on a goroutine of its own (aside.Do): the dialer
// and the resolver under it, even for an address literal, are about 1.6 KB
// of frames deep, enough to double the stack of every call that dials. The
// dial honours ctx, so the wait ends with it.
func (t *Transport) dialAside(ctx context.Context, addr string) (net.Conn, error) {
	return aside.Do(func() (net.Conn, error) { return t.Dial(ctx, "tcp", addr) })
}

func (t *Transport) takeIdle(addr string) *conn {
	t.mu.Lock()
	defer t.mu.Unlock()
	list := t.idle[addr]
	if len(list) == 0 {
		return nil
	}
	c := list[len(list)-1]
	list[len(list)-1] = nil
	t.idle[addr] = list[:len(list)-1]
	t.n--
	c.idle = false
	c.idleTimer.Stop()
	return c
}

// putIdle keeps c for another call, or closes it when the pool of its
// host is full.
func (t *Transport) putIdle(c *conn) {
	timeout := orDefault(t.IdleConnTimeout, 5*time.Minute)
	t.mu.Lock()
	list := t.idle[c.key]
	if len(list) >= orDefault(t.MaxIdleConnsPerHost, 1024) {
		t.mu.Unlock()
		_ = c.nc.Close()
		return
	}
	if t.idle == nil {
		t.idle = make(map[string][]*conn)
	}
	t.idle[c.key] = append(list, c)
	t.n++
	c.idle = true
	if c.idleTimer == nil {
		c.idleTimer = time.AfterFunc(timeout, c.expire)
	} else {
		c.idleTimer.Reset(timeout)
	}
	t.mu.Unlock()
}

// removeIdle takes c out of the idle pool if it is still there.
func (t *Transport) removeIdle(c *conn) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !c.idle {
		return false
	}
	list := t.idle[c.key]
	for i, x := range list {
		if x == c {
			t.idle[c.key] = append(list[:i], list[i+1:]...)
			list[len(list)-1] = nil
			break
		}
	}
	if len(t.idle[c.key]) == 0 {
		delete(t.idle, c.key)
	}
	t.n--
	c.idle = false
	return true
}

// CloseIdleConnections closes the connections that wait for a call.
func (t *Transport) CloseIdleConnections() {
	t.mu.Lock()
	idle := t.idle
	t.idle = nil
	t.n = 0
	for _, list := range idle {
		for _, c := range list {
			c.idle = false
			c.idleTimer.Stop()
		}
	}
	t.mu.Unlock()
	for _, list := range idle {
		for _, c := range list {
			_ = c.nc.Close()
		}
	}
}

// IdleConns returns how many idle connections the pool holds.
func (t *Transport) IdleConns() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.n
}

func hostPort(u *url.URL) string {
	port := u.Port()
	if port == "" {
		port = "80"
	}
	return net.JoinHostPort(u.Hostname(), port)
}

func closeBody(req *http.Request) {
	if req.Body != nil {
		_ = req.Body.Close()
	}
}

// orDefault returns v, or def when v is not positive: how the Transport's
// zero fields take their defaults.
func orDefault[T int | int64 | time.Duration](v, def T) T {
	if v <= 0 {
		return def
	}
	return v
}

// rawConn returns nc's file descriptor access, nil when nc has none (a
// wrapped connection) or the platform's non-blocking reads are not used
// here: calls then wait in an ordinary read. With unwrap, it looks through
// wrappers that name the connection under them (NetConn, as crypto/tls
// does): good enough to peek at, never to read from, since a wrapper may
// change the bytes.
func rawConn(nc net.Conn, unwrap bool) syscall.RawConn {
	if runtime.GOOS != "linux" {
		return nil
	}
	for {
		if sc, ok := nc.(syscall.Conn); ok {
			raw, err := sc.SyscallConn()
			if err != nil {
				return nil
			}
			return raw
		}
		u, ok := nc.(interface{ NetConn() net.Conn })
		if !unwrap || !ok {
			return nil
		}
		nc = u.NetConn()
	}
}
