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

package proxytest

import (
	"context"
	"net"
	"net/http"
	"strconv"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// boundSocket returns a TCP socket bound to a free port of 127.0.0.1, not
// listening, and its address; it is closed when the test ends.
func boundSocket(t testing.TB) (fd int, addr string) {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Close(fd) })
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		t.Fatal(err)
	}
	return fd, net.JoinHostPort("127.0.0.1", strconv.Itoa(sa.(*syscall.SockaddrInet4).Port))
}

// NewBlackHole returns the address (127.0.0.1:port) of a listening socket
// whose accept queue is full and never drained: the kernel drops every
// further SYN, so a dial to it hangs until the dialer gives up, as a
// destination behind a black-holing firewall does. It is closed when the
// test ends.
func NewBlackHole(t testing.TB) string {
	t.Helper()
	fd, addr := boundSocket(t)
	// A backlog of 0 leaves room for one connection in the accept queue.
	if err := syscall.Listen(fd, 0); err != nil {
		t.Fatal(err)
	}
	filler, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = filler.Close() })
	return addr
}

// NewRefusingAddr returns the address (127.0.0.1:port) of a socket bound
// to a port that nothing listens on: a dial to it is refused at once, as
// a destination that is down. Unlike a listener closed after it gave its
// port away, the socket keeps the port until the test ends, so that no
// server started later (the proxy under test, say) is given it.
func NewRefusingAddr(t testing.TB) string {
	t.Helper()
	_, addr := boundSocket(t)
	return addr
}

// NewSilentDNS returns a pure-Go resolver whose only server receives the
// questions and never answers: every lookup times out. The server is
// closed when the test ends. Go's resolver bounds its socket reads by the
// lookup's deadline only (resolv.conf's timeout, 5 s by default), not by
// its cancellation, so a lookup abandoned by a dial timeout would linger
// that long; this resolver's sockets also give up once the lookup is
// cancelled, so that tests end without stray goroutines.
func NewSilentDNS(t testing.TB) *net.Resolver {
	t.Helper()
	conn, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	addr := conn.LocalAddr().String()
	return &net.Resolver{
		PreferGo: true,
		Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			c, err := d.DialContext(ctx, "udp", addr)
			if err == nil {
				context.AfterFunc(ctx, func() { _ = c.SetDeadline(time.Unix(1, 0)) })
			}
			return c, err
		},
	}
}

// ConnCount counts a server's open connections.
type ConnCount struct{ open atomic.Int64 }

// Open returns the connections open now.
func (c *ConnCount) Open() int64 { return c.open.Load() }

func (c *ConnCount) track(_ net.Conn, s http.ConnState) {
	switch s {
	case http.StateNew:
		c.open.Add(1)
	case http.StateClosed, http.StateHijacked:
		c.open.Add(-1)
	}
}

// NewCountedDestination is NewDestination (h2c too when h2c is true) that
// also counts its open connections: a way to see that the proxy closed or
// pooled what it opened.
func NewCountedDestination(t testing.TB, h2c bool, reply Reply) (*Destination, *ConnCount) {
	t.Helper()
	d := newDestination(reply)
	if h2c {
		d.Config.Protocols = new(http.Protocols)
		d.Config.Protocols.SetHTTP1(true)
		d.Config.Protocols.SetUnencryptedHTTP2(true)
	}
	c := &ConnCount{}
	d.Config.ConnState = c.track
	d.Start()
	t.Cleanup(d.Close)
	return d, c
}
