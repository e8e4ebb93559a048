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
	"context"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"

	"knative.dev/event-forwarding-proxy/delivery/h2c"
	"knative.dev/event-forwarding-proxy/delivery/internal/calltest"
)

// Compile-time check: the Transport is a RoundTripper.
var _ http.RoundTripper = (*h2c.Transport)(nil)

// newTransport wraps tr's Dial (a net.Dialer when nil) in one that counts
// its dials (the way to tell a reused connection from a new one), and
// closes its idle connections when the test ends.
func newTransport(t testing.TB, tr *h2c.Transport) (*h2c.Transport, *atomic.Int64) {
	t.Helper()
	var dials atomic.Int64
	dial := tr.Dial
	if dial == nil {
		dial = (&net.Dialer{}).DialContext
	}
	tr.Dial = func(ctx context.Context, network, addr string) (net.Conn, error) {
		dials.Add(1)
		return dial(ctx, network, addr)
	}
	t.Cleanup(tr.CloseIdleConnections)
	return tr, &dials
}

// countingListener counts the connections it accepted and those the server
// closed.
type countingListener struct {
	net.Listener
	accepted, closed atomic.Int64
}

func (l *countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	l.accepted.Add(1)
	return &countedConn{Conn: c, l: l}, nil
}

type countedConn struct {
	net.Conn
	l    *countingListener
	once sync.Once
}

func (c *countedConn) Close() error {
	c.once.Do(func() { c.l.closed.Add(1) })
	return c.Conn.Close()
}

// goServer is Go's own h2c server (HTTP/2 with prior knowledge, no TLS) on
// loopback.
type goServer struct {
	url  string
	addr string
	ln   *countingListener
}

// newGoServer starts a Go h2c server running h, configured by conf (nil:
// Go's defaults).
func newGoServer(t testing.TB, h http.HandlerFunc, conf *http.HTTP2Config) *goServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cl := &countingListener{Listener: ln}
	p := new(http.Protocols)
	p.SetUnencryptedHTTP2(true)
	srv := &http.Server{Handler: h, Protocols: p, HTTP2: conf}
	served := make(chan struct{})
	go func() {
		defer close(served)
		srv.Serve(cl)
	}()
	t.Cleanup(func() {
		srv.Close()
		<-served
	})
	return &goServer{url: "http://" + ln.Addr().String(), addr: ln.Addr().String(), ln: cl}
}

// The calls' plumbing is delivery/internal/calltest's, shared with the
// other transport's tests.
const waitLimit = calltest.WaitLimit

type result = calltest.Result

var (
	newCtx     = calltest.NewCtx
	newRequest = calltest.NewRequest
	doCall     = calltest.Do
	call       = calltest.Call
	mustCall   = calltest.MustCall
	get        = calltest.Get
	echo       = calltest.Echo
)

func receive[T any](t testing.TB, ch <-chan T, what string) T {
	t.Helper()
	return calltest.Receive(t, ch, what)
}

var (
	goCall  = calltest.Go
	pattern = calltest.Pattern
)

type closeTracker = calltest.CloseTracker
