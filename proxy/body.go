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

package proxy

import (
	"errors"
	"io"
	"net/http"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// Why a request body was cut short.
var (
	errBodyTooLarge = errors.New("request body too large")
	errBodyStalled  = errors.New("request body stalled")
)

// bodyLimits bound a request body read on the caller's behalf.
type bodyLimits struct {
	// max is the most bytes the body may have.
	max int64
	// idle is the longest a read may wait for a byte.
	idle time.Duration
	// minRate is the bytes a second the body must come at on average,
	// over the time the proxy waited for it past a first idle of waiting.
	// If zero, no minimum.
	minRate int64
	// now is the clock. If nil, time.Now.
	now func() time.Time
}

// guardedBody is a request body read on the caller's behalf: it fails once
// more than max bytes came, so that a destination never sees a complete
// oversized request, and when no byte comes for idle, or the body comes
// slower than minRate, so that a caller that stops sending, or trickles,
// cannot hold a slot.
//
// The rate counts only the time a Read waits for the caller, never the
// time between reads: a destination that reads slowly slows its caller
// down (the transport reads the body only as fast as it can send it), and
// that must not count against the caller. After n bytes, the reads may
// have waited idle + n/minRate in all; a Read that starts with that spent
// fails at once, and one that waits may wait only what is left.
//
// The guards are a timer, armed while a Read waits: only when it fires
// does it cut the read, with a read deadline in the past on the caller's
// connection (or HTTP/2 stream). A body that keeps coming never touches
// the connection's deadline: over HTTP/2 that is a round trip through the
// connection's serving goroutine, and the deepest point of a call's stack,
// which would double the goroutine's stack for good (docs/benchmarks.md).
//
// The transport reads it on a goroutine of its own that can outlive the
// handler; once the handler has closed it, it no longer touches the
// caller's connection, which belongs to the next request by then.
type guardedBody struct {
	rc      io.ReadCloser
	mu      sync.Mutex // guards ctl, closed, reading, cut and cutSlow
	closed  bool
	reading bool // a Read is under way
	// cut: the timer fired during a Read and set a read deadline in the
	// past; cutSlow: it was armed for the rate, not for idle.
	cut, cutSlow bool
	timer        *time.Timer // the guards; nil until the first Read, and once closed
	ctl          *http.ResponseController
	lim          bodyLimits
	// n is the bytes read, waited the time the reads waited; the reading
	// goroutine's (a body has one reader at a time).
	n        int64
	waited   time.Duration
	tooLarge atomic.Bool
	stalled  atomic.Bool // idle passed, or the body came too slowly (slow)
	slow     atomic.Bool
	// malformed: the body broke off for a reason of its own framing (a bad
	// chunk), not because the caller went away.
	malformed atomic.Bool
}

func newGuardedBody(w http.ResponseWriter, rc io.ReadCloser, lim bodyLimits) *guardedBody {
	if lim.now == nil {
		lim.now = time.Now
	}
	return &guardedBody{rc: rc, ctl: http.NewResponseController(w), lim: lim}
}

// stallMessage says why a stalled body failed its call.
func (b *guardedBody) stallMessage() string {
	if b.slow.Load() {
		return "the request body came slower than " + strconv.FormatInt(b.lim.minRate, 10) + " bytes a second"
	}
	return "no byte of the request body came for " + b.lim.idle.String()
}

func (b *guardedBody) Read(p []byte) (int, error) {
	switch {
	case b.tooLarge.Load():
		return 0, errBodyTooLarge
	case b.stalled.Load():
		return 0, errBodyStalled
	}
	if rem := b.lim.max - b.n + 1; int64(len(p)) > rem {
		p = p[:rem]
	}
	var start time.Time
	behind := false
	if !b.control(func() { start, behind = b.arm() }) {
		return 0, http.ErrBodyReadAfterClose
	}
	if behind {
		b.stalled.Store(true)
		b.slow.Store(true)
		return 0, errBodyStalled
	}
	n, err := b.rc.Read(p)
	b.waited += b.lim.now().Sub(start)
	b.mu.Lock()
	b.reading = false
	if b.timer != nil { // Close drops it
		b.timer.Stop()
	}
	closed, cut, cutSlow := b.closed, b.cut, b.cutSlow
	b.mu.Unlock()
	if closed {
		// Closed while this read waited: the call is over, and what cut the
		// read says nothing of the caller.
		return n, http.ErrBodyReadAfterClose
	}
	b.n += int64(n)
	switch {
	case cut || errors.Is(err, os.ErrDeadlineExceeded):
		// The deadline is in the past: whatever this read brought, the
		// body stalled, and the connection stays cut.
		b.slow.Store(cutSlow)
		b.stalled.Store(true)
		return n, errBodyStalled
	case b.n > b.lim.max:
		b.tooLarge.Store(true)
		b.control(b.refuse)
		return 0, errBodyTooLarge
	case err != nil:
		b.malformed.Store(isMalformedBody(err))
	}
	return n, err
}

// arm starts the guards of a Read and returns when it starts; behind: the
// reads have spent what the rate allows, and this one must not wait (the
// connection is cut). b.mu is held.
func (b *guardedBody) arm() (start time.Time, behind bool) {
	start = b.lim.now()
	wait, slow := b.lim.idle, false
	if b.lim.minRate > 0 {
		left := b.lim.idle + rateTime(b.n, b.lim.minRate) - b.waited
		if left <= 0 {
			b.abandon()
			return start, true
		}
		if left < wait {
			wait, slow = left, true
		}
	}
	b.reading, b.cutSlow = true, slow
	if b.timer == nil {
		b.timer = time.AfterFunc(wait, b.expire)
		return start, false
	}
	b.timer.Reset(wait)
	return start, false
}

// rateTime is how long n bytes take at rate bytes a second.
func rateTime(n, rate int64) time.Duration {
	secs := min(n/rate, 1<<32) // past a century: no bound in practice
	return time.Duration(secs)*time.Second + time.Duration(n%rate)*time.Second/time.Duration(rate)
}

// expire cuts the Read that waited as long as the guards allow.
func (b *guardedBody) expire() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed || !b.reading {
		return // the read ended as the timer fired
	}
	b.cut = true
	b.abandon()
}

// control runs f on the caller's connection unless the body is closed; it
// reports whether it ran.
func (b *guardedBody) control(f func()) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return false
	}
	f()
	return true
}

// abandon leaves the read deadline in the past: the rest of a stalled body
// is not worth waiting for, and the server then closes the connection after
// the answer instead of draining it.
func (b *guardedBody) abandon() { _ = b.ctl.SetReadDeadline(time.Unix(1, 0)) }

// refusedBodyDrain is how long the server may go on reading an oversized
// body after the 413. net/http's server discards up to 256 KiB of a body
// the handler left; when that read fails at once, it closes the connection
// with the body's rest unread, the kernel answers the rest with a reset,
// and a caller still sending may lose the 413 it was sent. Given a moment,
// the server reads a short rest to its end, or sees the body go on and
// closes its side gently (it half-closes and waits before the reset).
const refusedBodyDrain = 500 * time.Millisecond

// refuse gives the rest of an oversized body refusedBodyDrain to come.
func (b *guardedBody) refuse() { _ = b.ctl.SetReadDeadline(time.Now().Add(refusedBodyDrain)) }

// Close ends the body; the handler calls it before it returns, the
// transport when it is done with the body. Only the first call counts.
// A read still waiting for the caller (the transport's, when the call
// ended before the whole body went out) is woken by a deadline in the
// past: left without one, it would hold the caller's connection, and the
// server's close of the body would wait for it, until the caller sent
// more.
func (b *guardedBody) Close() error {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil
	}
	b.closed = true
	if b.timer != nil {
		// No Read arms it again: a call held after its body went out
		// keeps no timer for it.
		b.timer.Stop()
		b.timer = nil
	}
	switch {
	case b.stalled.Load() || b.reading:
		b.abandon()
	case b.tooLarge.Load():
		b.refuse()
	}
	b.mu.Unlock()
	// Outside the lock: closing waits for a read under way, which takes
	// the lock on its way out.
	return b.rc.Close()
}
