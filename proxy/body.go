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
	"sync"
	"sync/atomic"
	"time"
)

// Why a request body was cut short.
var (
	errBodyTooLarge = errors.New("request body too large")
	errBodyStalled  = errors.New("request body stalled")
)

// guardedBody is a request body read on the caller's behalf: it fails once
// more than max bytes came, so that a destination never sees a complete
// oversized request, and when no byte comes for idle, so that a caller that
// stops sending cannot hold a slot.
//
// The idle guard is a timer, armed while a Read waits: only when it fires
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
	mu      sync.Mutex // guards ctl, closed, reading and cut
	closed  bool
	reading bool // a Read is under way
	// cut: the idle timer fired during a Read and set a read deadline in
	// the past.
	cut      bool
	timer    *time.Timer // the idle guard; nil until the first Read
	ctl      *http.ResponseController
	max, n   int64
	idle     time.Duration
	tooLarge atomic.Bool
	stalled  atomic.Bool
	// malformed: the body broke off for a reason of its own framing (a bad
	// chunk), not because the caller went away.
	malformed atomic.Bool
}

func newGuardedBody(w http.ResponseWriter, rc io.ReadCloser, max int64, idle time.Duration) *guardedBody {
	return &guardedBody{rc: rc, ctl: http.NewResponseController(w), max: max, idle: idle}
}

func (b *guardedBody) Read(p []byte) (int, error) {
	switch {
	case b.tooLarge.Load():
		return 0, errBodyTooLarge
	case b.stalled.Load():
		return 0, errBodyStalled
	}
	if rem := b.max - b.n + 1; int64(len(p)) > rem {
		p = p[:rem]
	}
	if !b.control(b.arm) {
		return 0, http.ErrBodyReadAfterClose
	}
	n, err := b.rc.Read(p)
	b.mu.Lock()
	b.reading = false
	b.timer.Stop()
	closed, cut := b.closed, b.cut
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
		b.stalled.Store(true)
		return n, errBodyStalled
	case b.n > b.max:
		b.tooLarge.Store(true)
		b.control(b.refuse)
		return 0, errBodyTooLarge
	case err != nil:
		b.malformed.Store(isMalformedBody(err))
	}
	return n, err
}

// arm starts the idle guard of a Read; b.mu is held.
func (b *guardedBody) arm() {
	b.reading = true
	if b.timer == nil {
		b.timer = time.AfterFunc(b.idle, b.expire)
		return
	}
	b.timer.Reset(b.idle)
}

// expire cuts the Read that waited idle for a byte.
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
		b.timer.Stop()
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
