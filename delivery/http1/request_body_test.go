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
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"knative.dev/event-forwarding-proxy/delivery/http1"
)

// TestRoundTripShortBody: a body shorter than its declared length fails the
// call, and the connection that carried part of it is not used again.
func TestRoundTripShortBody(t *testing.T) {
	srv, _ := newServer(t, echo)
	tests := []struct {
		name     string
		declared int
		actual   int
	}{
		{name: "within the read-ahead", declared: 10, actual: 5},
		{name: "streamed", declared: 4096, actual: 2048},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr, dials := newTransport(t, &http1.Transport{ReadAheadMax: 1024})
			req := newRequest(t, newCtx(t), "POST", srv.URL, strings.NewReader(strings.Repeat("s", tt.actual)), int64(tt.declared))
			r := call(t, tr, req)
			if r.Err() == nil {
				t.Fatalf("a body of %d bytes declared as %d was sent, status %d", tt.actual, tt.declared, r.Resp.StatusCode)
			}
			if errors.Is(r.Err(), context.DeadlineExceeded) {
				t.Errorf("the call failed only at its deadline: %v", r.Err())
			}
			if n := tr.IdleConns(); n != 0 {
				t.Errorf("%d idle connections after the failed call, want 0", n)
			}
			before := dials.Load()
			req = newRequest(t, newCtx(t), "POST", srv.URL, strings.NewReader("next"), 4)
			if r := mustCall(t, tr, req); r.Body != "next" {
				t.Errorf("the next call read %q, want %q", r.Body, "next")
			}
			if n := dials.Load() - before; n != 1 {
				t.Errorf("the next call dialed %d times, want 1 (a fresh connection)", n)
			}
		})
	}
}

// TestRoundTripLongBody: a body longer than its declared length sends only
// the declared bytes (or fails); either way the connection stays framed.
func TestRoundTripLongBody(t *testing.T) {
	srv, _ := newServer(t, echo)
	tr, _ := newTransport(t, &http1.Transport{})
	for _, n := range []int{5, 40000} {
		body := strings.Repeat("b", n)
		req := newRequest(t, newCtx(t), "POST", srv.URL, strings.NewReader(body+"EXTRA"), int64(n))
		r := call(t, tr, req)
		if r.Err() == nil && r.Body != body {
			t.Errorf("declared %d bytes: the server read %d bytes", n, len(r.Body))
		}
		req = newRequest(t, newCtx(t), "POST", srv.URL, strings.NewReader("next"), 4)
		if r := mustCall(t, tr, req); r.Resp.StatusCode != http.StatusOK || r.Body != "next" {
			t.Errorf("declared %d bytes: the next call got %d %q, want 200 %q", n, r.Resp.StatusCode, r.Body, "next")
		}
	}
}

// writeCountingConn counts the writes of the connection it wraps; it hides
// any other interface of the connection (ReadFrom, ...), so that every byte
// written goes through Write.
type writeCountingConn struct {
	net.Conn
	writes *atomic.Int64
}

func (c writeCountingConn) Write(p []byte) (int, error) {
	c.writes.Add(1)
	return c.Conn.Write(p)
}

// TestRoundTripSmallBodyOneWrite: a body of declared length up to
// ReadAheadMax goes out with the head in one write.
func TestRoundTripSmallBodyOneWrite(t *testing.T) {
	srv, _ := newServer(t, echo)
	tests := []struct {
		name      string
		readAhead int64
		size      int
	}{
		{name: "default read-ahead, at the bound", size: 16 << 10},
		{name: "default read-ahead, small", size: 200},
		{name: "100 bytes, at the bound", readAhead: 100, size: 100},
		{name: "100 bytes, 1 byte", readAhead: 1, size: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var writes atomic.Int64
			tr := &http1.Transport{ReadAheadMax: tt.readAhead, Dial: func(ctx context.Context, network, addr string) (net.Conn, error) {
				c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
				if err != nil {
					return nil, err
				}
				return writeCountingConn{Conn: c, writes: &writes}, nil
			}}
			t.Cleanup(tr.CloseIdleConnections)
			body := strings.Repeat("w", tt.size)
			if r := mustCall(t, tr, newRequest(t, newCtx(t), "POST", srv.URL, strings.NewReader(body), int64(len(body)))); r.Body != body {
				t.Fatalf("echoed %d bytes, want %d", len(r.Body), len(body))
			}
			if n := writes.Load(); n != 1 {
				t.Errorf("the request went out in %d writes, want 1", n)
			}
		})
	}
}

// TestRoundTripStreamsBody: a body over ReadAheadMax or of unknown length
// reaches the destination as it is produced, not after it ends.
func TestRoundTripStreamsBody(t *testing.T) {
	part1 := strings.Repeat("1", 1000)
	part2 := strings.Repeat("2", 3096)
	tests := []struct {
		name          string
		contentLength int64
	}{
		{name: "declared length over ReadAheadMax", contentLength: int64(len(part1) + len(part2))},
		{name: "unknown length", contentLength: -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			firstPart := make(chan string, 1)
			srv, _ := newServer(t, func(w http.ResponseWriter, r *http.Request) {
				buf := make([]byte, len(part1))
				if _, err := io.ReadFull(r.Body, buf); err != nil {
					http.Error(w, err.Error(), http.StatusBadRequest)
					return
				}
				firstPart <- string(buf)
				rest, err := io.ReadAll(r.Body)
				if err != nil {
					http.Error(w, err.Error(), http.StatusBadRequest)
					return
				}
				fmt.Fprint(w, len(buf)+len(rest))
			})
			tr, _ := newTransport(t, &http1.Transport{ReadAheadMax: 1024})
			pr, pw := io.Pipe()
			t.Cleanup(func() { pw.CloseWithError(errors.New("the test ended")) })
			req := newRequest(t, newCtx(t), "POST", srv.URL, pr, tt.contentLength)
			res := make(chan result, 1)
			go func() { res <- doCall(tr, req) }()
			go pw.Write([]byte(part1))
			if got := receive(t, firstPart, "the destination to read the first part while the rest is not written"); got != part1 {
				t.Fatalf("the destination read %q first", got)
			}
			go func() {
				pw.Write([]byte(part2))
				pw.Close()
			}()
			r := receive(t, res, "the call to end")
			if err := r.Err(); err != nil {
				t.Fatal(err)
			}
			if want := strconv.Itoa(len(part1) + len(part2)); r.Body != want {
				t.Errorf("the destination read %s bytes, want %s", r.Body, want)
			}
		})
	}
}

// zeros is an endless reader of zero bytes.
type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

// TestRoundTripEarlyAnswer: a destination that answers (or closes) before
// reading a large or unfinished body ends the call with that answer (or an
// error when it also closes), never a hang, and the connection is not
// reused.
func TestRoundTripEarlyAnswer(t *testing.T) {
	const answer = "HTTP/1.1 413 Request Entity Too Large\r\nContent-Length: 0\r\n\r\n"
	tests := []struct {
		name    string
		closes  bool // the destination closes after answering; else it keeps the connection, reading nothing
		unknown bool // the body is a pipe that stops after its first part; else 64 MiB of declared length
		want413 bool
		// noAnswer: the destination closes without answering (closes is implied); the call must fail.
		noAnswer bool
	}{
		{name: "large body, destination keeps the connection", want413: true},
		{name: "large body, destination closes"},
		{name: "stalled streaming body, destination keeps the connection", unknown: true, want413: true},
		{name: "stalled streaming body, destination closes", unknown: true},
		{name: "stalled streaming body, destination closes without answering", unknown: true, noAnswer: true},
		{name: "large body, destination closes without answering", noAnswer: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newRawServer(t, func(s *rawServer, c net.Conn) {
				br := bufio.NewReader(c)
				if _, err := http.ReadRequest(br); err != nil {
					return
				}
				if tt.noAnswer {
					return
				}
				io.WriteString(c, answer)
				if !tt.closes {
					<-s.done
				}
			})
			tr, _ := newTransport(t, &http1.Transport{})
			var req *http.Request
			if tt.unknown {
				pr, pw := io.Pipe()
				t.Cleanup(func() { pw.CloseWithError(errors.New("the test ended")) })
				go pw.Write([]byte("first part"))
				req = newRequest(t, newCtx(t), "POST", srv.url, pr, -1)
			} else {
				req = newRequest(t, newCtx(t), "POST", srv.url, io.LimitReader(zeros{}, 64<<20), 64<<20)
			}
			r := call(t, tr, req)
			if tt.noAnswer && r.Err() == nil {
				t.Errorf("the call succeeded with status %d, want an error", r.Resp.StatusCode)
			}
			if r.RTErr == nil && r.Resp.StatusCode != http.StatusRequestEntityTooLarge {
				t.Errorf("status %d, want 413", r.Resp.StatusCode)
			}
			if tt.want413 && r.RTErr != nil {
				t.Errorf("RoundTrip: %v, want the 413 answer", r.RTErr)
			}
			if errors.Is(r.Err(), context.DeadlineExceeded) {
				t.Errorf("the call ended only at its deadline: %v", r.Err())
			}
			if n := tr.IdleConns(); n != 0 {
				t.Errorf("%d idle connections, want 0: the request was not fully sent", n)
			}
		})
	}
}
