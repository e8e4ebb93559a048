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

package http1

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// max1xx bounds the interim answers (100 Continue, 103 Early Hints)
// skipped before the final one, as net/http does.
const max1xx = 5

// errNothingWritten: the connection failed before any byte of the request
// left, so the request can go out on another one.
var errNothingWritten = errors.New("http1: the connection broke before the request went out")

// errClosedBody is what reading an answer's body returns once it is closed.
var errClosedBody = errors.New("http1: read on a closed answer body")

// aLongTimeAgo is a deadline that has passed: setting it wakes a blocked
// read or write at once.
var aLongTimeAgo = time.Unix(1, 0)

// conn is one connection to a destination. It serves one call at a time;
// between calls it waits in its Transport's idle pool.
type conn struct {
	t   *Transport
	key string // host:port
	nc  net.Conn
	raw syscall.RawConn // nil: wait in ordinary reads
	// peekRaw looks at an idle connection, through wrappers; nil: idle
	// connections are taken as open.
	peekRaw syscall.RawConn
	src     source
	br      *bufio.Reader // pooled: set from the answer's first byte to its end
	// reused: the connection served a call before this one.
	reused    bool
	idle      bool // in the idle pool; guarded by t.mu
	idleTimer *time.Timer
	peek      [1]byte
}

func newConn(t *Transport, key string, nc net.Conn) *conn {
	c := &conn{t: t, key: key, nc: nc, raw: rawConn(nc, false), peekRaw: rawConn(nc, true)}
	c.src = source{c: c, fd: -1}
	return c
}

// interrupt wakes whatever waits on the connection; it is then not reused.
func (c *conn) interrupt() { _ = c.nc.SetDeadline(aLongTimeAgo) }

// expire closes c when its idle time is up.
func (c *conn) expire() {
	if c.t.removeIdle(c) {
		_ = c.nc.Close()
	}
}

// roundTrip runs one call on c. On errNothingWritten the request's buffer
// is kept, for another connection.
func (c *conn) roundTrip(ctx context.Context, req *http.Request, o *outgoing) (*http.Response, error) {
	stop := context.AfterFunc(ctx, c.interrupt)
	n, err := c.nc.Write(*o.buf)
	if err != nil {
		stop()
		_ = c.nc.Close()
		if n == 0 && ctx.Err() == nil {
			return nil, fmt.Errorf("%w: %w", errNothingWritten, err)
		}
		return nil, c.callErr(ctx, err)
	}
	o.release() // a held call keeps no copy of its request
	var w *bodyWriter
	if o.body != nil {
		o.streaming = true
		w = c.writeBody(o)
	}
	resp, err := c.readHead(req)
	if err != nil {
		_ = c.nc.Close() // and the body's writer stops
		stop()
		if c.br != nil {
			putReader(c.br)
			c.br = nil
		}
		berr := w.bodyFailed()
		w.abort()
		if berr != nil {
			return nil, berr.err // the caller's body failed the call
		}
		return nil, c.callErr(ctx, err)
	}
	b := &body{c: c, rc: resp.Body, ctx: ctx, stop: stop, w: w,
		keep: !resp.Close && !o.close && resp.StatusCode != http.StatusSwitchingProtocols}
	if resp.Body == http.NoBody {
		b.finish(true)
		return resp, nil
	}
	resp.Body = b
	return resp, nil
}

// cut returns why ctx cut a call: its error, or DeadlineExceeded as soon
// as its deadline has passed, which the network reports a moment before
// the context does.
func cut(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if d, ok := ctx.Deadline(); ok && !time.Now().Before(d) {
		return context.DeadlineExceeded
	}
	return nil
}

// callErr explains err, met by a call under ctx: the context's own error
// when it was cut, the head limit when that was hit.
func (c *conn) callErr(ctx context.Context, err error) error {
	if cerr := cut(ctx); cerr != nil {
		return fmt.Errorf("http1: the call was cut: %w", cerr)
	}
	if c.src.hitLimit {
		return fmt.Errorf("%w (%d bytes)", ErrResponseHeaderTooLarge, orDefault(c.t.MaxResponseHeaderBytes, 64<<10))
	}
	return err
}

// readHead reads the answer's status line and headers, skipping interim
// answers.
func (c *conn) readHead(req *http.Request) (*http.Response, error) {
	limit := orDefault(c.t.MaxResponseHeaderBytes, 64<<10)
	c.src.limit, c.src.limited = limit, true
	if err := c.await(); err != nil {
		return nil, err
	}
	for i := 0; ; i++ {
		if i > 0 {
			c.src.limit = limit // each interim answer has the whole limit, as in net/http
		}
		resp, err := http.ReadResponse(c.br, req)
		if err != nil {
			return nil, err
		}
		if err := checkFieldNames(resp.Header); err != nil {
			return nil, err
		}
		if resp.StatusCode < 100 {
			// http.ReadResponse takes any three digits; net/http's server
			// would panic writing such a status back.
			return nil, fmt.Errorf("http1: the answer's status %03d is not an HTTP status", resp.StatusCode)
		}
		if resp.StatusCode >= 100 && resp.StatusCode < 200 && resp.StatusCode != http.StatusSwitchingProtocols {
			if i == max1xx {
				return nil, errors.New("http1: too many interim answers")
			}
			continue
		}
		c.src.limited = false
		return resp, nil
	}
}

// ErrMalformedFieldName fails a call whose answer has a header field name
// with whitespace before its colon ("Content-Length : 5").
var ErrMalformedFieldName = errors.New("http1: malformed answer: whitespace between a header field name and its colon")

// checkFieldNames refuses an answer whose head has a field name with
// whitespace before the colon. RFC 9112 section 5.1 has a server reject
// such a request, and a proxy either remove the whitespace from such a
// response or reject it. net/http's client does neither: textproto
// (ReadMIMEHeader, go.dev/issue/34540) keeps the field under its name as
// sent, space included ("Content-Length "), so that it frames nothing and
// the body runs until the destination closes, while the destination
// framed it by the length it meant; net/http's server then drops the
// invalid name when it writes the header. Here the answer is rejected,
// the option net/http's server takes for such a request (400 "invalid
// header name"): the call fails as unreachable, its connection is
// closed, and no framing two parsers could read differently is passed
// on. textproto refuses a tab there itself; a space is all it lets by.
func checkFieldNames(h http.Header) error {
	for k := range h {
		if strings.ContainsAny(k, " \t") {
			return fmt.Errorf("%w: %q", ErrMalformedFieldName, k)
		}
	}
	return nil
}

// bodyWriter streams a large or unknown-length request body while the
// caller waits for the answer: a destination may answer before it has
// read the whole body.
type bodyWriter struct {
	body io.Closer
	done chan struct{}
	err  error
	// failed is the body's own error, set before the writer wakes the
	// reader with it.
	failed atomic.Pointer[bodyError]
}

func (c *conn) writeBody(o *outgoing) *bodyWriter {
	w := &bodyWriter{body: o.body, done: make(chan struct{})}
	go func() {
		defer close(w.done)
		w.err = o.writeBody(c.nc)
		var berr *bodyError
		if errors.As(w.err, &berr) {
			w.failed.Store(berr)
			c.interrupt() // the call cannot go on: wake the reader
		}
	}()
	return w
}

// bodyFailed returns the body's own error, if it ended the call. It does
// not wait: a writer blocked on a slow caller must not hold up the answer.
func (w *bodyWriter) bodyFailed() *bodyError {
	if w == nil {
		return nil
	}
	return w.failed.Load()
}

// abort ends a body that is still being written: the call is over, so the
// body is closed (as a RoundTripper must), which also ends a read of it
// that waits for a slow caller. The connection is closed by then, which
// ends a write.
func (w *bodyWriter) abort() {
	if w == nil {
		return
	}
	select {
	case <-w.done:
	default:
		_ = w.body.Close()
	}
}

// finished reports whether the whole body went out.
func (w *bodyWriter) finished() bool {
	select {
	case <-w.done:
		return w.err == nil
	default:
		return false
	}
}

// release ends a call on c: the connection goes back to the pool or is
// closed.
func (c *conn) release(reuse bool) {
	if c.br != nil {
		if c.br.Buffered() > 0 {
			reuse = false // bytes beyond the answer: the stream is out of step
		}
		putReader(c.br)
		c.br = nil
	}
	if reuse {
		c.t.putIdle(c)
		return
	}
	_ = c.nc.Close()
}

// body is an answer's body. The connection returns to the pool when the
// body ends; closed before that, the connection closes.
type body struct {
	c    *conn
	rc   io.ReadCloser
	ctx  context.Context
	stop func() bool
	w    *bodyWriter
	keep bool // the connection may serve another call

	mu      sync.Mutex
	reading bool
	closed  bool
	done    bool
	err     error // sticky, once the body ended or failed
}

func (b *body) Read(p []byte) (int, error) {
	b.mu.Lock()
	switch {
	case b.err != nil:
		err := b.err
		b.mu.Unlock()
		return 0, err
	case b.closed:
		b.mu.Unlock()
		return 0, errClosedBody
	}
	b.reading = true
	b.mu.Unlock()

	n, err := b.rc.Read(p)

	b.mu.Lock()
	defer b.mu.Unlock()
	b.reading = false
	switch {
	case b.closed: // closed while this read ran: the cleanup is ours
		b.finishLocked(false)
		return n, errClosedBody
	case errors.Is(err, io.EOF):
		b.err = io.EOF
		b.finishLocked(true)
	case err != nil:
		err = b.c.callErr(b.ctx, err)
		b.err = err
		b.finishLocked(false)
	}
	return n, err
}

func (b *body) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil
	}
	b.closed = true
	if b.reading {
		b.c.interrupt() // the read under way ends, and finishes the call
		return nil
	}
	b.finishLocked(false)
	return nil
}

func (b *body) finish(reuse bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.finishLocked(reuse)
}

func (b *body) finishLocked(reuse bool) {
	if b.done {
		return
	}
	b.done = true
	cut := !b.stop() // the context's interrupt ran, or runs
	reuse = reuse && b.keep && !cut && (b.w == nil || b.w.finished())
	b.c.release(reuse)
	if !reuse {
		b.w.abort() // an answer that came before the whole request went out
	}
}

// source feeds a connection's read buffer: from the socket itself while
// a call waits for the first byte of its answer (fd ≥ 0, never blocking),
// from the connection otherwise. While limited, it fails once the answer's
// head has taken limit bytes.
type source struct {
	c        *conn
	fd       int
	limit    int64
	limited  bool
	hitLimit bool
}

// errWouldBlock: nothing to read yet.
var errWouldBlock = errors.New("http1: would block")

func (s *source) Read(p []byte) (int, error) {
	if s.limited {
		if s.limit <= 0 {
			s.hitLimit = true
			return 0, ErrResponseHeaderTooLarge
		}
		if int64(len(p)) > s.limit {
			p = p[:s.limit]
		}
	}
	var n int
	var err error
	if s.fd >= 0 {
		n, err = readNonblocking(s.fd, p)
	} else {
		n, err = s.c.nc.Read(p)
	}
	s.limit -= int64(n)
	return n, err
}

// await waits until the destination's first byte of an answer is there,
// then gives c a read buffer holding it. The wait itself holds no buffer:
// a read is tried only when the socket is readable, with a buffer taken
// from the pool for that try and given back if it found nothing.
func (c *conn) await() error {
	if c.raw == nil {
		c.br = getReader(&c.src)
		return nil
	}
	var rerr error
	err := c.raw.Read(func(fd uintptr) bool {
		br := getReader(&c.src)
		c.src.fd = int(fd)
		_, rerr = br.Peek(1)
		c.src.fd = -1
		if errors.Is(rerr, errWouldBlock) {
			putReader(br)
			return false // wait until readable
		}
		c.br = br
		return true
	})
	switch {
	case err != nil:
		return err
	case rerr == io.EOF:
		return fmt.Errorf("http1: the destination closed the connection before answering: %w", io.ErrUnexpectedEOF)
	}
	return rerr
}

var readerPool sync.Pool

func getReader(r io.Reader) *bufio.Reader {
	if br, ok := readerPool.Get().(*bufio.Reader); ok {
		br.Reset(r)
		return br
	}
	return bufio.NewReaderSize(r, 4<<10)
}

func putReader(br *bufio.Reader) {
	br.Reset(nil)
	readerPool.Put(br)
}
