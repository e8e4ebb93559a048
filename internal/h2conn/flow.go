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

package h2conn

// Flow control and SETTINGS, as both ends apply them (RFC 9113 6.5, 6.9).
// Each end keeps these values in its connection and streams, under its
// connection's lock; the functions here say what a frame does to them.

import (
	"iter"
	"math"
	"sync"
	"sync/atomic"

	"golang.org/x/net/http2"
)

// Windows and sizes a connection starts with (RFC 9113 6.5.2, 6.9.1).
const (
	InitialWindow = 65535
	InitialFrame  = 16384
	MaxWindow     = math.MaxInt32
)

// Grow adds inc to the send window *w, unless the sum would pass
// MaxWindow: then *w stays as it is and Grow reports false, which RFC
// 9113 6.9.1 makes a FLOW_CONTROL_ERROR.
func Grow(w *int64, inc int64) bool {
	if *w+inc > MaxWindow {
		return false
	}
	*w += inc
	return true
}

// RecvWindow is a window this end grants its peer, on the connection or
// on one stream: what the peer may still send, and what this end has
// consumed and not yet given back. It gives back in batches of at least
// half the window's size: one WINDOW_UPDATE per half window, not one per
// DATA frame.
type RecvWindow struct {
	left    int64
	unacked int64
}

// NewRecvWindow is a window of n bytes.
func NewRecvWindow(n int64) RecvWindow { return RecvWindow{left: n} }

// Left is what the peer may still send.
func (w *RecvWindow) Left() int64 { return w.left }

// Take takes n bytes the peer sent. It reports false, and takes nothing,
// when they pass what the peer was granted (a FLOW_CONTROL_ERROR).
func (w *RecvWindow) Take(n int64) bool {
	if n > w.left {
		return false
	}
	w.left -= n
	return true
}

// Consumed notes n bytes this end no longer holds: read, dropped, or
// padding.
func (w *RecvWindow) Consumed(n int64) { w.unacked += n }

// Refund returns what to give back now, for a window of size bytes:
// nothing until half of it waits, then all that waits. The window grows
// by what it returns.
func (w *RecvWindow) Refund(size int64) int64 {
	if w.unacked < size/2 {
		return 0
	}
	n := w.unacked
	w.unacked = 0
	w.left += n
	return n
}

// ConsumedRefund is Consumed(n), then Refund(size).
func (w *RecvWindow) ConsumedRefund(n, size int64) int64 {
	w.Consumed(n)
	return w.Refund(size)
}

// OnWindowUpdate applies f to the connection's send window conn, or to
// the send window of f's stream, stream: nil when that stream is not open.
// A stream that is not open is idle when it never was (a PROTOCOL_ERROR,
// RFC 9113 5.1), or closed (the update is ignored: the peer may not have
// seen it close). It returns a connection error, or overflowed when the
// stream's window would pass MaxWindow: the caller resets that stream
// with FLOW_CONTROL_ERROR (6.9.1). grew says whether a window grew, so
// that writers waiting for one may go on.
func OnWindowUpdate(f *http2.WindowUpdateFrame, conn, stream *int64, idle bool) (grew, overflowed bool, err error) {
	inc := int64(f.Increment)
	switch {
	case f.StreamID == 0:
		if !Grow(conn, inc) {
			return false, false, http2.ConnectionError(http2.ErrCodeFlowControl)
		}
		return true, false, nil
	case stream != nil:
		if !Grow(stream, inc) {
			return false, true, nil
		}
		return true, false, nil
	case idle:
		return false, false, http2.ConnectionError(http2.ErrCodeProtocol)
	default:
		return false, false, nil
	}
}

// PeerSettings are the values of the peer's SETTINGS that an end keeps,
// under its connection's lock but for MaxFrame, which its writers read
// under the write lock alone.
type PeerSettings struct {
	InitialWindow        int64 // a new stream's send window
	MaxFrame             atomic.Uint32
	MaxConcurrentStreams uint32
	MaxHeaderList        uint32
}

// Init sets the values that hold until the peer's SETTINGS say otherwise
// (RFC 9113 6.5.2); maxStreams is the concurrency assumed meanwhile.
func (p *PeerSettings) Init(maxStreams uint32) {
	p.InitialWindow, p.MaxConcurrentStreams, p.MaxHeaderList = InitialWindow, maxStreams, math.MaxUint32
	p.MaxFrame.Store(InitialFrame)
}

// Apply applies f's values, each checked first (RFC 9113 6.5.2). A new
// initial window moves the send window of every open stream, given by
// streams, by the change (6.9.2); one that would pass MaxWindow is a
// FLOW_CONTROL_ERROR. It returns the header table size f asks for, or -1:
// the encoder's, which the write side applies before its ack.
func (p *PeerSettings) Apply(f *http2.SettingsFrame, streams iter.Seq[*int64]) (table int64, err error) {
	table = -1
	err = f.ForeachSetting(func(s http2.Setting) error {
		if err := s.Valid(); err != nil {
			return err
		}
		switch s.ID {
		case http2.SettingInitialWindowSize:
			delta := int64(s.Val) - p.InitialWindow
			for w := range streams {
				if !Grow(w, delta) {
					return http2.ConnectionError(http2.ErrCodeFlowControl)
				}
			}
			p.InitialWindow = int64(s.Val)
		case http2.SettingMaxFrameSize:
			p.MaxFrame.Store(s.Val)
		case http2.SettingMaxConcurrentStreams:
			p.MaxConcurrentStreams = s.Val
		case http2.SettingMaxHeaderListSize:
			p.MaxHeaderList = s.Val
		case http2.SettingHeaderTableSize:
			table = int64(s.Val)
		}
		return nil
	})
	return table, err
}

// ApplyAndAck applies f (Apply) and acks it under one hold of the write
// lock, which write takes: a writer that the new values let go (a raised
// initial window) finds the lock taken until the ack is out, so no frame
// the new values allow precedes their ack. A peer such as h2spec
// (6.9.2/1) waits for the ack first and then for the DATA the raised
// window lets through, and passes over DATA that comes before the ack.
// cond's lock is the connection's, held while values change; its waiters
// wake once the ack is out. When write does not run its function (the
// end's write side is shut), the values still apply and no ack goes out.
// An invalid value is returned as the error, with no ack.
func (p *PeerSettings) ApplyAndAck(f *http2.SettingsFrame, w *Writer, cond *sync.Cond, write func(fn func() error) error, streams iter.Seq[*int64]) error {
	var applied error
	ran := false
	err := write(func() error {
		ran = true
		var table int64
		cond.L.Lock()
		table, applied = p.Apply(f, streams)
		cond.L.Unlock()
		if applied == nil {
			return w.AckSettings(table)
		}
		return nil // no ack: the connection closes with applied
	})
	cond.L.Lock()
	if !ran {
		_, applied = p.Apply(f, streams)
	}
	cond.Broadcast()
	cond.L.Unlock()
	if applied != nil {
		return applied
	}
	return err
}
