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

package h2server_test

import (
	"bytes"
	"errors"
	"log"
	"net"
	"net/http"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"knative.dev/event-forwarding-proxy/proxy/internal/h2server"
	"knative.dev/event-forwarding-proxy/test/testproc"
)

// wait bounds every wait of these tests: long enough never to be hit by a
// server that works, short enough that a hang fails the test.
const wait = 10 * time.Second

// syncBuffer is a log destination that handlers and tests share.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// countListener counts the connections it accepts.
type countListener struct {
	net.Listener
	n *atomic.Int32
}

func (l countListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.n.Add(1)
	}
	return c, err
}

// fixture is a real http.Server on a loopback port, HTTP/1 and h2c, its
// HTTP/2 served by an h2server.Server through Configure.
type fixture struct {
	addr     string
	url      string
	hs       *http.Server
	srv      *h2server.Server
	log      *syncBuffer
	accepted atomic.Int32
	done     chan struct{} // Serve returned
}

// startServer starts srv (a zero Server if nil) with h. The test's
// cleanup closes the server and checks that no goroutine of the package
// outlives it.
func startServer(t testing.TB, srv *h2server.Server, h http.Handler) *fixture {
	t.Helper()
	if srv == nil {
		srv = &h2server.Server{}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{srv: srv, log: &syncBuffer{}, done: make(chan struct{})}
	f.hs = &http.Server{Handler: h, Protocols: new(http.Protocols), ErrorLog: log.New(f.log, "", 0)}
	f.hs.Protocols.SetHTTP1(true)
	f.hs.Protocols.SetUnencryptedHTTP2(true)
	srv.Configure(f.hs)
	f.addr = ln.Addr().String()
	f.url = "http://" + f.addr
	go func() {
		defer close(f.done)
		_ = f.hs.Serve(countListener{ln, &f.accepted})
	}()
	t.Cleanup(func() {
		openGates(t)
		_ = f.hs.Close()
		<-f.done
		waitNoServerGoroutines(t)
	})
	return f
}

// client is Go's own HTTP/2 client, h2c with prior knowledge.
func (f *fixture) client(t testing.TB) *http.Client {
	return &http.Client{Transport: newTransport(t), Timeout: wait}
}

// oneConnClient is Go's HTTP/2 client on one connection, dialed here
// once. http.Transport files a new h2c connection as idle only after its
// first request may have finished, so a busy machine can see it dial a
// second for the next request; a test of whether the server keeps its
// connection usable needs every request on the one connection, or failing.
func (f *fixture) oneConnClient(t testing.TB) *http.Client {
	t.Helper()
	tr := &http.Transport{Protocols: new(http.Protocols)}
	tr.Protocols.SetUnencryptedHTTP2(true)
	cc, err := tr.NewClientConn(t.Context(), "http", f.addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cc.Close() })
	return &http.Client{Transport: cc, Timeout: wait}
}

func newTransport(t testing.TB) *http.Transport {
	tr := &http.Transport{Protocols: new(http.Protocols), ExpectContinueTimeout: wait}
	tr.Protocols.SetUnencryptedHTTP2(true)
	t.Cleanup(tr.CloseIdleConnections)
	return tr
}

// stacks returns every goroutine's stack, one string each.
func stacks() []string {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			return strings.Split(string(buf[:n]), "\n\n")
		}
		buf = make([]byte, 2*len(buf))
	}
}

// goroutinesIn counts the goroutines whose stack mentions substr.
func goroutinesIn(substr string) int {
	n := 0
	for _, g := range stacks() {
		if strings.Contains(g, substr) {
			n++
		}
	}
	return n
}

const (
	runHandlerFrame = "h2server.(*conn).runHandler"
	serverFrames    = "proxy/internal/h2server.("
)

// eventually polls cond until it holds, failing the test after wait.
func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	testproc.Eventually(t, wait, what, cond)
}

// waitNoServerGoroutines waits until no goroutine runs code of the
// package: every connection and every handler has ended.
func waitNoServerGoroutines(t testing.TB) {
	t.Helper()
	var left []string
	if !testproc.Poll(wait, func() bool {
		left = left[:0]
		for _, g := range stacks() {
			if strings.Contains(g, serverFrames) {
				left = append(left, g)
			}
		}
		return len(left) == 0
	}) {
		t.Errorf("%d goroutines of h2server outlive the server:\n%s", len(left), strings.Join(left, "\n\n"))
	}
}

// blockedIn waits until some goroutine's stack mentions frame, i.e. a
// goroutine is blocked (or running) there. It may run on any goroutine: it
// reports a timeout with t.Errorf.
func blockedIn(t testing.TB, frame string) {
	if !testproc.Poll(wait, func() bool { return goroutinesIn(frame) > 0 }) {
		t.Errorf("gave up waiting (%v) for a goroutine in %s", wait, frame)
	}
}

// detacher is what the server's ResponseWriter offers a handler that
// answers later.
type detacher interface{ Detach() (end func(p any)) }

// gate holds handlers until the test opens it, or their request ends.
type gate struct {
	once sync.Once
	ch   chan struct{}
}

// gates holds each test's gates, for startServer's cleanup to open them
// before it waits for the handlers to end.
var gates sync.Map // testing.TB -> *[]*gate

func newGate(t testing.TB) *gate {
	g := &gate{ch: make(chan struct{})}
	t.Cleanup(g.open)
	v, _ := gates.LoadOrStore(t, new([]*gate))
	list := v.(*[]*gate)
	*list = append(*list, g)
	return g
}

func openGates(t testing.TB) {
	if v, ok := gates.LoadAndDelete(t); ok {
		for _, g := range *v.(*[]*gate) {
			g.open()
		}
	}
}

func (g *gate) open() { g.once.Do(func() { close(g.ch) }) }

// hold waits for the gate or the request's end; it reports whether the
// gate opened.
func (g *gate) hold(r *http.Request) bool {
	select {
	case <-g.ch:
		return true
	case <-r.Context().Done():
		return false
	}
}

// recv waits for a value on ch, failing the test after wait.
func recv[T any](t testing.TB, ch <-chan T, what string) T {
	t.Helper()
	return testproc.Receive(t, wait, ch, what)
}

// isDeadline reports whether err is a passed deadline.
func isDeadline(err error) bool { return errors.Is(err, os.ErrDeadlineExceeded) }

// pattern is n bytes of a recognizable, non-repeating-ish sequence.
func pattern(n int) []byte {
	b := make([]byte, n)
	var x uint32 = 2463534242
	for i := range b {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		b[i] = byte(x)
	}
	return b
}
