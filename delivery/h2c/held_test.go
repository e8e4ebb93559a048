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
	"fmt"
	"io"
	"net/http"
	"runtime"
	"sync"
	"testing"

	"golang.org/x/net/http2"

	"knative.dev/event-forwarding-proxy/delivery/h2c"
	"knative.dev/event-forwarding-proxy/test/testproc"
)

// holdServer is a frame server that holds every stream, with no goroutine
// per stream (one per connection reads), until the test answers them all.
type holdServer struct {
	*frameServer
	mu   sync.Mutex
	held map[*frameConn][]uint32
}

// newHoldServer starts a holdServer allowing maxStreams streams per
// connection.
func newHoldServer(tb testing.TB, maxStreams uint32) *holdServer {
	tb.Helper()
	h := &holdServer{held: map[*frameConn][]uint32{}}
	h.frameServer = newFrameServer(tb, []http2.Setting{{ID: http2.SettingMaxConcurrentStreams, Val: maxStreams}}, func(fc *frameConn) {
		for {
			f, err := fc.next()
			if err != nil {
				return
			}
			if hf, ok := f.(*http2.MetaHeadersFrame); ok && hf.StreamID == fc.lastStream {
				h.mu.Lock()
				h.held[fc] = append(h.held[fc], hf.StreamID)
				h.mu.Unlock()
			}
		}
	})
	return h
}

// answerAll answers every stream held so far with 200 "ok".
func (h *holdServer) answerAll() {
	h.mu.Lock()
	held := h.held
	h.held = map[*frameConn][]uint32{}
	h.mu.Unlock()
	for fc, ids := range held {
		for _, id := range ids {
			if fc.answer(id, "200", "ok") != nil {
				break
			}
		}
	}
}

// startHeld starts n calls to url through rt with the context ctx, each on
// a goroutine of its own that does nothing else; errs gets each one's error
// (nil for an answer "ok").
func startHeld(tb testing.TB, ctx context.Context, rt http.RoundTripper, url string, n int, errs chan<- error) {
	for range n {
		req := newRequest(tb, ctx, "GET", url, nil, 0)
		go func() {
			resp, err := rt.RoundTrip(req)
			if err == nil {
				var b []byte
				b, err = io.ReadAll(resp.Body)
				resp.Body.Close()
				if err == nil && string(b) != "ok" {
					err = fmt.Errorf("answer %q, want ok", b)
				}
			}
			errs <- err
		}()
	}
}

// TestHeldCallsAddNoGoroutines: 1,000 calls waiting for their answers add
// no goroutine to the callers' own but a reader per connection (the
// destination, a frame server, has two goroutines per connection and none
// per stream). A transport with a goroutine per stream would add 1,000
// more. Once the calls are answered and the idle connections closed, no
// goroutine is left.
func TestHeldCallsAddNoGoroutines(t *testing.T) {
	const calls = 1000
	srv := newHoldServer(t, 10000)
	base := runtime.NumGoroutine()
	tr, _ := newTransport(t, &h2c.Transport{})
	errs := make(chan error, calls)
	// Warm up: one connection, up and idle.
	ctx := newCtx(t)
	startHeld(t, ctx, tr, srv.url, 1, errs)
	testproc.Eventually(t, waitLimit, "the first call reaches the destination", func() bool { return srv.streams.Load() == 1 })
	srv.answerAll()
	if err := receive(t, errs, "the first call"); err != nil {
		t.Fatal(err)
	}
	runtime.GC()
	before := runtime.NumGoroutine()

	startHeld(t, ctx, tr, srv.url, calls, errs)
	testproc.Eventually(t, waitLimit, fmt.Sprintf("%d calls are held", calls), func() bool { return srv.streams.Load() == calls+1 })
	during := runtime.NumGoroutine()
	conns := int(srv.accepted.Load())
	// Per new connection: the transport's reader, one more it may run
	// (e.g. a timer's function), the server's reader (the answers are
	// written from the test's goroutine). The warm connection's are in
	// before.
	bound := calls + (conns-1)*3 + 10
	t.Logf("%d goroutines before, %d with %d calls held on %d connections (bound %d)", before, during, calls, conns, before+bound)
	if during-before > bound {
		buf := make([]byte, 1<<20)
		t.Errorf("%d goroutines more with %d calls held on %d connections, want at most %d (a goroutine per held stream?)\n%s",
			during-before, calls, conns, bound, buf[:runtime.Stack(buf, true)])
	}
	if n := tr.Conns(); n != conns {
		t.Errorf("Conns() = %d, the server accepted %d", n, conns)
	}

	srv.answerAll()
	for range calls {
		if err := receive(t, errs, "a held call to end"); err != nil {
			t.Error(err)
		}
	}
	tr.CloseIdleConnections()
	testproc.Eventually(t, waitLimit, "the transport's connections are closed", func() bool { return tr.Conns() == 0 })
	testproc.Eventually(t, waitLimit, "no goroutine is left", func() bool { return runtime.NumGoroutine() <= base })
}
