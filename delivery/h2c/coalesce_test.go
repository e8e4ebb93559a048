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
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/http2"

	"knative.dev/event-forwarding-proxy/delivery/h2c"
	"knative.dev/event-forwarding-proxy/delivery/internal/calltest"
	"knative.dev/event-forwarding-proxy/test/testproc"
)

// gatedConn counts the writes to the socket; once gated, the next write
// waits until the gate opens.
type gatedConn struct {
	net.Conn
	g *writeGate
}

type writeGate struct {
	writes  atomic.Int64
	armed   atomic.Bool
	blocked chan struct{} // a write waits at the gate
	open    chan struct{}
	once    sync.Once
}

func newWriteGate() *writeGate {
	return &writeGate{blocked: make(chan struct{}), open: make(chan struct{})}
}

func (g *writeGate) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	return &gatedConn{Conn: c, g: g}, nil
}

func (c *gatedConn) Write(p []byte) (int, error) {
	if c.g.armed.CompareAndSwap(true, false) {
		close(c.g.blocked)
		<-c.g.open
	}
	c.g.writes.Add(1)
	return c.Conn.Write(p)
}

// TestBurstWritesCoalesce: calls that wait for a connection's write lock
// leave their frames to the last of them, which sends them all: 50 calls
// lined up behind a write that cannot go on cost a few writes to the
// socket, not one each. Every call still gets its answer.
func TestBurstWritesCoalesce(t *testing.T) {
	const n = 50
	srv := newGoServer(t, func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") }, nil)
	g := newWriteGate()
	t.Cleanup(g.release)
	tr, _ := newTransport(t, &h2c.Transport{Dial: g.dial})
	get(t, tr, srv.url) // the connection, its handshake and SETTINGS done

	g.armed.Store(true)
	first := calltest.Go(tr, newRequest(t, newCtx(t), http.MethodGet, srv.url, nil, 0))
	receive(t, g.blocked, "the first call's write at the gate")
	var calls []<-chan result
	for range n {
		calls = append(calls, calltest.Go(tr, newRequest(t, newCtx(t), http.MethodGet, srv.url, nil, 0)))
	}
	testproc.Eventually(t, 10*time.Second, "the calls wait for the write lock", func() bool { return tr.WaitingWriters() == n })
	before := g.writes.Load()
	g.release()
	for _, ch := range append(calls, first) {
		r := receive(t, ch, "an answer")
		if err := r.Err(); err != nil || r.Resp.StatusCode != http.StatusOK || r.Body != "ok" {
			t.Fatalf("a call ended with %v, want 200 ok", err)
		}
	}
	// The first call's write, the burst's, and what the connection's reader
	// sends on its own (SETTINGS and PING acknowledgements, window updates).
	writes := g.writes.Load() - before
	t.Logf("%d calls, %d writes to the socket", n+1, writes)
	if writes > n/5 {
		t.Errorf("%d calls that waited for the write lock took %d writes to the socket, want at most %d", n+1, writes, n/5)
	}
}

func (g *writeGate) release() { g.once.Do(func() { close(g.open) }) }

// TestRefusedWriterSendsTheBurst: a call that takes the write lock and is
// refused before it writes (its header list is larger than the destination
// accepts) still sends the frames that the call before it left buffered
// for it; that call gets its answer, the refused one a clear error.
func TestRefusedWriterSendsTheBurst(t *testing.T) {
	srv := newFrameServer(t, []http2.Setting{{ID: http2.SettingMaxHeaderListSize, Val: 1024}}, func(fc *frameConn) {
		for {
			r, err := fc.readRequest()
			if err != nil || fc.answer(r.stream, "200", "ok") != nil {
				return
			}
		}
	})
	g := newWriteGate()
	t.Cleanup(g.release)
	tr, _ := newTransport(t, &h2c.Transport{Dial: g.dial})
	get(t, tr, srv.url)

	g.armed.Store(true)
	first := calltest.Go(tr, newRequest(t, newCtx(t), http.MethodGet, srv.url, nil, 0))
	receive(t, g.blocked, "the first call's write at the gate")
	// In this order: the lock's waiters are woken first come, first served.
	small := calltest.Go(tr, newRequest(t, newCtx(t), http.MethodGet, srv.url, nil, 0))
	testproc.Eventually(t, 10*time.Second, "the small call waits for the write lock", func() bool { return tr.WaitingWriters() == 1 })
	big := newRequest(t, newCtx(t), http.MethodGet, srv.url, nil, 0)
	big.Header.Set("X-Big", strings.Repeat("b", 2048))
	refused := calltest.Go(tr, big)
	testproc.Eventually(t, 10*time.Second, "the big call waits for the write lock", func() bool { return tr.WaitingWriters() == 2 })
	g.release()

	for _, ch := range []<-chan result{first, small} {
		if r := receive(t, ch, "an answer"); r.Err() != nil || r.Body != "ok" {
			t.Errorf("a call ended with %v %q, want 200 ok", r.Err(), r.Body)
		}
	}
	if r := receive(t, refused, "the refusal"); r.RTErr == nil || !strings.Contains(r.RTErr.Error(), "header bytes are more than") {
		t.Errorf("the call with 2 KiB of headers ended with %v, want the destination's header list limit", r.Err())
	}
}
