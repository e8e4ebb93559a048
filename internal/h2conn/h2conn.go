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

// Package h2conn holds what both ends of the project's h2c connections do
// alike: delivery/h2c's client and proxy/internal/h2server's server. Each
// writes its frames from the goroutine that has them, under one lock per
// connection that coalesces flushes (Writer), PINGs a peer that went
// silent (Health), and decodes the header blocks it reads (HeaderReader).
package h2conn

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// Writer is the write side of a connection: the framer, the header
// encoder and the buffer under them, used under its lock only.
type Writer struct {
	mu      sync.Mutex
	waiting atomic.Int32 // writers waiting for mu (Lock)
	BW      *bufio.Writer
	FR      *http2.Framer
	Enc     *hpack.Encoder
	Block   bytes.Buffer // the header block Enc writes
}

// NewWriter returns a Writer on w with a 16 KiB buffer.
func NewWriter(w io.Writer) *Writer {
	wr := &Writer{BW: bufio.NewWriterSize(w, 16<<10)}
	wr.FR = http2.NewFramer(wr.BW, nil)
	wr.Enc = hpack.NewEncoder(&wr.Block)
	return wr
}

// Lock takes the write lock, counted among the writers that wait for it
// while it waits (see FlushLocked).
func (w *Writer) Lock() {
	w.waiting.Add(1)
	w.mu.Lock()
	w.waiting.Add(-1)
}

// Unlock lets go of the write lock; the frames written under it must have
// been flushed (FlushLocked) or be left to a writer that waits.
func (w *Writer) Unlock() { w.mu.Unlock() }

// LockWithin takes the write lock if it comes free within d, and reports
// whether it did. A writer holds the lock for one write, which ends
// within moments unless the socket is full: then the caller gives up
// rather than wait out that writer's deadline.
func (w *Writer) LockWithin(d time.Duration) bool {
	for deadline := time.Now().Add(d); !w.mu.TryLock(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			return false
		}
	}
	return true
}

// FlushLocked sends the buffered frames to the socket, unless another
// writer waits for the lock: that one sends them with its own. A burst of
// calls or answers on one connection then costs a system call per burst
// rather than per frame. Every holder of the lock flushes before it lets
// go (or the connection breaks), so the last writer of a burst sends it
// all.
func (w *Writer) FlushLocked() error {
	if w.BW.Buffered() == 0 || w.waiting.Load() > 0 {
		return nil
	}
	return w.BW.Flush()
}

// IsIOError reports whether err is the connection's own failure (closed,
// reset, timed out) rather than a protocol error.
func IsIOError(err error) bool {
	var ne net.Error
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed) || errors.As(err, &ne)
}

// Health PINGs a peer that has sent nothing for Every, and calls the
// connection dead when a PING's ack is Timeout late: a peer that vanished
// without a FIN or RST would otherwise keep its calls for as long as
// their deadlines allow.
type Health struct {
	every, timeout time.Duration
	lastRead       atomic.Int64 // UnixNano

	mu    sync.Mutex
	out   bool // a PING awaits its ack
	data  [8]byte
	timer *time.Timer
}

// Start starts watching: check runs when the peer has been silent for
// every, and again after timeout (or whenever Check asks).
func (h *Health) Start(every, timeout time.Duration, check func()) {
	h.every, h.timeout = every, timeout
	h.Read()
	h.mu.Lock()
	h.timer = time.AfterFunc(every, check)
	h.mu.Unlock()
}

// Read notes that a frame came in.
func (h *Health) Read() { h.lastRead.Store(time.Now().UnixNano()) }

// Acked takes a PING ack: the peer is alive if it acks ours.
func (h *Health) Acked(data [8]byte) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.out && data == h.data {
		h.out = false
		h.timer.Reset(h.every)
	}
}

// Check is for the check func given to Start: it says whether the peer is
// dead (the last PING went unanswered), or else the PING to send, if one
// is due.
func (h *Health) Check() (dead bool, ping *[8]byte) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.out {
		return true, nil
	}
	if quiet := time.Since(time.Unix(0, h.lastRead.Load())); quiet < h.every {
		h.timer.Reset(h.every - quiet)
		return false, nil
	}
	h.out = true
	_, _ = rand.Read(h.data[:])
	data := h.data
	h.timer.Reset(h.timeout)
	return false, &data
}

// Stop stops watching.
func (h *Health) Stop() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.timer != nil {
		h.timer.Stop()
	}
}

// Waiting is how many writers wait for the lock, for tests that line up a
// burst of writes.
func (w *Writer) Waiting() int { return int(w.waiting.Load()) }

// AckSettings acks the peer's SETTINGS; the caller holds the lock. A
// header table size they set (table, -1 if none) shrinks the encoder's
// table first, as RFC 9113 6.5.3 asks.
func (w *Writer) AckSettings(table int64) error {
	if table >= 0 {
		w.Enc.SetMaxDynamicTableSizeLimit(uint32(table))
	}
	return w.FR.WriteSettingsAck()
}

// WriteWindowUpdates gives the peer back conn bytes of the connection's
// window and strm of stream id's, each only if positive; the caller holds
// the lock.
func (w *Writer) WriteWindowUpdates(id uint32, conn, strm int64) error {
	if conn > 0 {
		if err := w.FR.WriteWindowUpdate(0, uint32(conn)); err != nil {
			return err
		}
	}
	if strm > 0 {
		return w.FR.WriteWindowUpdate(id, uint32(strm))
	}
	return nil
}

// WriteHeaderBlock writes the block in Block as a HEADERS frame and as
// many CONTINUATION frames as it takes at maxFrame bytes a frame; the
// caller holds the lock.
func (w *Writer) WriteHeaderBlock(id uint32, endStream bool, maxFrame int) error {
	block := w.Block.Bytes()
	first := block[:min(len(block), maxFrame)]
	block = block[len(first):]
	err := w.FR.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: first, EndStream: endStream, EndHeaders: len(block) == 0})
	for err == nil && len(block) > 0 {
		frag := block[:min(len(block), maxFrame)]
		block = block[len(frag):]
		err = w.FR.WriteContinuation(id, len(block) == 0, frag)
	}
	return err
}

// OnPing answers a PING with its ack through write, or takes the ack of
// the health check's own.
func (h *Health) OnPing(f *http2.PingFrame, w *Writer, write func(fn func() error) error) error {
	if f.IsAck() {
		h.Acked(f.Data)
		return nil
	}
	data := f.Data
	return write(func() error { return w.FR.WritePing(true, data) })
}

// Run is the body of the check func given to Start: it reports whether
// the peer is dead, and else sends the PING that is due, if one is,
// through write.
func (h *Health) Run(w *Writer, write func(fn func() error) error) (dead bool) {
	dead, ping := h.Check()
	if ping != nil {
		_ = write(func() error { return w.FR.WritePing(false, *ping) })
	}
	return dead
}

// WriteOpening writes this end's first frames after the preface: its
// SETTINGS, then a WINDOW_UPDATE that grows the connection's window from
// the 65,535 bytes every connection starts with to connWindow; the caller
// holds the lock.
func (w *Writer) WriteOpening(connWindow int64, settings ...http2.Setting) error {
	if err := w.FR.WriteSettings(settings...); err != nil {
		return err
	}
	return w.WriteWindowUpdates(0, connWindow-InitialWindow, 0)
}
