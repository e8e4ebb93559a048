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

import (
	"iter"
	"sync"

	"golang.org/x/net/http2"
)

// End is how one end handles the frames that carry its streams; Control
// handles the others alike for both.
type End interface {
	// OnData takes a DATA frame, already taken from the connection's
	// window (Control.Recv).
	OnData(f *http2.DataFrame) error
	OnHeaders(b *HeaderBlock) error
	OnWindowUpdate(f *http2.WindowUpdateFrame) error
	OnReset(f *http2.RSTStreamFrame) error
	// OnOther takes GOAWAY, PRIORITY and frames of unknown types.
	OnOther(f http2.Frame) error
}

// Control is what both ends keep alike about a connection: the peer's
// SETTINGS, the connection's receive window, the health check, and the
// dispatch of each frame read.
type Control struct {
	Peer   PeerSettings // under the connection lock, but for MaxFrame
	Recv   RecvWindow   // what the peer may send on the connection, under its lock
	Health Health
	// Loop is the read loop, which alone calls ReadFrame and Handle: its
	// ends mark their own read-loop state with it too.
	Loop ReadLoop

	end     End
	w       *Writer
	headers *HeaderReader
	cond    *sync.Cond
	write   func(fn func() error) error
	windows iter.Seq[*int64]
}

// Init readies c for a connection whose end is end, with a receive window
// of connWindow bytes. w and headers are its write side and its header
// block reader; cond's lock is its connection lock, which guards the send
// windows windows yields; write runs a function that writes frames under
// w's lock and flushes them. The peer's settings are the initial ones
// (PeerSettings.Init) with maxStreams until its SETTINGS come.
func (c *Control) Init(end End, connWindow int64, w *Writer, headers *HeaderReader, cond *sync.Cond, write func(fn func() error) error, windows iter.Seq[*int64], maxStreams uint32) {
	c.end, c.w, c.headers, c.cond, c.write, c.windows = end, w, headers, cond, write, windows
	c.Recv = NewRecvWindow(connWindow)
	c.Peer.Init(maxStreams)
}

// ReadFrame reads the next frame, a HEADERS frame with the rest of its
// block (Handle takes the block); any frame read, even a broken one, is a
// sign of life for the health check.
func (c *Control) ReadFrame() (http2.Frame, error) {
	c.Loop.Check()
	f, err := c.headers.fr.ReadFrame()
	if hf, ok := f.(*http2.HeadersFrame); ok && err == nil {
		err = c.headers.Read(hf)
	}
	c.Health.Read()
	return f, err
}

// Handle handles one frame ReadFrame read; a HEADERS frame's block has been read
// with c's header reader. DATA is taken from the connection's window
// first: past it, a FLOW_CONTROL_ERROR (RFC 9113 6.9.1), and the end
// sees only what fits. SETTINGS are applied and acked (ApplyAndAck),
// PINGs answered or taken as the health check's ack, a PUSH_PROMISE is a
// PROTOCOL_ERROR (RFC 9113 8.4: a client's SETTINGS turn push off, and
// clients never push); the rest goes to the end.
func (c *Control) Handle(f http2.Frame) error {
	c.Loop.Check()
	switch f := f.(type) {
	case *http2.DataFrame:
		c.cond.L.Lock()
		fits := c.Recv.Take(int64(f.Length))
		c.cond.L.Unlock()
		if !fits {
			return http2.ConnectionError(http2.ErrCodeFlowControl)
		}
		return c.end.OnData(f)
	case *http2.HeadersFrame:
		defer c.headers.Done()
		return c.end.OnHeaders(&c.headers.Block)
	case *http2.WindowUpdateFrame:
		return c.end.OnWindowUpdate(f)
	case *http2.RSTStreamFrame:
		return c.end.OnReset(f)
	case *http2.SettingsFrame:
		if f.IsAck() {
			return nil
		}
		return c.Peer.ApplyAndAck(f, c.w, c.cond, c.write, c.windows)
	case *http2.PingFrame:
		return c.Health.OnPing(f, c.w, c.write)
	case *http2.PushPromiseFrame:
		return http2.ConnectionError(http2.ErrCodeProtocol)
	default:
		return c.end.OnOther(f)
	}
}

// CheckHealth is the body of the check func given to Health.Start: it
// reports whether the peer is dead, and else sends the PING that is due,
// if one is.
func (c *Control) CheckHealth() (dead bool) { return c.Health.Run(c.w, c.write) }
