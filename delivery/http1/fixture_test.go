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
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"knative.dev/event-forwarding-proxy/delivery/http1"
	"knative.dev/event-forwarding-proxy/delivery/internal/calltest"
)

// newTransport fills tr's Dial with a loopback dialer that counts its dials
// (the way to tell a reused connection from a new one) and closes its idle
// connections when the test ends.
func newTransport(t testing.TB, tr *http1.Transport) (*http1.Transport, *atomic.Int64) {
	t.Helper()
	var dials atomic.Int64
	d := &net.Dialer{}
	tr.Dial = func(ctx context.Context, network, addr string) (net.Conn, error) {
		dials.Add(1)
		return d.DialContext(ctx, network, addr)
	}
	t.Cleanup(tr.CloseIdleConnections)
	return tr, &dials
}

// connStates counts the connections an httptest server opened and closed.
type connStates struct{ opened, closed atomic.Int64 }

// newServer starts a loopback HTTP/1.1 server running h.
func newServer(t *testing.T, h http.HandlerFunc) (*httptest.Server, *connStates) {
	t.Helper()
	var cs connStates
	srv := httptest.NewUnstartedServer(h)
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		switch s {
		case http.StateNew:
			cs.opened.Add(1)
		case http.StateClosed, http.StateHijacked:
			cs.closed.Add(1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	// First, so that a connection a broken transport left open cannot
	// hold Close up.
	t.Cleanup(srv.CloseClientConnections)
	return srv, &cs
}

// newOKServer starts a loopback HTTP/1.1 server that answers every call
// "ok".
func newOKServer(t *testing.T) (*httptest.Server, *connStates) {
	t.Helper()
	return newServer(t, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
}

// rawServer is a loopback TCP server whose every connection is handled by
// a function the test scripts byte by byte.
type rawServer struct {
	addr     string
	url      string
	accepted atomic.Int64
	finished atomic.Int64  // connections whose handler returned and that the server closed
	done     chan struct{} // closed when the test ends: handlers blocked on it return
}

func newRawServer(t *testing.T, handle func(s *rawServer, c net.Conn)) *rawServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &rawServer{addr: ln.Addr().String(), url: "http://" + ln.Addr().String(), done: make(chan struct{})}
	calltest.ServeConns(t, ln, &s.accepted, func() { close(s.done) }, func(c net.Conn, _ int64) {
		defer s.finished.Add(1)
		defer c.Close() // closed before finished counts it
		handle(s, c)
	})
	return s
}

// answerEach is a raw connection handler that reads requests one after
// another and answers each with resp, until the client closes.
func answerEach(resp string) func(*rawServer, net.Conn) {
	return func(_ *rawServer, c net.Conn) {
		br := bufio.NewReader(c)
		for {
			req, err := http.ReadRequest(br)
			if err != nil {
				return
			}
			if _, err := io.Copy(io.Discard, req.Body); err != nil {
				return
			}
			if _, err := io.WriteString(c, resp); err != nil {
				return
			}
		}
	}
}

// captured is one request as a raw server read it.
type captured struct {
	head    string // request line and header lines, as sent, up to the blank line
	raw     string // every byte read
	req     *http.Request
	body    string
	trailer http.Header
	err     error
}

// newCaptureServer records the first request of each connection exactly
// as it arrived, then answers 200 with no body and closes.
func newCaptureServer(t *testing.T) (*rawServer, <-chan captured) {
	t.Helper()
	got := make(chan captured, 64)
	s := newRawServer(t, func(_ *rawServer, c net.Conn) {
		var raw bytes.Buffer
		br := bufio.NewReader(io.TeeReader(c, &raw))
		req, err := http.ReadRequest(br)
		if err != nil {
			got <- captured{raw: raw.String(), err: err}
			return
		}
		body, err := io.ReadAll(req.Body)
		head, _, _ := strings.Cut(raw.String(), "\r\n\r\n")
		got <- captured{head: head, raw: raw.String(), req: req, body: string(body), trailer: req.Trailer, err: err}
		io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
	})
	return s, got
}

// headerValues returns the values of the header lines of head named name
// (case-insensitively), in order.
func headerValues(head, name string) []string {
	var vals []string
	lines := strings.Split(head, "\r\n")
	for _, l := range lines[1:] {
		k, v, ok := strings.Cut(l, ":")
		if ok && strings.EqualFold(strings.TrimSpace(k), name) {
			vals = append(vals, strings.TrimSpace(v))
		}
	}
	return vals
}

// The calls' plumbing is delivery/internal/calltest's, shared with the
// other transport's tests.
const waitLimit = calltest.WaitLimit

type result = calltest.Result

var (
	errWatchdog = calltest.ErrWatchdog
	newCtx      = calltest.NewCtx
	newRequest  = calltest.NewRequest
	doCall      = calltest.Do
	call        = calltest.Call
	mustCall    = calltest.MustCall
	get         = calltest.Get
	echo        = calltest.Echo
)

func receive[T any](t testing.TB, ch <-chan T, what string) T {
	t.Helper()
	return calltest.Receive(t, ch, what)
}
