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
	"time"

	"golang.org/x/net/http2"
)

// The connection's life apart from its frames: the graceful close, idle
// close and the PINGs that find a caller gone.

// goAway starts the graceful close: no new stream, and the close once the
// streams open now are done.
func (c *conn) goAway() {
	c.mu.Lock()
	if c.err != nil || c.goingAway {
		c.mu.Unlock()
		return
	}
	c.goingAway = true
	last := c.lastID
	idle := c.active == 0
	c.mu.Unlock()
	_ = c.write(func() error { return c.w.FR.WriteGoAway(last, http2.ErrCodeNo, nil) })
	if idle {
		c.closeGently()
	}
}

// closeGently ends a connection that has nothing more to send: the frames
// still buffered go out, then a FIN; reading goes on for a moment so that
// what the caller sends meanwhile (an ack, a WINDOW_UPDATE) does not turn
// the close into a reset that could destroy the last answers in flight.
// The reading goroutine ends at the caller's own close, or at the bound,
// and closes the connection.
func (c *conn) closeGently() {
	c.w.Lock()
	_ = c.nc.SetWriteDeadline(time.Now().Add(time.Second))
	_ = c.w.BW.Flush()
	cw, ok := c.nc.(interface{ CloseWrite() error })
	shut := !c.writeShut && ok && cw.CloseWrite() == nil
	// Acks and window updates the reading goroutine would still write
	// are dropped: a write on the closed side would fail, and its close
	// reset the connection under the answers in flight.
	c.writeShut = true
	c.w.Unlock()
	if shut {
		_ = c.nc.SetReadDeadline(time.Now().Add(time.Second))
		return
	}
	c.closeWith(errGoneAway)
}

// streamDoneLocked counts a stream's handler done; the connection's last
// one lets a going-away connection close and starts the idle timer.
func (c *conn) streamDoneLocked() {
	c.active--
	if c.active > 0 || c.err != nil {
		return
	}
	if c.goingAway {
		go c.closeGently()
		return
	}
	if c.idle != nil {
		c.idle.Reset(c.s.IdleTimeout)
	}
}

func (c *conn) closeIfIdle() {
	c.mu.Lock()
	idle := c.active == 0 && c.err == nil && !c.goingAway
	c.goingAway = c.goingAway || idle // a stream opened from now on is refused
	last := c.lastID
	c.mu.Unlock()
	if idle {
		_ = c.write(func() error { return c.w.FR.WriteGoAway(last, http2.ErrCodeNo, nil) })
		c.closeGently()
	}
}

// checkHealth runs when the caller has been silent for SendPingTimeout:
// it sends a PING, or closes the connection when the last one's ack is
// PingTimeout late.
func (c *conn) checkHealth() {
	dead, ping := c.health.Check()
	switch {
	case dead:
		c.closeWith(errPingTimeout)
	case ping != nil:
		_ = c.write(func() error { return c.w.FR.WritePing(false, *ping) })
	}
}
