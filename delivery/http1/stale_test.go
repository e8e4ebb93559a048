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
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"knative.dev/event-forwarding-proxy/delivery/http1"
	"knative.dev/event-forwarding-proxy/test/testproc"
)

// plainConn hides every interface of the connection it wraps but net.Conn
// (no syscall.Conn), as a Dial that wraps its connections would.
type plainConn struct{ net.Conn }

// namingConn wraps a connection and names it, as crypto/tls does.
type namingConn struct{ net.Conn }

func (c namingConn) NetConn() net.Conn { return c.Conn }

// TestRoundTripStaleIdleConnection: a destination that closed an idle
// connection (without saying Connection: close) does not fail the next
// call, a POST: the transport sees the connection closed before using it,
// whether Dial returns the TCP connection itself or a wrapper that names
// it (NetConn).
func TestRoundTripStaleIdleConnection(t *testing.T) {
	for _, wrap := range []bool{false, true} {
		t.Run(map[bool]string{false: "TCP connection", true: "wrapped connection"}[wrap], func(t *testing.T) {
			var (
				mu     sync.Mutex
				bodies []string
			)
			srv := newRawServer(t, func(_ *rawServer, c net.Conn) {
				req, err := http.ReadRequest(bufio.NewReader(c))
				if err != nil {
					return
				}
				b, _ := io.ReadAll(req.Body)
				mu.Lock()
				bodies = append(bodies, string(b))
				mu.Unlock()
				io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
				// and closes
			})
			tr, dials := newTransport(t, &http1.Transport{})
			if wrap {
				dial := tr.Dial
				tr.Dial = func(ctx context.Context, network, addr string) (net.Conn, error) {
					c, err := dial(ctx, network, addr)
					if err != nil {
						return nil, err
					}
					return namingConn{c}, nil
				}
			}
			for i, body := range []string{"first", "second", "third"} {
				r := mustCall(t, tr, newRequest(t, newCtx(t), "POST", srv.url, strings.NewReader(body), int64(len(body))))
				if r.Body != "ok" {
					t.Errorf("call %d: body %q", i, r.Body)
				}
				testproc.Eventually(t, waitLimit, "the destination closed the connection", func() bool {
					return srv.finished.Load() == int64(i+1)
				})
			}
			if n := dials.Load(); n != 3 {
				t.Errorf("dialed %d times, want 3", n)
			}
			mu.Lock()
			defer mu.Unlock()
			if want := []string{"first", "second", "third"}; !slices.Equal(bodies, want) {
				t.Errorf("the destination received %q, want %q (each once)", bodies, want)
			}
		})
	}
}

// TestRoundTripStaleOpaqueConnection pins the documented limit: behind a
// wrapper that hides the TCP connection (no syscall.Conn, no NetConn), an
// idle connection the destination closed is taken as open, and the call
// that finds it fails with an error (never a hang, never a replay of the
// POST); the next call dials afresh and succeeds.
func TestRoundTripStaleOpaqueConnection(t *testing.T) {
	var received atomic.Int64
	srv := newRawServer(t, func(_ *rawServer, c net.Conn) {
		req, err := http.ReadRequest(bufio.NewReader(c))
		if err != nil {
			return
		}
		_, _ = io.ReadAll(req.Body)
		received.Add(1)
		io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
		// and closes
	})
	tr, dials := newTransport(t, &http1.Transport{})
	dial := tr.Dial
	tr.Dial = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return plainConn{c}, nil
	}
	post := func(body string) (*http.Response, error) {
		return tr.RoundTrip(newRequest(t, newCtx(t), "POST", srv.url, strings.NewReader(body), int64(len(body))))
	}
	if r := mustCall(t, tr, newRequest(t, newCtx(t), "POST", srv.url, strings.NewReader("first"), 5)); r.Body != "ok" {
		t.Fatalf("first call: body %q", r.Body)
	}
	testproc.Eventually(t, waitLimit, "the destination closed the connection", func() bool { return srv.finished.Load() == 1 })
	resp, err := post("second")
	if err == nil {
		resp.Body.Close()
		t.Fatalf("the call on the closed connection succeeded (%s): the connection was checked after all, update the documentation", resp.Status)
	}
	if errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("the call hung until its deadline: %v", err)
	}
	if r := mustCall(t, tr, newRequest(t, newCtx(t), "POST", srv.url, strings.NewReader("third"), 5)); r.Body != "ok" {
		t.Fatalf("third call: body %q", r.Body)
	}
	if got := dials.Load(); got != 2 {
		t.Errorf("dialed %d times, want 2 (the failed call used the stale connection, the next one dialed)", got)
	}
	if got := received.Load(); got != 2 {
		t.Errorf("the destination received %d requests, want 2 (the second was never replayed)", got)
	}
}
