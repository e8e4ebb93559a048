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

package h2c_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"knative.dev/event-forwarding-proxy/delivery/h2c"
	"knative.dev/event-forwarding-proxy/test/testproc"
)

// TestWriteTimeout: a flush that cannot complete within WriteTimeout (the
// destination reads nothing, the socket buffers are small) closes the
// connection and fails the call, before the call's context ends.
func TestWriteTimeout(t *testing.T) {
	small := func(opt int) func(network, address string, c syscall.RawConn) error {
		return func(network, address string, c syscall.RawConn) error {
			var serr error
			err := c.Control(func(fd uintptr) { serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, opt, 4096) })
			return errors.Join(err, serr)
		}
	}
	lc := net.ListenConfig{Control: small(syscall.SO_RCVBUF)}
	ln, err := lc.Listen(context.Background(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := newFrameServerOn(t, ln, nil, func(fc *frameConn) { <-fc.srv.done }) // reads nothing past the prefaces
	tests := []struct {
		name   string
		header int // bytes of header values
		body   int // bytes of body, of unknown length
	}{
		{name: "1 MiB of header", header: 1 << 20},
		{name: "1 MiB of body", body: 1 << 20},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := &net.Dialer{Control: small(syscall.SO_SNDBUF)}
			tr, _ := newTransport(t, &h2c.Transport{Dial: d.DialContext, WriteTimeout: 100 * time.Millisecond})
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			defer cancel()
			req := newRequest(t, ctx, "POST", srv.url, bytes.NewReader(pattern(tt.body)), -1)
			for i := range tt.header / (64 << 10) {
				req.Header.Set(fmt.Sprintf("X-Big-%d", i), strings.Repeat("v", 64<<10))
			}
			r := call(t, tr, req)
			if r.RTErr == nil {
				t.Fatalf("RoundTrip succeeded (status %d), want an error", r.Resp.StatusCode)
			}
			if errors.Is(r.RTErr, context.DeadlineExceeded) {
				t.Errorf("RoundTrip error %v: the call lasted to its context's deadline, not WriteTimeout", r.RTErr)
			}
			testproc.Eventually(t, waitLimit, "the connection is closed", func() bool { return tr.Conns() == 0 })
		})
	}
}

// deadlineConn records the Writes made without a write deadline.
type deadlineConn struct {
	net.Conn
	mu         sync.Mutex
	deadline   time.Time
	violations []string
}

func (c *deadlineConn) SetDeadline(t time.Time) error {
	c.mu.Lock()
	c.deadline = t
	c.mu.Unlock()
	return c.Conn.SetDeadline(t)
}

func (c *deadlineConn) SetWriteDeadline(t time.Time) error {
	c.mu.Lock()
	c.deadline = t
	c.mu.Unlock()
	return c.Conn.SetWriteDeadline(t)
}

func (c *deadlineConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	if c.deadline.IsZero() {
		c.violations = append(c.violations, fmt.Sprintf("a write of %d bytes without a deadline", len(p)))
	}
	c.mu.Unlock()
	return c.Conn.Write(p)
}

// TestWritesUnderDeadline: every write to a connection, whatever its size
// (header blocks and DATA frames larger than any write buffer included),
// runs under a write deadline, so that no write can block a caller, and
// the connection's other writers, for ever.
func TestWritesUnderDeadline(t *testing.T) {
	srv := newGoServer(t, echo, nil)
	big := pattern(100 << 10)
	tests := []struct {
		name   string
		header int
		body   []byte
		length int64
	}{
		{name: "small"},
		{name: "100 KiB of header", header: 100 << 10},
		{name: "100 KiB body", body: big, length: int64(len(big))},
		{name: "100 KiB body of unknown length", body: big, length: -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var (
				mu    sync.Mutex
				conns []*deadlineConn
			)
			// A new transport: the call is the first on its connection.
			tr, _ := newTransport(t, &h2c.Transport{WriteTimeout: 5 * time.Second, Dial: func(ctx context.Context, network, addr string) (net.Conn, error) {
				c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
				if err != nil {
					return nil, err
				}
				dc := &deadlineConn{Conn: c}
				mu.Lock()
				conns = append(conns, dc)
				mu.Unlock()
				return dc, nil
			}})
			req := newRequest(t, newCtx(t), "POST", srv.url, bytes.NewReader(tt.body), tt.length)
			for i := range tt.header / (10 << 10) {
				req.Header.Set(fmt.Sprintf("X-Big-%d", i), strings.Repeat("v", 10<<10))
			}
			if r := mustCall(t, tr, req); r.Body != string(tt.body) {
				t.Errorf("echoed %d bytes, want %d", len(r.Body), len(tt.body))
			}
			mu.Lock()
			defer mu.Unlock()
			for _, c := range conns {
				c.mu.Lock()
				for _, v := range c.violations {
					t.Error(v)
				}
				c.mu.Unlock()
			}
		})
	}
}
