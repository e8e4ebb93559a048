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

package proxy

import (
	"bytes"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
)

// headerFramingError marks a request whose framing the framing listener
// found ambiguous; the request guard refuses it. The listener adds it to the
// request's headers before the server parses them, so a caller that sends
// it itself only gets its own request refused.
const headerFramingError = "Kn-Forward-Framing-Error"

// Why a request's framing is refused, as written into headerFramingError.
const (
	framingBareLF         = "a header line ends with a bare LF"
	framingLengthAndChunk = "both Content-Length and Transfer-Encoding"
	framingHTTP10Chunked  = "Transfer-Encoding in an HTTP/1.0 request"
)

// NewFramingListener wraps ln so that the head of every HTTP/1.x request is
// checked before the server parses it, for the framing shapes Go's server
// accepts but a proxy in front of it may read differently (request
// smuggling): a line that ends with a bare LF, both Content-Length and
// Transfer-Encoding, and Transfer-Encoding in an HTTP/1.0 request. Such a
// request gets headerFramingError, which the request guard answers with 400
// bad_request, closing the connection. Go's server itself refuses
// conflicting Content-Length values, unknown transfer codings, bare CR and
// spaces in header names. HTTP/2 connections (h2c) pass untouched.
// maxHeaderBytes is the server's MaxHeaderBytes: a longer head is passed on
// unchecked, for the server to refuse.
func NewFramingListener(ln net.Listener, maxHeaderBytes int) net.Listener {
	if maxHeaderBytes <= 0 {
		maxHeaderBytes = 1 << 20
	}
	// Go's server reads up to MaxHeaderBytes plus 4096 bytes of slack.
	return &framingListener{Listener: ln, maxHead: maxHeaderBytes + 4096 + 1}
}

type framingListener struct {
	net.Listener
	maxHead int
}

func (l *framingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &framingConn{Conn: c, f: framer{maxHead: l.maxHead}}, nil
}

// framingConn passes the bytes of a request head on line by line, once
// each line has ended and been looked at; body bytes flow straight through.
// Only the server's connection reader calls Read, one call at a time.
type framingConn struct {
	net.Conn
	f    framer
	buf  []byte
	sent int   // bytes of f.out already returned
	rerr error // a read error held back until the bytes before it are read
}

func (c *framingConn) Read(p []byte) (int, error) {
	for len(c.f.out) == c.sent {
		c.f.out, c.sent = c.f.out[:0], 0
		switch {
		case c.rerr != nil:
			err := c.rerr
			c.rerr = nil
			return 0, err
		case c.f.mode == modePass && len(c.f.line) == 0:
			return c.Conn.Read(p)
		case c.f.mode == modeBody || c.f.mode == modeChunkData:
			// Straight into the caller's buffer, up to the body's end.
			n, err := c.Conn.Read(p[:min(int64(len(p)), c.f.remain)])
			c.f.feedDirect(n)
			return n, err
		}
		if c.buf == nil {
			c.buf = make([]byte, 4096)
		}
		n, err := c.Conn.Read(c.buf)
		c.f.feed(c.buf[:n])
		if err != nil {
			c.rerr = err
		}
	}
	n := copy(p, c.f.out[c.sent:])
	c.sent += n
	return n, nil
}

// framing modes: what the next bytes of the connection are.
type framingMode int

const (
	modeHead      framingMode = iota // request-head lines
	modeBody                         // remain bytes of body
	modeChunkSize                    // a chunk-size line
	modeChunkData                    // remain bytes of chunk data, then CRLF
	modeChunkCRLF                    // the CRLF after chunk data
	modeTrailer                      // trailer lines up to an empty one
	modePass                         // no longer followed: HTTP/2, or the server refuses what came
)

// framer follows the HTTP/1.1 framing of one connection's requests. Bytes
// go out as soon as the line they end is known; the mark of a bad head goes
// out just before the blank line that ends it, so the server, which parses
// line by line, reads it as one more header.
type framer struct {
	maxHead int
	mode    framingMode
	remain  int64
	line    []byte // the line being read
	out     []byte // bytes followed and ready for the server
	head    headState
}

// headState is what the framer learnt of the head being read.
type headState struct {
	lines, size    int
	bareLF, http10 bool
	cl, te         []string
	last           *[]string // the header a folded line continues
}

// feed follows b and appends it to out.
func (f *framer) feed(b []byte) {
	for len(b) > 0 {
		switch f.mode {
		case modePass:
			f.out = append(f.out, b...)
			return
		case modeBody, modeChunkData:
			n := int(min(int64(len(b)), f.remain))
			f.out = append(f.out, b[:n]...)
			b = b[n:]
			f.feedDirect(n)
		case modeChunkCRLF:
			f.out = append(f.out, b[0])
			f.line = append(f.line, b[0])
			b = b[1:]
			if len(f.line) == 2 {
				f.mode = modeChunkSize
				if string(f.line) != "\r\n" {
					f.mode = modePass // the server fails the body
				}
				f.line = f.line[:0]
			}
		default:
			i := bytes.IndexByte(b, '\n')
			if i < 0 {
				f.line = append(f.line, b...)
				if len(f.line) > f.maxLine() {
					f.out = append(f.out, f.line...)
					f.line, f.mode = nil, modePass // the server refuses it
				}
				return
			}
			f.line = append(f.line, b[:i+1]...)
			b = b[i+1:]
			f.endLine()
			f.line = f.line[:0]
		}
	}
}

// feedDirect follows n bytes of body or chunk data that went to the server
// without passing through out.
func (f *framer) feedDirect(n int) {
	f.remain -= int64(n)
	switch {
	case f.remain > 0:
	case f.mode == modeBody:
		f.mode = modeHead
	default:
		f.mode = modeChunkCRLF
	}
}

// maxLine is the longest line the server could accept now.
func (f *framer) maxLine() int {
	if f.mode == modeHead {
		return f.maxHead - f.head.size
	}
	return 4096 // Go's longest chunk-size or trailer line
}

// endLine follows the complete line in f.line.
func (f *framer) endLine() {
	l := f.line
	switch f.mode {
	case modeChunkSize:
		f.out = append(f.out, l...)
		f.chunkSize(l)
	case modeTrailer:
		f.out = append(f.out, l...)
		if isBlankLine(l) {
			f.mode = modeHead
		}
	case modeHead:
		f.headLine(l)
	}
}

func isBlankLine(l []byte) bool { return string(l) == "\n" || string(l) == "\r\n" }

// headLine follows one line of a request head.
func (f *framer) headLine(l []byte) {
	h := &f.head
	h.lines++
	h.size += len(l)
	if len(l) < 2 || l[len(l)-2] != '\r' {
		h.bareLF = true
	}
	text := strings.TrimRight(string(l), "\r\n")
	switch {
	case h.lines == 1 && text == "PRI * HTTP/2.0":
		f.out = append(f.out, l...)
		f.mode = modePass // h2c with prior knowledge
		return
	case h.lines == 1:
		f.out = append(f.out, l...)
		h.http10 = strings.HasSuffix(text, " HTTP/1.0")
		if text == "" {
			f.mode = modePass // the server refuses an empty request line
		}
		return
	case text != "":
		f.out = append(f.out, l...)
		h.header(text)
		return
	}
	why := ""
	switch {
	case h.bareLF:
		why = framingBareLF
	case len(h.te) > 0 && len(h.cl) > 0:
		why = framingLengthAndChunk
	case len(h.te) > 0 && h.http10:
		why = framingHTTP10Chunked
	}
	if why != "" {
		// What follows is not worth following: the guard closes the
		// connection after its answer.
		f.out = append(f.out, headerFramingError+": "+why+"\r\n"...)
		f.out = append(f.out, l...)
		f.mode = modePass
		return
	}
	f.out = append(f.out, l...)
	f.body(h)
	f.head = headState{}
}

// header records a Content-Length or Transfer-Encoding line, or continues
// the previous one (obs-fold, which Go's server joins).
func (h *headState) header(text string) {
	if text[0] == ' ' || text[0] == '\t' {
		if h.last != nil && len(*h.last) > 0 {
			(*h.last)[len(*h.last)-1] += " " + strings.TrimSpace(text)
		}
		return
	}
	name, value, _ := strings.Cut(text, ":")
	h.last = nil
	switch {
	case strings.EqualFold(name, "Content-Length"):
		h.cl = append(h.cl, strings.TrimSpace(value))
		h.last = &h.cl
	case strings.EqualFold(name, "Transfer-Encoding"):
		h.te = append(h.te, strings.TrimSpace(value))
		h.last = &h.te
	}
}

// body sets the framer up for the body of a head without ambiguity, as
// Go's server reads it.
func (f *framer) body(h *headState) {
	switch {
	case len(h.te) > 0:
		f.mode = modePass // the server answers 501 and closes
		if len(h.te) == 1 && strings.EqualFold(strings.TrimSpace(h.te[0]), "chunked") {
			f.mode = modeChunkSize
		}
	case len(h.cl) > 0:
		n, err := strconv.ParseUint(h.cl[0], 10, 63)
		switch {
		case err != nil || len(h.cl) > 1:
			f.mode = modePass // the server refuses it, or reads the first of equal values
			if err == nil && allEqual(h.cl) {
				f.mode, f.remain = modeBody, int64(n)
			}
		case n > 0:
			f.mode, f.remain = modeBody, int64(n)
		}
		if f.mode == modeBody && f.remain == 0 {
			f.mode = modeHead
		}
	}
}

func allEqual(vs []string) bool {
	for _, v := range vs[1:] {
		if v != vs[0] {
			return false
		}
	}
	return true
}

// chunkSize reads a chunk-size line as Go's chunked reader does.
func (f *framer) chunkSize(l []byte) {
	if !bytes.HasSuffix(l, []byte("\r\n")) {
		f.mode = modePass // bare LF: the server fails the body
		return
	}
	s := string(l[:len(l)-2])
	s, _, _ = strings.Cut(s, ";")
	s = strings.TrimRight(s, " \t")
	n, err := strconv.ParseUint(s, 16, 63)
	switch {
	case err != nil || len(s) > 16:
		f.mode = modePass // the server fails the body
	case n == 0:
		f.mode = modeTrailer
	default:
		f.mode, f.remain = modeChunkData, int64(n)
	}
}

// isMalformedBody reports whether err, from reading a request body, says
// the body was badly framed (Go's chunked reader refuses a bad chunk)
// rather than cut short by the caller going away.
func isMalformedBody(err error) bool {
	var ne net.Error
	switch {
	case err == nil, errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, net.ErrClosed), errors.Is(err, http.ErrBodyReadAfterClose), errors.As(err, &ne):
		return false
	default:
		return true
	}
}
