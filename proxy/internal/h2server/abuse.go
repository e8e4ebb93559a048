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
	"encoding/binary"
	"sync/atomic"

	"golang.org/x/net/http2"
)

// abuse is what a connection's caller made the server do for nothing:
// streams it reset before their answer, and frames that cost work and
// carry no request (refused or malformed header blocks, empty DATA frames
// that do not end a stream, frames on streams already closed). x/net's
// server bounds each of these floods in its own way; here one rule does:
// once either count passes the stream limit and the requests the
// connection completed, the caller is told ENHANCE_YOUR_CALM and the
// connection closes (the rapid-reset attack, CVE-2023-44487, and the
// empty-frame floods of CVE-2019-9518 and CVE-2019-9516). A caller that
// cancels every stream it has open once, or whose calls mostly complete,
// is never cut. The counts are the read loop's; completed is written by
// handlers.
type abuse struct {
	resets    int64
	useless   int64
	completed atomic.Int64
}

// tooMuch reports whether n such events are past what the connection may
// cost: more than its stream limit, and more than it completed.
func (a *abuse) tooMuch(n int64, maxStreams uint32) bool {
	return n > int64(maxStreams) && n > a.completed.Load()
}

// callerReset counts a stream the caller reset before its answer ended.
func (c *conn) callerReset() error {
	c.ctl.Loop.Check()
	c.abuse.resets++
	if c.abuse.tooMuch(c.abuse.resets, c.s.maxStreams()) {
		return http2.ConnectionError(http2.ErrCodeEnhanceYourCalm)
	}
	return nil
}

// wasted counts a frame that carried no request.
func (c *conn) wasted() error {
	c.ctl.Loop.Check()
	c.abuse.useless++
	if c.abuse.tooMuch(c.abuse.useless, c.s.maxStreams()) {
		return http2.ConnectionError(http2.ErrCodeEnhanceYourCalm)
	}
	return nil
}

// nextFrameHere reports whether br already holds the whole next frame, so
// that reading it will not wait on the socket.
func nextFrameHere(br *bufio.Reader) bool {
	n := br.Buffered()
	if n < frameHeaderLen {
		return false
	}
	h, _ := br.Peek(frameHeaderLen)
	length := int(binary.BigEndian.Uint32(append([]byte{0}, h[:3]...)))
	return n >= frameHeaderLen+length
}

const frameHeaderLen = 9

// dispatch starts the handlers of the streams opened since it last ran,
// once the read loop is about to wait for the socket: a stream that the
// caller reset in the same burst (the rapid reset) never reaches a
// handler, and so never reaches a destination. It is released instead.
func (c *conn) dispatch() {
	c.ctl.Loop.Check()
	for i, st := range c.pending {
		c.pending[i] = nil
		c.mu.Lock()
		live := c.streams[st.id] == st && st.err == nil
		req := st.req
		if !live {
			c.releaseLocked(st)
		} else {
			st.dispatched = true
			st.dropReq()
		}
		c.mu.Unlock()
		if live {
			go c.runHandler(st, req)
		}
	}
	c.pending = c.pending[:0]
}

// resetRing remembers the last streams the server reset, for the frames
// a caller may still send on them before it sees the reset, which RFC
// 9113 5.1 says to ignore; frames on other closed streams are an error.
// Each keeps what the caller may still send on it: the stream's window
// when it was reset, which bounds what was already on its way. Guarded
// by conn.mu.
type resetRing struct {
	ids  [256]uint32
	left [256]int64
	next int
}

// add remembers id, on which the caller may still send window bytes.
func (r *resetRing) add(id uint32, window int64) {
	r.ids[r.next], r.left[r.next] = id, window
	r.next = (r.next + 1) % len(r.ids)
}

func (r *resetRing) has(id uint32) bool { return r.find(id) >= 0 }

// spend takes n bytes of DATA on id from what its window allowed: false
// when id is not a stream we reset, or n is more than it had left.
func (r *resetRing) spend(id uint32, n int64) bool {
	i := r.find(id)
	if i < 0 || n > r.left[i] {
		return false
	}
	r.left[i] -= n
	return true
}

func (r *resetRing) find(id uint32) int {
	for i, v := range r.ids {
		if v == id {
			return i
		}
	}
	return -1
}
