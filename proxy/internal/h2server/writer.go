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
	"fmt"
	"net/http"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"

	"golang.org/x/net/http/httpguts"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// responseState is a stream's answer as its writer builds it.
type responseState struct {
	header         http.Header
	status         int
	wroteHeader    bool // the status is decided
	sentHeader     bool // the HEADERS frame is out
	noBody         bool // HEAD, 204, 304: Write takes nothing
	head           bool // the request is a HEAD
	expectContinue bool
	declared       int64 // the answer's content-length, or -1
	written        int64
	detached       bool // Detach: the handler's return does not end the stream
}

// responseWriter is a stream's http.ResponseWriter. It also implements
// Flush, the deadlines of http.ResponseController, and Detach.
type responseWriter stream

// Detach is for the stream's handler: once called, the handler's return
// no longer ends the stream, end does. end must be called exactly once;
// p, a panic's value, resets the stream instead of ending it cleanly
// (http.ErrAbortHandler quietly, anything else logged), as a panic out of
// the handler would. The writer stays usable, from any one goroutine at a
// time, until end.
func (w *responseWriter) Detach() (end func(p any)) {
	st := (*stream)(w)
	st.rw.detached = true
	return func(p any) { st.c.finish(st, p) }
}

func (w *responseWriter) Header() http.Header {
	if w.rw.header == nil {
		w.rw.header = make(http.Header)
	}
	return w.rw.header
}

func (w *responseWriter) WriteHeader(code int) {
	rw := &w.rw
	switch {
	case rw.wroteHeader:
		return
	case code < 100 || code > 999:
		panic(fmt.Sprintf("invalid WriteHeader code %v", code))
	case code < 200 && code != http.StatusSwitchingProtocols:
		_ = w.writeHeaders(code, rw.header, false, false) // informational: more follows
		return
	}
	rw.wroteHeader, rw.status = true, code
	rw.declared = -1
	if v := rw.header.Get("Content-Length"); v != "" {
		if n, err := strconv.ParseInt(v, 10, 64); err == nil && n >= 0 {
			rw.declared = n
		}
	}
	rw.noBody = rw.head || code == http.StatusNoContent || code == http.StatusNotModified
}

func (w *responseWriter) Write(p []byte) (int, error) {
	rw := &w.rw
	if !rw.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	switch {
	case rw.noBody:
		return 0, http.ErrBodyNotAllowed
	case rw.declared >= 0 && rw.written+int64(len(p)) > rw.declared:
		return 0, http.ErrContentLength
	}
	if err := w.sendHeader(false); err != nil {
		return 0, err
	}
	st := (*stream)(w)
	n := 0
	for len(p) > 0 {
		k, err := st.c.awaitSend(st, len(p))
		if err != nil {
			return n, err
		}
		chunk := p[:k]
		err = st.c.write(func() error {
			if st.wireGone() {
				return errStreamClosed
			}
			return st.c.w.FR.WriteData(st.id, false, chunk)
		})
		if err != nil {
			return n, st.writeError(err)
		}
		n += k
		rw.written += int64(k)
		p = p[k:]
	}
	return n, nil
}

// Flush sends the header now, if not yet out; data goes out as it is
// written.
func (w *responseWriter) Flush() {
	if !w.rw.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	_ = w.sendHeader(false)
}

// FlushError is Flush with its error, for http.ResponseController.
func (w *responseWriter) FlushError() error {
	if !w.rw.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	return w.sendHeader(false)
}

func (w *responseWriter) SetReadDeadline(t time.Time) error {
	st := (*stream)(w)
	return st.setDeadline(&st.readDeadline, &st.readTimer, t)
}

func (w *responseWriter) SetWriteDeadline(t time.Time) error {
	st := (*stream)(w)
	return st.setDeadline(&st.writeDeadline, &st.writeTimer, t)
}

// writeContinue answers a request's Expect: 100-continue.
func (w *responseWriter) writeContinue() error {
	return w.writeHeaders(http.StatusContinue, nil, false, false)
}

// sendHeader sends the answer's HEADERS unless they are out, with
// END_STREAM when end.
func (w *responseWriter) sendHeader(end bool) error {
	if w.rw.sentHeader {
		return nil
	}
	w.rw.sentHeader = true
	return w.writeHeaders(w.rw.status, w.rw.header, end, false)
}

// writeError is what a writer's failed write returns: the stream's own
// end when there is one (reset, deadline), else err.
func (st *stream) writeError(err error) error {
	st.c.mu.Lock()
	defer st.c.mu.Unlock()
	if st.err != nil {
		return st.err
	}
	return err
}

// awaitSend waits until st and the connection may send up to n bytes and
// takes them from both windows: at most one frame's worth.
func (c *conn) awaitSend(st *stream, n int) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for {
		switch {
		case st.err != nil:
			return 0, st.err
		case passed(st.writeDeadline):
			c.resetLocked(st, http2.ErrCodeInternal, os.ErrDeadlineExceeded)
			return 0, os.ErrDeadlineExceeded
		}
		k := min(int64(n), int64(c.ctl.Peer.MaxFrame.Load()), c.sendWindow, st.sendWindow)
		if k > 0 {
			c.sendWindow -= k
			st.sendWindow -= k
			return int(k), nil
		}
		c.cond.Wait()
	}
}

// writeHeaders encodes and writes a header block for st: the answer's
// (status and header, fields with the trailer prefix left for later), an
// informational one, or trailers.
func (w *responseWriter) writeHeaders(status int, h http.Header, end, trailers bool) error {
	st := (*stream)(w)
	c := st.c
	err := c.write(func() error {
		switch {
		case st.wireGone():
			return errStreamClosed
		case !trailers && status < 200 && st.headersOut:
			return nil // a 100 Continue the final answer overtook
		case !trailers:
			st.headersOut = st.headersOut || status >= 200
		}
		c.w.Block.Reset()
		if !trailers {
			c.encode(":status", statusText(status))
		}
		for k, vv := range h {
			name := k
			if trailers {
				name = strings.TrimPrefix(k, http.TrailerPrefix)
			} else if strings.HasPrefix(k, http.TrailerPrefix) {
				continue
			}
			c.encodeField(name, vv)
		}
		if !trailers && status >= 200 && h["Date"] == nil {
			c.encode("date", time.Now().UTC().Format(http.TimeFormat))
		}
		if end {
			st.wireClosed.Store(true)
			c.release(st)
		}
		return c.writeBlockLocked(st.id, end)
	})
	if err != nil {
		return st.writeError(err)
	}
	return nil
}

// encodeField encodes one field of an answer, leaving out what HTTP/2
// forbids (RFC 9113 8.2.2) and what is not a valid field.
func (c *conn) encodeField(k string, vv []string) {
	if !httpguts.ValidHeaderFieldName(k) {
		return
	}
	name := lowerKey(k)
	switch name {
	case "connection", "proxy-connection", "keep-alive", "transfer-encoding", "upgrade":
		return
	}
	for _, v := range vv {
		if name == "te" && v != "trailers" || !httpguts.ValidHeaderFieldValue(v) {
			continue
		}
		c.encode(name, v)
	}
}

func (c *conn) encode(name, value string) {
	_ = c.w.Enc.WriteField(hpack.HeaderField{Name: name, Value: value})
}

// writeBlockLocked writes the block in c.w.Block as HEADERS and as many
// CONTINUATION frames as the caller's frame size asks.
func (c *conn) writeBlockLocked(id uint32, end bool) error {
	return c.w.WriteHeaderBlock(id, end, int(c.ctl.Peer.MaxFrame.Load()))
}

// runHandler runs the stream's handler on the goroutine onHeaders started
// for it, and ends the stream when it returns, unless it detached.
func (c *conn) runHandler(st *stream, req *http.Request) {
	defer func() {
		p := recover()
		if st.rw.detached && p == nil {
			return // end belongs to whoever has the answer
		}
		c.finish(st, p)
	}()
	c.h.ServeHTTP((*responseWriter)(st), req)
}

// finish ends st's answer, once: cleanly, or with a reset when the
// handler panicked (p) or wrote less than its content-length. It then
// frees what the stream held.
func (c *conn) finish(st *stream, p any) {
	c.mu.Lock()
	if st.finished {
		c.mu.Unlock()
		return
	}
	st.finished = true
	c.mu.Unlock()
	w := (*responseWriter)(st)
	var err error
	switch {
	case p != nil:
		if p != http.ErrAbortHandler { //nolint:errorlint // a recovered value, compared as net/http's server compares it
			buf := make([]byte, 16<<10)
			buf = buf[:runtime.Stack(buf, false)]
			c.logger.Printf("h2server: panic serving %s: %v\n%s", c.remote, p, buf)
		}
		err = errors.New("h2server: the handler panicked")
	default:
		err = w.end()
	}
	c.mu.Lock()
	if p == nil && err == nil && st.err == nil {
		c.abuse.completed.Add(1)
	}
	if err != nil && st.err == nil && c.streams[st.id] == st {
		c.resetLocked(st, http2.ErrCodeInternal, err)
	}
	if !st.eof && st.err == nil && c.streams[st.id] == st {
		// The answer is complete while the caller still sends: it can
		// stop (RFC 9113 8.1). Remembered before the record goes, so
		// that what the caller already sent is not taken for a flood.
		c.ourResets.add(st.id, st.recv.Left())
		go c.sendReset(st.id, http2.ErrCodeNo)
	}
	st.endLocked(errStreamClosed)
	if c.streams[st.id] == st {
		delete(c.streams, st.id)
	}
	grow := c.refundLocked(int64(len(st.buf) - st.off))
	st.buf, st.off, st.bodyShut = nil, 0, true
	for _, t := range []*time.Timer{st.readTimer, st.writeTimer} {
		if t != nil {
			t.Stop()
		}
	}
	c.releaseLocked(st)
	c.mu.Unlock()
	st.cancelRequest()
	c.sendWindowUpdates(0, grow, 0)
}

// end completes a clean answer: the header if not out, the trailers, and
// END_STREAM. A body shorter than its content-length is an error.
func (w *responseWriter) end() error {
	rw := &w.rw
	if !rw.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	if rw.declared >= 0 && rw.written != rw.declared && !rw.noBody {
		return http.ErrContentLength
	}
	trailers := w.trailers()
	if !rw.sentHeader {
		rw.sentHeader = true
		if err := w.writeHeaders(rw.status, rw.header, trailers == nil, false); err != nil || trailers == nil {
			return err
		}
	}
	if trailers != nil {
		return w.writeHeaders(0, trailers, true, true)
	}
	st := (*stream)(w)
	return st.c.write(func() error {
		if st.wireGone() {
			return errStreamClosed
		}
		st.wireClosed.Store(true)
		st.c.release(st)
		return st.c.w.FR.WriteData(st.id, true, nil)
	})
}

// trailers collects the answer's trailers: the fields the Trailer header
// declared and those with http.TrailerPrefix; nil if none has a value.
func (w *responseWriter) trailers() http.Header {
	var t http.Header
	add := func(k string, vv []string) {
		if len(vv) == 0 {
			return
		}
		if t == nil {
			t = make(http.Header)
		}
		t[k] = vv
	}
	for k, vv := range w.rw.header {
		if strings.HasPrefix(k, http.TrailerPrefix) {
			add(k, vv)
		}
	}
	for _, v := range w.rw.header["Trailer"] {
		for _, k := range strings.Split(v, ",") {
			k = http.CanonicalHeaderKey(strings.TrimSpace(k))
			if k != "" {
				add(k, w.rw.header[k])
			}
		}
	}
	return t
}

func statusText(code int) string {
	switch code {
	case 200:
		return "200"
	case 202:
		return "202"
	}
	return strconv.Itoa(code)
}

// lowerKey is the lower-case form of a field name, without an allocation
// for the common ones.
func lowerKey(k string) string {
	if l, ok := lowerKeys[k]; ok {
		return l
	}
	return strings.ToLower(k)
}

var lowerKeys = func() map[string]string {
	m := make(map[string]string, len(commonKeys))
	for l, k := range commonKeys {
		m[k] = l
	}
	for _, k := range []string{"Kn-Forward-Error", "Cache-Control", "Location", "Retry-After", "Server", "Vary"} {
		m[k] = strings.ToLower(k)
	}
	return m
}()
