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
	"io"
	"maps"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"
)

// Canary is a loopback HTTP server that a test expects never to be reached:
// it counts every TCP connection it accepts, before a byte is read, and
// answers whatever request comes with 200 "canary reached". It listens on
// one port on several loopback addresses, so that every spelling of
// loopback (127.0.0.1, 0.0.0.0, ::1, ::) names it.
type Canary struct {
	// Port is the port it listens on, on every address.
	Port string

	lns     []net.Listener
	mu      sync.Mutex
	total   int64          // connections accepted
	markers int64          // of which Settle's
	seen    map[string]int // connections accepted, by remote address
}

// NewCanary starts a Canary on 127.0.0.1 and, where the host has IPv6
// loopback, ::1, on the same port; extra hosts (such as "127.0.0.2") are
// added on that port too. It is closed when the test ends.
func NewCanary(t testing.TB, extraHosts ...string) *Canary {
	t.Helper()
	hosts := append([]string{"127.0.0.1"}, extraHosts...)
	if HasIPv6Loopback() {
		hosts = append(hosts, "::1")
	}
	return ServeCanary(t, ListenSamePort(t, hosts...)...)
}

// ServeCanary makes a Canary of listeners that share one port (see
// ListenSamePort). They are closed when the test ends.
func ServeCanary(t testing.TB, lns ...net.Listener) *Canary {
	t.Helper()
	_, port, _ := net.SplitHostPort(lns[0].Addr().String())
	c := &Canary{Port: port, lns: lns, seen: map[string]int{}}
	for _, ln := range lns {
		srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			_, _ = io.WriteString(w, "canary reached")
		})}
		done := make(chan struct{})
		go func() {
			defer close(done)
			_ = srv.Serve(&countingListener{Listener: ln, c: c})
		}()
		t.Cleanup(func() {
			_ = srv.Close()
			<-done
		})
	}
	return c
}

// Accepted returns how many TCP connections the canary accepted so far,
// Settle's own not counted. A connection that completed its handshake may
// still wait in the kernel's queue: call Settle first.
func (c *Canary) Accepted() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.total - c.markers
}

// Settle returns once every connection made to the canary before the call
// has been accepted (and counted): it connects once to each listener and
// waits until that connection is accepted, which the kernel's queue does in
// order. It fails the test after 5 s.
func (c *Canary) Settle(t testing.TB) {
	t.Helper()
	for _, ln := range c.lns {
		c.mu.Lock()
		before := maps.Clone(c.seen)
		c.mu.Unlock()
		conn, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatalf("canary: %v", err)
		}
		me := conn.LocalAddr().String()
		Eventually(t, 5*time.Second, func() bool {
			c.mu.Lock()
			defer c.mu.Unlock()
			return c.seen[me] > before[me]
		}, "the canary did not accept its own connection")
		c.mu.Lock()
		c.markers++
		c.mu.Unlock()
		_ = conn.Close()
	}
}

// HostPort joins host (an address or a name) with the canary's port.
func (c *Canary) HostPort(host string) string { return net.JoinHostPort(host, c.Port) }

// URL returns "http://host:port/" for the canary's port.
func (c *Canary) URL(host string) string { return "http://" + c.HostPort(host) + "/" }

// countingListener counts the connections it accepts for c.
type countingListener struct {
	net.Listener
	c *Canary
}

func (l *countingListener) Accept() (net.Conn, error) {
	conn, err := l.Listener.Accept()
	if err == nil {
		l.c.mu.Lock()
		l.c.total++
		l.c.seen[conn.RemoteAddr().String()]++
		l.c.mu.Unlock()
	}
	return conn, err
}

// ListenSamePort listens on TCP on every host (IP addresses) with one
// port, chosen by the system for the first host. A port taken on a later
// host makes it try another, up to 50 times. The listeners are closed when
// the test ends (closing one twice is harmless).
func ListenSamePort(t testing.TB, hosts ...string) []net.Listener {
	t.Helper()
	for range 50 {
		first, err := net.Listen("tcp", net.JoinHostPort(hosts[0], "0"))
		if err != nil {
			t.Fatalf("listen on %s: %v", hosts[0], err)
		}
		_, port, _ := net.SplitHostPort(first.Addr().String())
		lns := []net.Listener{first}
		for _, h := range hosts[1:] {
			ln, err := net.Listen("tcp", net.JoinHostPort(h, port))
			if err != nil {
				break
			}
			lns = append(lns, ln)
		}
		if len(lns) == len(hosts) {
			for _, ln := range lns {
				t.Cleanup(func() { _ = ln.Close() })
			}
			return lns
		}
		for _, ln := range lns {
			_ = ln.Close()
		}
	}
	t.Fatalf("no port free on all of %q", hosts)
	return nil
}

// HasIPv6Loopback reports whether this host can listen on ::1.
func HasIPv6Loopback() bool {
	ln, err := net.Listen("tcp", "[::1]:0")
	if err != nil {
		return false
	}
	_ = ln.Close()
	return true
}
