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
)

// onSettings applies the caller's SETTINGS and acks them. Both happen
// under the write lock: a writer that the new values let go (a raised
// SETTINGS_INITIAL_WINDOW_SIZE) finds the lock taken until the ack is
// out, so no frame the new values allow precedes their ack. A caller such
// as h2spec (6.9.2/1) waits for the ack first and then for the DATA the
// raised window lets through; values applied before the lock is taken let
// a woken writer win it now and then, and send its DATA before the ack,
// which such a caller passes over while it waits for the ack.
func (c *conn) onSettings(f *http2.SettingsFrame) error {
	var applied error
	ran := false
	err := c.write(func() error {
		ran = true
		var table int64
		c.mu.Lock()
		table, applied = c.applySettingsLocked(f)
		c.mu.Unlock()
		if applied == nil {
			if table >= 0 {
				// The table shrinks before the ack (RFC 9113 6.5.3).
				c.w.Enc.SetMaxDynamicTableSizeLimit(uint32(table))
			}
			return c.w.FR.WriteSettingsAck()
		}
		return nil // no ack: the connection closes with applied
	})
	c.mu.Lock()
	if !ran {
		// Our side is closed (closeGently): no ack goes out, and nothing
		// else either, but the values still hold.
		_, applied = c.applySettingsLocked(f)
	}
	// Writers wake once the lock is free, after the ack.
	c.cond.Broadcast()
	c.mu.Unlock()
	if applied != nil {
		return applied
	}
	return err
}

// applySettingsLocked applies f's values; c.mu is held. It returns the
// header table size f asks for, or -1.
func (c *conn) applySettingsLocked(f *http2.SettingsFrame) (table int64, err error) {
	table = -1
	err = f.ForeachSetting(func(s http2.Setting) error {
		if err := s.Valid(); err != nil {
			return err
		}
		switch s.ID {
		case http2.SettingInitialWindowSize:
			// The change applies to every open stream (RFC 9113 6.9.2).
			delta := int64(s.Val) - c.peerWindow
			for _, st := range c.streams {
				if st.sendWindow+delta > maxWindow {
					return http2.ConnectionError(http2.ErrCodeFlowControl)
				}
				st.sendWindow += delta
			}
			c.peerWindow = int64(s.Val)
		case http2.SettingMaxFrameSize:
			c.maxFrame.Store(s.Val)
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
	inc := int64(f.Increment)
	if f.StreamID == 0 {
		if c.sendWindow+inc > maxWindow {
			return http2.ConnectionError(http2.ErrCodeFlowControl)
		}
		c.sendWindow += inc
		c.cond.Broadcast()
		return nil
	}
	st := c.streams[f.StreamID]
	if st == nil {
		if f.StreamID > c.lastID {
			return http2.ConnectionError(http2.ErrCodeProtocol) // an idle stream (RFC 9113 5.1)
		}
		return nil // a closed stream: the caller may not know yet
	}
	if st.sendWindow+inc > maxWindow {
		c.resetLocked(st, http2.ErrCodeFlowControl, errors.New("h2server: the caller overflowed the stream's window"))
		return nil
	}
	st.sendWindow += inc
	c.cond.Broadcast()
	return nil
}

// refundLocked gives the caller back n bytes of the connection's window,
// once enough of them add up to be worth a frame; it returns what to send.
func (c *conn) refundLocked(n int64) (grow int64) {
	c.unacked += n
	if c.err != nil || c.unacked < c.s.connWindow()/2 {
		return 0
	}
	grow, c.unacked = c.unacked, 0
	c.recv += grow
	return grow
}

// sendWindowUpdates writes the refunds refundLocked and the stream's
// returned: conn for the connection, strm for stream id.
func (c *conn) sendWindowUpdates(id uint32, conn, strm int64) {
	if conn == 0 && strm == 0 {
		return
	}
	_ = c.write(func() error {
		if conn > 0 {
			if err := c.w.FR.WriteWindowUpdate(0, uint32(conn)); err != nil {
				return err
			}
		}
		if strm > 0 {
			return c.w.FR.WriteWindowUpdate(id, uint32(strm))
		}
		return nil
	})
}
