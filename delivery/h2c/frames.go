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
)

// handle handles one frame.
func (c *conn) handle(f http2.Frame) error {
	switch f := f.(type) {
	case *http2.DataFrame:
		return c.onData(f)
	case *http2.HeadersFrame:
		defer c.headers.Done()
		return c.onHeaders(&c.headers.Block)
	case *http2.SettingsFrame:
		if f.IsAck() {
			return nil
		}
		table, err := c.applySettings(f)
		if err != nil {
			return err
		}
		return c.write(func() error {
			if table >= 0 {
				// The table shrinks before the ack, as RFC 9113 6.5.3 asks.
				c.w.Enc.SetMaxDynamicTableSizeLimit(uint32(table))
			}
			return c.w.FR.WriteSettingsAck()
		})
	case *http2.WindowUpdateFrame:
		return c.onWindowUpdate(f)
	case *http2.PingFrame:
		if !f.IsAck() {
			data := f.Data
			return c.write(func() error { return c.w.FR.WritePing(true, data) })
		}
		c.health.Acked(f.Data)
		return nil
	case *http2.RSTStreamFrame:
		c.onReset(f)
		return nil
	case *http2.GoAwayFrame:
		c.onGoAway(f)
		return nil
	case *http2.PushPromiseFrame:
		// Push was turned off in our SETTINGS (RFC 9113 8.4).
		return http2.ConnectionError(http2.ErrCodeProtocol)
	default:
		return nil // PRIORITY and unknown frames are ignored
	}
}

// applySettings applies the destination's SETTINGS, but for the header
// table size, which belongs to the write side: it returns it, or -1 when
// the frame does not set it.
func (c *conn) applySettings(f *http2.SettingsFrame) (table int64, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	table = -1
	err = f.ForeachSetting(func(s http2.Setting) error {
		if err := s.Valid(); err != nil {
			return err
		}
		switch s.ID {
		case http2.SettingMaxConcurrentStreams:
			c.maxStreams = s.Val
		case http2.SettingInitialWindowSize:
			// The change applies to every open stream (RFC 9113 6.9.2).
			delta := int64(s.Val) - int64(c.peerWindow)
			for _, st := range c.streams {
				st.sendWindow += delta
				if st.sendWindow > maxWindow {
					return http2.ConnectionError(http2.ErrCodeFlowControl)
				}
			}
			c.peerWindow = int32(s.Val)
			c.cond.Broadcast()
		case http2.SettingMaxFrameSize:
			c.maxFrame = s.Val
		case http2.SettingMaxHeaderListSize:
			c.maxHeaderList = s.Val
		case http2.SettingHeaderTableSize:
			table = int64(s.Val)
		}
		return nil
	})
	return table, err
}

func (c *conn) onWindowUpdate(f *http2.WindowUpdateFrame) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if f.StreamID == 0 {
		c.sendWindow += int64(f.Increment)
		if c.sendWindow > maxWindow {
			return http2.ConnectionError(http2.ErrCodeFlowControl)
		}
		c.cond.Broadcast()
		return nil
	}
	s := c.streams[f.StreamID]
	if s == nil {
		return nil // a stream already closed
	}
	s.sendWindow += int64(f.Increment)
	if s.sendWindow > maxWindow {
		c.mu.Unlock()
		c.streamError(s.id, http2.ErrCodeFlowControl, errors.New("h2c: the destination overflowed a stream's send window"))
		c.mu.Lock()
		return nil
	}
	c.cond.Broadcast()
	return nil
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
	dead, ping := c.health.Check()
	switch {
	case dead:
		c.close(fmt.Errorf("h2c: %s did not answer a ping within %v", c.addr, orDefault(c.t.PingTimeout, 15*time.Second)))
	case ping != nil:
		_ = c.write(func() error { return c.w.FR.WritePing(false, *ping) })
	}
}
