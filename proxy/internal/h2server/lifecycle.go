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
	"os"
	"sync"
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
// The reading goroutine ends at the caller's own close, or at the bound
// (linger), and closes the connection.
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
	if c.ctl.CheckHealth() {
		c.closeWith(errPingTimeout)
	}
}

// linger goes on reading, once closeGently's second has passed (err, the
// read loop's, is its deadline), while the caller still takes what is
// queued for it (whileTaken): a slow caller, or a loaded machine, may need
// more than a second to read a large answer, which a close with unread
// input would throw away. What the caller sends now is dropped unread,
// frames or not. It returns err.
func (c *conn) linger(err error) error {
	c.w.Lock()
	shut := c.writeShut
	c.w.Unlock()
	if !shut || !errors.Is(err, os.ErrDeadlineExceeded) {
		return err
	}
	if queued, ok := unacked(c.nc); !ok || queued == 0 {
		return err
	}
	stop := c.whileTaken(c.nc.SetReadDeadline)
	defer stop()
	buf := make([]byte, 16<<10)
	for {
		if _, rerr := c.br.Read(buf); rerr != nil {
			return err // the caller closed, or stopped taking what is queued
		}
	}
}

// takePause is how long a caller may go without taking any of what is
// queued for it before it counts as no longer reading (whileTaken).
const takePause = 2 * time.Second

// whileTaken sets a deadline takePause away with set (the connection's
// read or write deadline) and, for as long as the caller takes what is
// queued for it (the socket's queue shrank since the last look), moves it
// on, up to the write timeout: a caller that reads slowly, or a loaded
// machine, may need longer than any fixed bound to take what is queued,
// while one that stopped reading gets takePause. stop ends the moves.
// Where the queue cannot be seen, the deadline does not move.
func (c *conn) whileTaken(set func(time.Time) error) (stop func()) {
	_ = set(time.Now().Add(takePause))
	queued, ok := unacked(c.nc)
	if !ok {
		return func() {}
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		end := time.Now().Add(orDefault(c.s.WriteTimeout, 30*time.Second))
		tick := time.NewTicker(takePause / 8)
		defer tick.Stop()
		for time.Now().Before(end) {
			select {
			case <-done:
				return
			case <-tick.C:
			}
			was := queued
			if queued, ok = unacked(c.nc); !ok {
				return
			}
			if queued < was {
				_ = set(time.Now().Add(takePause))
			}
		}
	})
	return func() { close(done); wg.Wait() }
}
