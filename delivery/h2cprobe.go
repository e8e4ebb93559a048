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

package delivery

import (
	"bytes"
	"context"
	"io"
	"net"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"
)

// h2cPreface is the client connection preface of HTTP/2 (RFC 9113 section
// 3.4) followed by an empty SETTINGS frame.
var h2cPreface = []byte("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00")

// H2CProber learns whether a plain-http destination speaks h2c (HTTP/2 with
// prior knowledge) before any event is sent to it that way: it opens a
// connection, sends the HTTP/2 connection preface and reads the first frame
// of the answer. An HTTP/2 server answers with SETTINGS; an HTTP/1-only one
// answers with an HTTP/1 status line (Go servers hand it a "PRI *" request,
// never an event). Answers are cached per host:port, and calls that ask
// about a destination while it is being probed wait for that probe rather
// than open one each (a tick's burst to a new sink would otherwise open a
// probe connection per event). It is safe for concurrent use.
type H2CProber struct {
	// Dial connects to a destination; use the transports' guarded dialer.
	// Required.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// Timeout bounds one probe. If zero, 5 s.
	Timeout time.Duration
	// TTL is how long an answer is kept. If zero, 10 minutes.
	TTL time.Duration
	// MaxEntries bounds the cache; past it, the oldest answers are
	// forgotten. If zero, 10000.
	MaxEntries int
	// Now is the clock. If nil, time.Now.
	Now func() time.Time

	mu       sync.Mutex
	cache    map[string]probeAnswer
	inflight singleflight.Group
}

type probeAnswer struct {
	h2c     bool
	expires time.Time
}

// Supports reports whether the destination at addr (host:port) speaks h2c.
// A destination that cannot be reached is reported as not speaking it and
// is not cached: the call that follows will find out what is wrong.
func (p *H2CProber) Supports(ctx context.Context, addr string) bool {
	now := p.now()
	if h2c, ok := p.cached(addr, now); ok {
		return h2c
	}
	// The probe is shared: it runs under its own timeout, not under the
	// context of the call that happened to start it, and a caller that
	// leaves stops waiting for it.
	ch := p.inflight.DoChan(addr, func() (any, error) {
		// A probe that ended between this caller's look at the cache and
		// now has left its answer there: no second probe.
		if h2c, ok := p.cached(addr, now); ok {
			return h2c, nil
		}
		h2c, err := p.probe(context.WithoutCancel(ctx), addr)
		if err != nil {
			return false, err
		}
		p.mu.Lock()
		defer p.mu.Unlock()
		if p.cache == nil {
			p.cache = map[string]probeAnswer{}
		}
		if max := orDefault(p.MaxEntries, 10000); len(p.cache) >= max {
			p.evict(now)
		}
		p.cache[addr] = probeAnswer{h2c: h2c, expires: now.Add(orDefault(p.TTL, 10*time.Minute))}
		return h2c, nil
	})
	select {
	case r := <-ch:
		return r.Err == nil && r.Val.(bool)
	case <-ctx.Done():
		return false
	}
}

// cached is the answer for addr still fresh at now, if any.
func (p *H2CProber) cached(addr string, now time.Time) (h2c, ok bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	a, ok := p.cache[addr]
	return a.h2c, ok && now.Before(a.expires)
}

// evict drops expired answers, or every answer when none has expired.
// Called with p.mu held.
func (p *H2CProber) evict(now time.Time) {
	n := len(p.cache)
	for k, a := range p.cache {
		if !now.Before(a.expires) {
			delete(p.cache, k)
		}
	}
	if len(p.cache) == n {
		clear(p.cache)
	}
}

func (p *H2CProber) probe(ctx context.Context, addr string) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, orDefault(p.Timeout, 5*time.Second))
	defer cancel()
	conn, err := p.Dial(ctx, "tcp", addr)
	if err != nil {
		return false, err
	}
	defer conn.Close()
	if d, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(d)
	}
	if _, err := conn.Write(h2cPreface); err != nil {
		return false, err
	}
	var hdr [9]byte
	if _, err := io.ReadFull(conn, hdr[:]); err != nil {
		// Closed without a word: not an HTTP/2 server either.
		return false, nil
	}
	if bytes.HasPrefix(hdr[:], []byte("HTTP/")) {
		return false, nil
	}
	// Frame header: length (3), type (1), flags (1), stream id (4).
	const typeSettings = 0x4
	return hdr[3] == typeSettings && hdr[5]&0x7f == 0 && hdr[6] == 0 && hdr[7] == 0 && hdr[8] == 0, nil
}

func (p *H2CProber) now() time.Time {
	if p.Now != nil {
		return p.Now()
	}
	return time.Now()
}
