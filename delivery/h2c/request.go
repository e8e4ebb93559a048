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

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/net/http/httpguts"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"knative.dev/event-forwarding-proxy/internal/h2conn"
)

// readAheadMax is the largest declared body read before the call goes
// out: it leaves with the HEADERS in one write, and the call can go out
// again if the destination refuses its stream.
const readAheadMax = 16 << 10

// outgoing is a validated request.
type outgoing struct {
	req       *http.Request
	method    string
	authority string
	path      string
	// length is the declared body length; -1 unknown, 0 none.
	length int64
	// data is a body read ahead; body one that streams.
	data []byte
	body io.ReadCloser
	// streaming: the body went to its writer, which closes it.
	streaming bool
	trailers  bool  // the request's Te lists trailers
	attempt   uint8 // a Go call's attempts that failed so far
	// answered gets a Go call's answer or error (Transport.Go).
	answered func(*http.Response, error)
	// headerSize is the header list's size as HTTP/2 counts it.
	headerSize int64
}

func (o *outgoing) hasBody() bool { return o.data != nil || o.body != nil }

// replayable: the request can go out again; its body, if any, is in data.
func (o *outgoing) replayable() bool { return o.body == nil }

// done closes a body no writer took.
func (o *outgoing) done() {
	if o.body != nil && !o.streaming {
		_ = o.body.Close()
	}
}

// newOutgoing validates req and reads a small body ahead. It closes
// req.Body unless the body is left to stream.
func newOutgoing(req *http.Request) (o *outgoing, err error) {
	body := req.Body
	if body == http.NoBody {
		body = nil
	}
	defer func() {
		if err != nil && body != nil {
			_ = body.Close()
		}
	}()
	if req.URL == nil || req.URL.Scheme != "http" {
		return nil, errors.New("h2c: only http:// destinations speak h2c")
	}
	o = &outgoing{req: req, method: req.Method, authority: req.Host, path: req.URL.RequestURI(), length: req.ContentLength}
	if o.method == "" {
		o.method = http.MethodGet
	}
	if o.authority == "" {
		o.authority = req.URL.Host
	}
	switch {
	case !httpguts.ValidHostHeader(o.authority) || o.authority == "":
		return nil, fmt.Errorf("h2c: invalid host %q", o.authority)
	case !validMethod(o.method):
		return nil, fmt.Errorf("h2c: invalid method %q", o.method)
	case strings.ContainsAny(o.path, " \t\r\n"):
		return nil, fmt.Errorf("h2c: invalid request path %q", o.path)
	}
	if err := validFields(req.Header); err != nil {
		return nil, err
	}
	if err := validFields(req.Trailer); err != nil {
		return nil, err
	}
	switch {
	case body == nil && o.length > 0:
		return nil, fmt.Errorf("h2c: ContentLength=%d with no body", o.length)
	case body != nil && o.length == 0:
		o.length = -1
	case body == nil:
		o.length = 0
	}
	o.trailers = httpguts.HeaderValuesContainsToken(req.Header["Te"], "trailers")
	if b, ok := body.(wholeBody); ok && int64(len(b.Bytes())) == o.length && o.length <= readAheadMax && len(req.Trailer) == 0 {
		// Its bytes are there already: a held call keeps them once.
		o.data = b.Bytes()
		_ = body.Close()
		body = nil
	}
	if body != nil && o.length > 0 && o.length <= readAheadMax && len(req.Trailer) == 0 {
		o.data = make([]byte, o.length)
		n, err := io.ReadFull(body, o.data)
		_ = body.Close()
		body = nil
		if err != nil {
			if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
				return nil, fmt.Errorf("h2c: the request body ended after %d of its declared %d bytes: %w", n, o.length, io.ErrUnexpectedEOF)
			}
			return nil, err
		}
	}
	o.body = body
	o.encodeHeaders(func(name, value string) {
		o.headerSize += int64(len(name) + len(value) + 32)
	})
	return o, nil
}

// wholeBody is a request body that has all its bytes at hand (the
// proxy's async events), which must not change while the call lasts: a
// small one is sent from them rather than read into a copy.
type wholeBody interface {
	io.ReadCloser
	Bytes() []byte
}

func validMethod(m string) bool {
	for i := range len(m) {
		if !httpguts.IsTokenRune(rune(m[i])) {
			return false
		}
	}
	return m != ""
}

// encodeHeaders emits the request's header list: pseudo-headers first,
// connection-specific fields left out (RFC 9113 8.2.2), content-length
// from the request's length. Names come as the request has them: the
// encoder lower-cases them (writeHeaderBlock), the size count needs only
// their length, so counting allocates nothing.
func (o *outgoing) encodeHeaders(emit func(name, value string)) {
	emit(":method", o.method)
	emit(":scheme", "http")
	emit(":authority", o.authority)
	emit(":path", o.path)
	for k, vv := range o.req.Header {
		if skipHeader(k) {
			continue
		}
		ua := len(k) == len("User-Agent") && strings.EqualFold(k, "User-Agent")
		for _, v := range vv {
			if v == "" && ua {
				continue
			}
			emit(k, strings.Trim(v, " \t"))
		}
	}
	if o.trailers {
		emit("te", "trailers")
	}
	if o.body != nil && len(o.req.Trailer) > 0 {
		emit("trailer", o.trailerNames())
	}
	switch {
	case o.length > 0:
		emit("content-length", strconv.FormatInt(o.length, 10))
	case o.length == 0 && (o.method == http.MethodPost || o.method == http.MethodPut || o.method == http.MethodPatch):
		emit("content-length", "0")
	}
}

// trailerNames lists the trailers the request announces. It is apart from
// encodeHeaders, whose frame is on the way to the call's deepest point, the
// hpack encoder's table (docs/benchmarks.md).
func (o *outgoing) trailerNames() string {
	names := make([]string, 0, len(o.req.Trailer))
	for k := range o.req.Trailer {
		names = append(names, lowerName(k))
	}
	return strings.Join(names, ", ")
}

// skipHeader: fields HTTP/2 forbids or that come from the request's own
// fields, under whatever case the key was set with.
func skipHeader(k string) bool {
	for _, s := range &skippedHeaders {
		if len(k) == len(s) && strings.EqualFold(k, s) {
			return true
		}
	}
	return false
}

// skippedHeaders is a variable, not a literal in skipHeader: inlined, a
// literal array would be copied into the caller's frame.
var skippedHeaders = [...]string{"Connection", "Keep-Alive", "Proxy-Connection", "Transfer-Encoding", "Upgrade", "Host", "Content-Length", "Te", "Trailer"}

// lowerName lower-cases a header name; common names cost no allocation.
func lowerName(k string) string {
	if v, ok := commonLower[k]; ok {
		return v
	}
	return strings.ToLower(k)
}

var commonLower = func() map[string]string {
	m := map[string]string{}
	for _, k := range []string{
		"Accept", "Accept-Encoding", "Accept-Language", "Authorization", "Cache-Control", "Cdn-Loop",
		"Content-Encoding", "Content-Type", "Cookie", "Date", "Forwarded", "Prefer", "Traceparent",
		"Tracestate", "Baggage", "User-Agent", "X-Forwarded-For", "X-Forwarded-Host", "X-Forwarded-Proto",
		"X-Request-Id", "Ce-Id", "Ce-Source", "Ce-Specversion", "Ce-Type", "Ce-Subject", "Ce-Time",
		"Ce-Dataschema", "Kn-Forward-To",
	} {
		m[k] = strings.ToLower(k)
	}
	return m
}()

func hpackField(name, value string) hpack.HeaderField {
	return hpack.HeaderField{Name: name, Value: value, Sensitive: name == "authorization" || name == "cookie"}
}

// hostPort is the address to dial for u: its host with port 80 when it
// names none.
func hostPort(u *url.URL) string {
	if u.Port() != "" {
		return u.Host
	}
	return net.JoinHostPort(u.Hostname(), "80")
}

// bodyBuffers lends the body writers their read buffers.
var bodyBuffers = sync.Pool{New: func() any { return new([h2conn.InitialFrame]byte) }}

// writeBody sends a body that streams, in DATA frames within the windows
// the destination grants, then its trailers. It runs on a goroutine of its
// own, for the time the body takes; a failure ends the stream.
func (s *stream) writeBody(ctx context.Context, o *outgoing) {
	c := s.c
	defer func() {
		if o.body != nil {
			_ = o.body.Close()
		}
	}()
	// A caller leaving must wake a writer waiting for window.
	stop := context.AfterFunc(ctx, func() {
		c.mu.Lock()
		c.cond.Broadcast()
		c.mu.Unlock()
	})
	defer stop()
	var err error
	if o.data != nil {
		err = s.send(ctx, o.data, o.body == nil && len(o.req.Trailer) == 0)
	}
	if err == nil && o.body != nil {
		err = s.copyBody(ctx, o)
	}
	if err == nil && len(o.req.Trailer) > 0 {
		err = s.sendTrailers(o)
	}
	if err != nil {
		c.reset(s, http2.ErrCodeCancel, err)
		return
	}
	c.mu.Lock()
	s.sentEnd = true
	freed := c.finishLocked(s)
	c.mu.Unlock()
	if freed {
		c.t.roomFreed(c.pool)
	}
}

func (s *stream) copyBody(ctx context.Context, o *outgoing) error {
	buf := bodyBuffers.Get().(*[h2conn.InitialFrame]byte)
	defer bodyBuffers.Put(buf)
	var sent int64
	for {
		n, rerr := o.body.Read(buf[:])
		sent += int64(n)
		if o.length >= 0 && sent > o.length {
			return fmt.Errorf("h2c: the request body is longer than its declared %d bytes", o.length)
		}
		eof := errors.Is(rerr, io.EOF)
		if eof && o.length >= 0 && sent != o.length {
			return fmt.Errorf("h2c: the request body ended after %d of its declared %d bytes: %w", sent, o.length, io.ErrUnexpectedEOF)
		}
		last := eof && len(o.req.Trailer) == 0
		if n > 0 || last {
			if err := s.send(ctx, buf[:n], last); err != nil {
				return err
			}
		}
		switch {
		case eof:
			return nil
		case rerr != nil:
			return fmt.Errorf("h2c: reading the request body: %w", rerr)
		}
	}
}

// send writes data as DATA frames, waiting for window as needed.
func (s *stream) send(ctx context.Context, data []byte, end bool) error {
	c := s.c
	for first := true; first || len(data) > 0; first = false {
		c.mu.Lock()
		for (s.sendWindow <= 0 || c.sendWindow <= 0) && len(data) > 0 && !s.gone && !c.broken && ctx.Err() == nil {
			c.cond.Wait()
		}
		switch {
		case s.gone:
			err := s.err
			c.mu.Unlock()
			if err == nil {
				err = errors.New("h2c: the stream ended before its body was sent")
			}
			return err
		case c.broken:
			err := c.err
			c.mu.Unlock()
			return err
		case ctx.Err() != nil:
			c.mu.Unlock()
			return ctx.Err()
		}
		n := int64(min(len(data), int(c.ctl.Peer.MaxFrame.Load())))
		n = min(n, s.sendWindow, c.sendWindow)
		if len(data) == 0 {
			n = 0
		}
		s.sendWindow -= n
		c.sendWindow -= n
		c.mu.Unlock()
		chunk := data[:n]
		data = data[n:]
		if err := c.write(func() error { return c.w.FR.WriteData(s.id, end && len(data) == 0, chunk) }); err != nil {
			return err
		}
	}
	return nil
}

// sendTrailers ends the stream with the request's trailers.
func (s *stream) sendTrailers(o *outgoing) error {
	c := s.c
	maxFrame := int(c.ctl.Peer.MaxFrame.Load())
	if err := validFields(o.req.Trailer); err != nil {
		return err
	}
	return c.write(func() error {
		return c.writeHeaderBlock(s.id, true, maxFrame, func(emit func(name, value string)) {
			for k, vv := range o.req.Trailer {
				for _, v := range vv {
					emit(k, strings.Trim(v, " \t"))
				}
			}
		})
	})
}
