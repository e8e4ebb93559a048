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

package http1_test

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"knative.dev/event-forwarding-proxy/delivery/http1"
)

// TestMaxResponseHeaderBytes: an answer's head up to MaxResponseHeaderBytes
// (64 KiB when zero) comes through; a larger one fails the call with
// ErrResponseHeaderTooLarge and its connection is not reused.
func TestMaxResponseHeaderBytes(t *testing.T) {
	srv, _ := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		n, _ := strconv.Atoi(r.URL.Query().Get("n"))
		w.Header().Set("X-Big", strings.Repeat("b", n))
		io.WriteString(w, "body")
	})
	tests := []struct {
		name   string
		limit  int64
		size   int
		wantOK bool
	}{
		{name: "default, under 64 KiB", size: 60 << 10, wantOK: true},
		{name: "default, over 64 KiB", size: 70 << 10},
		{name: "4 KiB, under", limit: 4 << 10, size: 3 << 10, wantOK: true},
		{name: "4 KiB, over", limit: 4 << 10, size: 5 << 10},
		{name: "4 KiB, far over", limit: 4 << 10, size: 1 << 20},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr, _ := newTransport(t, &http1.Transport{MaxResponseHeaderBytes: tt.limit})
			r := call(t, tr, newRequest(t, newCtx(t), "GET", srv.URL+"/?n="+strconv.Itoa(tt.size), nil, 0))
			if !tt.wantOK {
				if !errors.Is(r.RTErr, http1.ErrResponseHeaderTooLarge) {
					t.Errorf("RoundTrip error %v, want ErrResponseHeaderTooLarge", r.RTErr)
				}
				if n := tr.IdleConns(); n != 0 {
					t.Errorf("%d idle connections, want 0", n)
				}
				return
			}
			if err := r.Err(); err != nil {
				t.Fatal(err)
			}
			if len(r.Resp.Header.Get("X-Big")) != tt.size || r.Body != "body" {
				t.Errorf("got %d header bytes and body %q", len(r.Resp.Header.Get("X-Big")), r.Body)
			}
		})
	}
}

// TestRoundTripMalformedAnswers: a malformed answer fails the call or the
// read of its body, by itself (not at the context's deadline), and the
// connection is not reused.
func TestRoundTripMalformedAnswers(t *testing.T) {
	tests := []struct {
		name    string
		answer  string
		closes  bool  // the destination closes after the answer; else it keeps the connection open
		wantErr error // errors.Is target, when it matters
	}{
		{name: "garbage status line", answer: "hello world\r\n\r\n"},
		{name: "unknown protocol", answer: "HTTZ/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"},
		{name: "status code not a number", answer: "HTTP/1.1 2x0 OK\r\nContent-Length: 0\r\n\r\n"},
		{name: "header line without colon", answer: "HTTP/1.1 200 OK\r\nNoColonHere\r\nContent-Length: 0\r\n\r\n"},
		{name: "EOF in the middle of the head", answer: "HTTP/1.1 200 OK\r\nContent-Le", closes: true},
		{name: "EOF after the status line", answer: "HTTP/1.1 200 OK\r\n", closes: true},
		{name: "closed before any byte", answer: "", closes: true},
		{name: "Content-Length not a number", answer: "HTTP/1.1 200 OK\r\nContent-Length: ten\r\n\r\n0123456789"},
		{name: "conflicting Content-Lengths", answer: "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\nabc"},
		{name: "chunk size not hex", answer: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nhello\r\n0\r\n\r\n"},
		{name: "chunk longer than its size", answer: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nhello\r\n0\r\n\r\n"},
		{name: "chunked body cut short", answer: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhel", closes: true},
		{name: "Content-Length 10, closed after 5", answer: "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n12345", closes: true, wantErr: io.ErrUnexpectedEOF},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newRawServer(t, func(s *rawServer, c net.Conn) {
				if _, err := http.ReadRequest(bufio.NewReader(c)); err != nil {
					return
				}
				io.WriteString(c, tt.answer)
				if !tt.closes {
					<-s.done
				}
			})
			tr, _ := newTransport(t, &http1.Transport{})
			r := call(t, tr, newRequest(t, newCtx(t), "GET", srv.url, nil, 0))
			err := r.Err()
			switch {
			case err == nil:
				t.Errorf("the call succeeded: status %d, body %q", r.Resp.StatusCode, r.Body)
			case strings.Contains(err.Error(), "PANIC"):
				t.Error(err)
			case errors.Is(err, context.DeadlineExceeded):
				t.Errorf("the call failed only at its deadline: %v", err)
			case tt.wantErr != nil && !errors.Is(err, tt.wantErr):
				t.Errorf("error %v, want %v", err, tt.wantErr)
			}
			if n := tr.IdleConns(); n != 0 {
				t.Errorf("%d idle connections, want 0", n)
			}
		})
	}
}

// TestRoundTripDialError: a dial failure comes back as the dialer's
// *net.OpError.
func TestRoundTripDialError(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	tr, dials := newTransport(t, &http1.Transport{})
	r := call(t, tr, newRequest(t, newCtx(t), "POST", "http://"+addr+"/", strings.NewReader("x"), 1))
	var opErr *net.OpError
	if !errors.As(r.RTErr, &opErr) {
		t.Fatalf("RoundTrip error %v (%T), want a *net.OpError", r.RTErr, r.RTErr)
	}
	if opErr.Op != "dial" {
		t.Errorf("OpError.Op %q, want dial", opErr.Op)
	}
	if n := dials.Load(); n != 1 {
		t.Errorf("dialed %d times, want 1", n)
	}
}

// TestAnswerWithSpaceBeforeColon: an answer with whitespace between a
// header field name and its colon ("Content-Length : 5") is malformed
// (RFC 9112 section 5.1). It fails the call at once, and the connection is
// closed, never reused, and never read as framed by anything else: the
// destination sees its side closed while it keeps the connection open.
// (net/http's client keeps such a field under its spaced name, frames the
// body by the connection's close, and waits until the destination
// closes.)
func TestAnswerWithSpaceBeforeColon(t *testing.T) {
	tests := []struct {
		name, answer string
	}{
		{name: "Content-Length", answer: "HTTP/1.1 200 OK\r\nContent-Length : 5\r\n\r\nhello"},
		{name: "two spaces", answer: "HTTP/1.1 200 OK\r\nContent-Length  : 5\r\n\r\nhello"},
		{name: "Transfer-Encoding beside a Content-Length", answer: "HTTP/1.1 200 OK\r\nTransfer-Encoding : chunked\r\nContent-Length: 5\r\n\r\nhello"},
		{name: "any other field", answer: "HTTP/1.1 200 OK\r\nX-Note : n\r\nContent-Length: 2\r\n\r\nok"},
		{name: "in an interim answer", answer: "HTTP/1.1 103 Early Hints\r\nLink : </a>\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			closed := make(chan struct{})
			srv := newRawServer(t, func(s *rawServer, c net.Conn) {
				br := bufio.NewReader(c)
				if _, err := http.ReadRequest(br); err != nil {
					return
				}
				io.WriteString(c, tt.answer)
				// Keep the connection open: only the client may end it.
				_, _ = io.Copy(io.Discard, br)
				close(closed)
			})
			tr, _ := newTransport(t, &http1.Transport{})
			r := call(t, tr, newRequest(t, newCtx(t), "GET", srv.url, nil, 0))
			if err := r.Err(); !errors.Is(err, http1.ErrMalformedFieldName) {
				t.Fatalf("error %v, want %v (status %v, body %q)", err, http1.ErrMalformedFieldName, r.Resp, r.Body)
			}
			receive(t, closed, "the connection's close")
			if n := tr.IdleConns(); n != 0 {
				t.Errorf("%d idle connections, want 0", n)
			}
		})
	}
}
