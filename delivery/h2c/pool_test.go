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
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"knative.dev/event-forwarding-proxy/delivery/h2c"
	"knative.dev/event-forwarding-proxy/test/testproc"
)

// atomicMax raises m to v if v is larger.
func atomicMax(m *atomic.Int64, v int64) {
	for {
		old := m.Load()
		if v <= old || m.CompareAndSwap(old, v) {
			return
		}
	}
}

// newGatedServer starts a Go h2c server allowing streams per connection
// that counts the calls arriving and holds each until gate is closed, then
// answers "ok".
func newGatedServer(t *testing.T, streams int) (srv *goServer, arrived *atomic.Int64, gate chan struct{}) {
	arrived, gate = new(atomic.Int64), make(chan struct{})
	srv = newGoServer(t, func(w http.ResponseWriter, r *http.Request) {
		arrived.Add(1)
		select {
		case <-gate:
		case <-r.Context().Done():
			return
		}
		io.WriteString(w, "ok")
	}, &http.HTTP2Config{MaxConcurrentStreams: streams})
	return srv, arrived, gate
}

// TestConcurrentCalls: 300 calls at once to a destination taking 10
// streams per connection, through a transport allowed 2 connections: every
// call succeeds, waiting for a stream slot when all 20 are taken, and no
// more than 2 connections are ever open.
func TestConcurrentCalls(t *testing.T) {
	const calls, streams, conns = 300, 10, 2
	tr, _ := newTransport(t, &h2c.Transport{MaxConnsPerHost: conns})
	var inflight, maxInflight, maxConns atomic.Int64
	srv := newGoServer(t, func(w http.ResponseWriter, r *http.Request) {
		atomicMax(&maxInflight, inflight.Add(1))
		defer inflight.Add(-1)
		atomicMax(&maxConns, int64(tr.Conns()))
		echo(w, r)
	}, &http.HTTP2Config{MaxConcurrentStreams: streams})
	var wg sync.WaitGroup
	errs := make(chan error, calls)
	for i := range calls {
		wg.Go(func() {
			body := fmt.Sprintf("call %d", i)
			r := doCall(tr, newRequest(t, newCtx(t), "POST", srv.url, strings.NewReader(body), int64(len(body))))
			switch {
			case r.Err() != nil:
				errs <- fmt.Errorf("call %d: %w", i, r.Err())
			case r.Resp.StatusCode != http.StatusOK || r.Body != body:
				errs <- fmt.Errorf("call %d: %d %q, want 200 %q", i, r.Resp.StatusCode, r.Body, body)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if n := srv.ln.accepted.Load(); n > conns {
		t.Errorf("the server accepted %d connections, want at most %d", n, conns)
	}
	if n := maxConns.Load(); n > conns {
		t.Errorf("Conns() was %d, want at most %d", n, conns)
	}
	if n := tr.Conns(); n > conns || n < 1 {
		t.Errorf("Conns() = %d after the calls, want 1 to %d", n, conns)
	}
	if n := maxInflight.Load(); n > streams*conns {
		t.Errorf("%d calls in the server at once, want at most %d", n, streams*conns)
	}
}

// TestMaxConnsPerHostDefault: when MaxConnsPerHost is zero, at most 64
// connections are opened to one destination; calls beyond wait for a slot.
func TestMaxConnsPerHostDefault(t *testing.T) {
	const calls, bound = 70, 64
	srv, arrived, gate := newGatedServer(t, 1)
	tr, _ := newTransport(t, &h2c.Transport{})
	var results []<-chan result
	for range calls {
		results = append(results, goCall(tr, newRequest(t, newCtx(t), "GET", srv.url, nil, 0)))
	}
	testproc.Eventually(t, waitLimit, fmt.Sprintf("%d calls are held, one per connection", bound), func() bool { return arrived.Load() >= bound })
	if n := srv.ln.accepted.Load(); n != bound {
		t.Errorf("the server accepted %d connections, want %d", n, bound)
	}
	if n := tr.Conns(); n != bound {
		t.Errorf("Conns() = %d, want %d", n, bound)
	}
	close(gate)
	for i, ch := range results {
		if r := receive(t, ch, "a call to end"); r.Err() != nil || r.Body != "ok" {
			t.Errorf("call %d: %q, %v; want ok", i, r.Body, r.Err())
		}
	}
	if n := srv.ln.accepted.Load(); n != bound {
		t.Errorf("the server accepted %d connections in all, want %d", n, bound)
	}
}

// TestBurstSharesOneDial: a burst of calls to a destination with no
// connection yet waits for one dial and shares its connection, as long as
// the destination's stream limit allows (net/http's transport dialed about
// one connection per call of such a burst).
func TestBurstSharesOneDial(t *testing.T) {
	const calls = 200
	srv, arrived, gate := newGatedServer(t, 1000)
	tr, dials := newTransport(t, &h2c.Transport{})
	start := make(chan struct{})
	results := make([]<-chan result, calls)
	for i := range calls {
		ch := make(chan result, 1)
		results[i] = ch
		go func() {
			<-start
			ch <- doCall(tr, newRequest(t, newCtx(t), "GET", srv.url, nil, 0))
		}()
	}
	close(start)
	testproc.Eventually(t, waitLimit, fmt.Sprintf("%d calls are held", calls), func() bool { return arrived.Load() == calls })
	if n := dials.Load(); n != 1 {
		t.Errorf("a burst of %d calls dialed %d times, want 1", calls, n)
	}
	close(gate)
	for i, ch := range results {
		if r := receive(t, ch, "a call to end"); r.Err() != nil || r.Body != "ok" {
			t.Errorf("call %d: %q, %v; want ok", i, r.Body, r.Err())
		}
	}
}

// TestIdleConnTimeout: a connection that carried no stream for
// IdleConnTimeout is closed; one carrying a held call is not.
func TestIdleConnTimeout(t *testing.T) {
	const idle = 100 * time.Millisecond
	t.Run("idle", func(t *testing.T) {
		srv := newGoServer(t, echo, nil)
		tr, dials := newTransport(t, &h2c.Transport{IdleConnTimeout: idle})
		get(t, tr, srv.url)
		testproc.Eventually(t, waitLimit, "the idle connection is closed", func() bool { return tr.Conns() == 0 })
		testproc.Eventually(t, waitLimit, "the server sees the connection closed", func() bool { return srv.ln.closed.Load() == 1 })
		get(t, tr, srv.url)
		if n := dials.Load(); n != 2 {
			t.Errorf("dialed %d times, want 2", n)
		}
	})
	t.Run("busy", func(t *testing.T) {
		srv := newHeldServer(t, nil)
		tr, dials := newTransport(t, &h2c.Transport{IdleConnTimeout: idle})
		res := goCall(tr, newRequest(t, newCtx(t), "GET", srv.url+"/held", nil, 0))
		testproc.Eventually(t, waitLimit, "the call is held", func() bool { return srv.arrived.Load() == 1 })
		testproc.Consistently(t, 5*idle, "the connection carrying a call stays open", func() bool { return tr.Conns() == 1 })
		srv.release <- struct{}{}
		if r := receive(t, res, "the held call"); r.Err() != nil || r.Body != "ok" {
			t.Errorf("held call: %q, %v; want ok", r.Body, r.Err())
		}
		if n := dials.Load(); n != 1 {
			t.Errorf("dialed %d times, want 1", n)
		}
	})
}

// TestCloseIdleConnections: CloseIdleConnections closes the connections
// carrying no stream, on all hosts, and leaves the others; Conns() counts
// the connections to all hosts.
func TestCloseIdleConnections(t *testing.T) {
	idleSrv := newGoServer(t, echo, nil)
	idleSrv2 := newGoServer(t, echo, nil)
	busySrv := newHeldServer(t, nil)
	tr, _ := newTransport(t, &h2c.Transport{})
	get(t, tr, idleSrv.url)
	get(t, tr, idleSrv2.url)
	res := goCall(tr, newRequest(t, newCtx(t), "GET", busySrv.url+"/held", nil, 0))
	testproc.Eventually(t, waitLimit, "the call is held", func() bool { return busySrv.arrived.Load() == 1 })
	if n := tr.Conns(); n != 3 {
		t.Errorf("Conns() = %d with connections to 3 hosts, want 3", n)
	}
	tr.CloseIdleConnections()
	testproc.Eventually(t, waitLimit, "the idle connections are closed", func() bool { return tr.Conns() == 1 })
	testproc.Eventually(t, waitLimit, "the servers see them closed", func() bool {
		return idleSrv.ln.closed.Load() == 1 && idleSrv2.ln.closed.Load() == 1
	})
	busySrv.release <- struct{}{}
	if r := receive(t, res, "the held call"); r.Err() != nil || r.Body != "ok" {
		t.Errorf("held call: %q, %v; want ok", r.Body, r.Err())
	}
	if n := busySrv.ln.closed.Load(); n != 0 {
		t.Errorf("the busy connection was closed")
	}
}
