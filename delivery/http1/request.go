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
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/net/http/httpguts"
)

// defaultUserAgent is what net/http sends when a request names none; a
// request whose User-Agent is "" sends none at all, as with net/http.
const defaultUserAgent = "Go-http-client/1.1"

// outgoing is a request encoded for the wire: its head and, for a body of
// declared length up to ReadAheadMax, the body too, ready for one write.
// A larger body, or one of unknown length, streams after the head.
type outgoing struct {
	buf *[]byte // pooled; nil once released
	// body streams after the head: nil when the body is in buf or absent.
	body    io.ReadCloser
	length  int64 // declared length of a streaming body; -1: chunked
	trailer http.Header
	close   bool // the request asks for the connection to close
	// streaming: the body went to its writer, which closes it.
	streaming bool
}

// replayable reports whether the request can go out again on another
// connection: it is all in buf.
func (o *outgoing) replayable() bool { return o.body == nil }

func (o *outgoing) release() {
	if o.buf != nil {
		putBuf(o.buf)
		o.buf = nil
	}
}

// done ends the request's part in a round trip: its buffer goes back, and
// a body that no writer took is closed.
func (o *outgoing) done() {
	o.release()
	if o.body != nil && !o.streaming {
		_ = o.body.Close()
	}
}

// encode validates req and encodes it; it reads a small body ahead. It
// closes req.Body unless the body is left to stream.
func encode(req *http.Request, host string, readAhead int64) (o *outgoing, err error) {
	body := req.Body
	if body == http.NoBody {
		body = nil
	}
	defer func() {
		if err != nil && body != nil {
			_ = body.Close()
		}
	}()
	method := req.Method
	if method == "" {
		method = http.MethodGet
	}
	if !validToken(method) {
		return nil, fmt.Errorf("http1: invalid method %q", method)
	}
	uri := req.URL.RequestURI()
	if !validRequestURI(uri) {
		return nil, fmt.Errorf("http1: invalid request URI %q", uri)
	}
	if req.Host != "" {
		host = req.Host
	}
	host = removeZone(host)
	if !httpguts.ValidHostHeader(host) {
		return nil, fmt.Errorf("http1: invalid Host header %q", host)
	}
	length := req.ContentLength
	switch {
	case body == nil && length > 0:
		return nil, fmt.Errorf("http1: ContentLength=%d with no body", length)
	case body != nil && length == 0:
		length = -1 // unknown, as net/http reads it
	case body == nil:
		length = 0
	}
	o = &outgoing{length: length, close: req.Close || httpguts.HeaderValuesContainsToken(req.Header["Connection"], "close")}
	if length < 0 && len(req.Trailer) > 0 {
		o.trailer = req.Trailer
	}

	o.buf = getBuf()
	b := (*o.buf)[:0]
	b = append(b, method...)
	b = append(b, ' ')
	b = append(b, uri...)
	b = append(b, " HTTP/1.1\r\nHost: "...)
	b = append(b, host...)
	b = append(b, "\r\n"...)
	if _, ok := req.Header["User-Agent"]; !ok {
		b = append(b, "User-Agent: "+defaultUserAgent+"\r\n"...)
	}
	for k, vv := range req.Header {
		if skipHeader(k) {
			continue
		}
		if !httpguts.ValidHeaderFieldName(k) {
			o.release()
			return nil, fmt.Errorf("http1: invalid header field name %q", k)
		}
		for _, v := range vv {
			if !httpguts.ValidHeaderFieldValue(v) {
				o.release()
				return nil, fmt.Errorf("http1: invalid header field value for %q", k)
			}
			if v == "" && k == "User-Agent" {
				continue
			}
			b = appendField(b, k, v)
		}
	}
	if o.close && !httpguts.HeaderValuesContainsToken(req.Header["Connection"], "close") {
		b = append(b, "Connection: close\r\n"...)
	}
	switch {
	case length > 0:
		b = append(b, "Content-Length: "...)
		b = strconv.AppendInt(b, length, 10)
		b = append(b, "\r\n"...)
	case length < 0:
		b = append(b, "Transfer-Encoding: chunked\r\n"...)
		if o.trailer != nil {
			names := make([]string, 0, len(o.trailer))
			for k := range o.trailer {
				if !httpguts.ValidHeaderFieldName(k) {
					o.release()
					return nil, fmt.Errorf("http1: invalid trailer field name %q", k)
				}
				names = append(names, k)
			}
			b = appendField(b, "Trailer", strings.Join(names, ", "))
		}
	case method != http.MethodGet && method != http.MethodHead:
		b = append(b, "Content-Length: 0\r\n"...) // as net/http: servers expect it
	}
	b = append(b, "\r\n"...)

	if body != nil && length > 0 && length <= readAhead {
		start := len(b)
		b = grow(b, int(length))
		n, err := io.ReadFull(body, b[start:])
		_ = body.Close()
		body = nil
		if err != nil {
			*o.buf = b
			o.release()
			if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
				return nil, fmt.Errorf("http1: the request body ended after %d of its declared %d bytes: %w", n, length, io.ErrUnexpectedEOF)
			}
			return nil, err
		}
	}
	*o.buf = b
	o.body = body
	return o, nil
}

// skipHeader: framing and Host come from the request's fields, not its
// map, under whatever case a key was set with (a key set straight into the
// map is not canonicalised): a second Content-Length or Transfer-Encoding
// would let the destination read the request's end elsewhere.
func skipHeader(k string) bool {
	switch len(k) {
	case len("Host"):
		return strings.EqualFold(k, "Host")
	case len("Trailer"):
		return strings.EqualFold(k, "Trailer")
	case len("Content-Length"):
		return strings.EqualFold(k, "Content-Length")
	case len("Transfer-Encoding"):
		return strings.EqualFold(k, "Transfer-Encoding")
	}
	return false
}

func appendField(b []byte, k, v string) []byte {
	b = append(b, k...)
	b = append(b, ": "...)
	b = append(b, strings.TrimSpace(v)...)
	return append(b, "\r\n"...)
}

func grow(b []byte, n int) []byte {
	if cap(b)-len(b) < n {
		nb := make([]byte, len(b), len(b)+n)
		copy(nb, b)
		b = nb
	}
	return b[:len(b)+n]
}

func validToken(s string) bool {
	return s != "" && strings.IndexFunc(s, func(r rune) bool { return !httpguts.IsTokenRune(r) }) < 0
}

// validRequestURI refuses what would break the request line: spaces,
// control bytes, nothing at all.
func validRequestURI(s string) bool {
	if s == "" {
		return false
	}
	for i := range len(s) {
		if c := s[i]; c <= ' ' || c == 0x7f {
			return false
		}
	}
	return true
}

// removeZone drops an IPv6 zone from a Host header: it names an interface
// of this host, nothing the destination can use.
func removeZone(host string) string {
	if !strings.HasPrefix(host, "[") {
		return host
	}
	i := strings.LastIndex(host, "]")
	if i < 0 {
		return host
	}
	j := strings.LastIndex(host[:i], "%")
	if j < 0 {
		return host
	}
	return host[:j] + host[i:]
}

// Request heads are encoded into pooled buffers, released once written.
const (
	bufInitial = 1 << 10
	bufKeepMax = 64 << 10 // larger buffers are left to the collector
)

var bufPool = sync.Pool{New: func() any { b := make([]byte, 0, bufInitial); return &b }}

func getBuf() *[]byte { return bufPool.Get().(*[]byte) }

func putBuf(b *[]byte) {
	if cap(*b) > bufKeepMax {
		return
	}
	*b = (*b)[:0]
	bufPool.Put(b)
}

// streamChunk is the part of a streaming body read and written at once.
const streamChunk = 16 << 10

// writeBody streams o's body to w: exactly its declared length, or in
// chunks with the trailers after. The body is closed when it returns. A
// body error is returned as a *bodyError, so that the call reports the
// caller's side as the cause rather than the connection.
func (o *outgoing) writeBody(w io.Writer) error {
	defer o.body.Close()
	buf := getBuf()
	defer putBuf(buf)
	const prefix = 18 // room for a chunk's size line: 16 hex digits and CRLF
	b := grow((*buf)[:0], prefix+streamChunk+2)
	*buf = b[:0]
	var sent int64
	for {
		p := b[prefix : prefix+streamChunk]
		if o.length > 0 {
			if rem := o.length - sent; int64(len(p)) > rem {
				p = p[:rem]
			}
		}
		n, rerr := 0, error(nil)
		if len(p) > 0 {
			n, rerr = o.body.Read(p)
		}
		if n > 0 {
			sent += int64(n)
			out := b[prefix : prefix+n]
			if o.length < 0 {
				size := strconv.AppendUint(b[:0:prefix], uint64(n), 16)
				start := prefix - len(size) - 2
				copy(b[start:], size)
				b[prefix-2], b[prefix-1] = '\r', '\n'
				out = append(b[start:prefix+n], '\r', '\n')
			}
			if _, err := w.Write(out); err != nil {
				return err
			}
		}
		switch {
		case o.length > 0 && sent == o.length:
			return nil
		case errors.Is(rerr, io.EOF) && o.length > 0:
			return &bodyError{fmt.Errorf("http1: the request body ended after %d of its declared %d bytes: %w", sent, o.length, io.ErrUnexpectedEOF)}
		case errors.Is(rerr, io.EOF):
			return o.writeLastChunk(w)
		case rerr != nil:
			return &bodyError{rerr}
		}
	}
}

func (o *outgoing) writeLastChunk(w io.Writer) error {
	b := []byte("0\r\n")
	for k, vv := range o.trailer {
		for _, v := range vv {
			if !httpguts.ValidHeaderFieldValue(v) {
				return &bodyError{fmt.Errorf("http1: invalid trailer field value for %q", k)}
			}
			b = appendField(b, k, v)
		}
	}
	b = append(b, "\r\n"...)
	_, err := w.Write(b)
	return err
}

// bodyError is an error of the request body's own: the caller's side.
type bodyError struct{ err error }

func (e *bodyError) Error() string { return e.err.Error() }
func (e *bodyError) Unwrap() error { return e.err }
