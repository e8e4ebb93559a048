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

// The frames the reading goroutine handles for the whole connection:
// SETTINGS, PING, WINDOW_UPDATE, GOAWAY, and the health check's PING.

import (
	"errors"
	"fmt"
	"time"

	"golang.org/x/net/http2"

	"knative.dev/event-forwarding-proxy/internal/h2conn"
)

// OnOther takes the frames h2conn's Control leaves to the end but for
// streams: GOAWAY; PRIORITY and frames of unknown types are ignored.
func (c *conn) OnOther(f http2.Frame) error {
	if g, ok := f.(*http2.GoAwayFrame); ok {
		c.onGoAway(g)
	}
	return nil
}

// sendWindows yields the send window of every stream; c.mu is held.
func (c *conn) sendWindows(yield func(*int64) bool) {
	for _, s := range c.streams {
		if !yield(&s.sendWindow) {
			return
		}
	}
}

// OnWindowUpdate applies a WINDOW_UPDATE as the inbound server does: one
// on a stream never opened breaks the connection, one that would overflow
// a stream's window resets that stream.
func (c *conn) OnWindowUpdate(f *http2.WindowUpdateFrame) error {
	c.mu.Lock()
	s := c.streams[f.StreamID]
	var window *int64
	if s != nil {
		window = &s.sendWindow
	}
	grew, overflowed, err := h2conn.OnWindowUpdate(f, &c.sendWindow, window, !c.openedLocked(f.StreamID))
	if grew {
		c.cond.Broadcast()
	}
	c.mu.Unlock()
	if overflowed {
		c.streamError(s.id, http2.ErrCodeFlowControl, errors.New("h2c: the destination overflowed a stream's send window"))
	}
	return err
}

func (c *conn) onGoAway(f *http2.GoAwayFrame) {
	c.mu.Lock()
	c.goAway = true
	c.lastGood = f.LastStreamID
	if c.err == nil {
		c.err = errGoneAway
	}
	cause := errGoneAway
	if f.ErrCode != http2.ErrCodeNo {
		cause = fmt.Errorf("%w (%v %q)", errGoneAway, f.ErrCode, f.DebugData())
	}
	for id, s := range c.streams {
		if id > f.LastStreamID {
			// Never processed (RFC 9113 6.8): it may go out again.
			delete(c.streams, id)
			s.endLocked(fmt.Errorf("%w: %w", errRetry, cause))
		}
	}
	c.cond.Broadcast()
	empty := len(c.streams) == 0 && c.reserved == 0
	c.mu.Unlock()
	c.t.forget(c)
	if empty {
		c.close(cause)
	}
}

// checkHealth runs when nothing was read for SendPingTimeout: it sends a
// PING; when the PING's ack is late by PingTimeout, the connection breaks.
func (c *conn) checkHealth() {
	if c.ctl.CheckHealth() {
		c.close(fmt.Errorf("h2c: %s did not answer a ping within %v", c.addr, orDefault(c.t.PingTimeout, 15*time.Second)))
	}
}
