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

	"golang.org/x/net/http2"

	"knative.dev/event-forwarding-proxy/internal/h2conn"
)

// sendWindows yields the send window of every stream; c.mu is held.
func (c *conn) sendWindows(yield func(*int64) bool) {
	for _, st := range c.streams {
		if !yield(&st.sendWindow) {
			return
		}
	}
}

// OnWindowUpdate takes a WINDOW_UPDATE (h2conn.OnWindowUpdate).
func (c *conn) OnWindowUpdate(f *http2.WindowUpdateFrame) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	st := c.streams[f.StreamID]
	var window *int64
	if st != nil {
		window = &st.sendWindow
	}
	grew, overflowed, err := h2conn.OnWindowUpdate(f, &c.sendWindow, window, f.StreamID > c.lastID)
	if overflowed {
		c.resetLocked(st, http2.ErrCodeFlowControl, errors.New("h2server: the caller overflowed the stream's window"))
	}
	if grew {
		c.cond.Broadcast()
	}
	return err
}

// refundLocked gives the caller back n bytes of the connection's window,
// once enough of them add up to be worth a frame; it returns what to send.
func (c *conn) refundLocked(n int64) (grow int64) {
	c.ctl.Recv.Consumed(n)
	if c.err != nil {
		return 0
	}
	return c.ctl.Recv.Refund(c.s.connWindow())
}

// sendWindowUpdates writes the refunds refundLocked and the stream's
// returned: conn for the connection, strm for stream id.
func (c *conn) sendWindowUpdates(id uint32, conn, strm int64) {
	if conn == 0 && strm == 0 {
		return
	}
	_ = c.write(func() error { return c.w.WriteWindowUpdates(id, conn, strm) })
}
