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
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"testing"

	"knative.dev/event-forwarding-proxy/delivery/http1"
	"knative.dev/event-forwarding-proxy/delivery/internal/calltest"
	"knative.dev/event-forwarding-proxy/test/testproc"
)

// TestTransportLeavesNoGoroutines: once its calls have ended and its idle
// connections are closed, the transport has left no goroutine behind
// (it runs none but the writer of a streaming body).
func TestTransportLeavesNoGoroutines(t *testing.T) {
	srv, states := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		if r.URL.Path == "/big" {
			io.WriteString(w, strings.Repeat("x", 256<<10))
			return
		}
		w.Write(b)
	})
	before := runtime.NumGoroutine()
	tr, _ := newTransport(t, &http1.Transport{ReadAheadMax: 64})
	for i := range 50 {
		body := strings.Repeat("s", i*10) // within and over the read-ahead
		mustCall(t, tr, newRequest(t, newCtx(t), "POST", srv.URL, strings.NewReader(body), int64(len(body))))
		mustCall(t, tr, newRequest(t, newCtx(t), "POST", srv.URL, io.NopCloser(strings.NewReader(body)), -1))
	}
	var wg sync.WaitGroup
	for range 10 {
		wg.Go(func() {
			for range 10 {
				body := strings.Repeat("c", 100)
				doCall(tr, newRequest(t, newCtx(t), "POST", srv.URL, strings.NewReader(body), int64(len(body))))
			}
		})
	}
	wg.Wait()
	// An answer body closed early, and a call cut by its context.
	resp, err := tr.RoundTrip(newRequest(t, newCtx(t), "GET", srv.URL+"/big", nil, 0))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	ctx, cancel := context.WithCancel(newCtx(t))
	pr, pw := io.Pipe()
	go pw.Write([]byte("started"))
	res := make(chan result, 1)
	go func() { res <- doCall(tr, newRequest(t, ctx, "POST", srv.URL, pr, -1)) }()
	cancel()
	receive(t, res, "the cancelled call to end")
	pw.Close()
	tr.CloseIdleConnections()
	testproc.Eventually(t, waitLimit, "the destination sees every connection closed", func() bool {
		return states.closed.Load() == states.opened.Load()
	})
	t.Cleanup(func() {
		if t.Failed() {
			buf := make([]byte, 1<<20)
			t.Logf("%d goroutines before, now:\n%s", before, buf[:runtime.Stack(buf, true)])
		}
	})
	testproc.Eventually(t, waitLimit, "no goroutine is left", func() bool { return runtime.NumGoroutine() <= before })
}

// BenchmarkSmallPost: a 200-byte POST answered 200 with a small body,
// through this Transport and through net/http's (HTTP/1.1, as configured
// for destinations), one call at a time and 32 per core at once, as a
// proxy's calls come. Besides time and allocations it reports the
// process's CPU time per call (cpu-µs/op: client and the in-process server
// together, the server the same for both clients). One call at a time on
// two cores is where this Transport does worst: each call parks and wakes
// its one goroutine, and the idle core spins looking for work.
func BenchmarkSmallPost(b *testing.B) {
	clients := []struct {
		name  string
		newRT func() http.RoundTripper
	}{
		{"http1", func() http.RoundTripper { return &http1.Transport{Dial: (&net.Dialer{}).DialContext} }},
		{"net-http", func() http.RoundTripper {
			tr := &http.Transport{
				Proxy:               nil,
				DialContext:         (&net.Dialer{}).DialContext,
				MaxIdleConnsPerHost: 1024,
				DisableCompression:  true,
				Protocols:           new(http.Protocols),
			}
			tr.Protocols.SetHTTP1(true)
			return tr
		}},
	}
	for _, c := range clients {
		for _, perCore := range []int{0, 32} {
			name := c.name + "/one-at-a-time"
			if perCore > 0 {
				name = fmt.Sprintf("%s/%d-per-core", c.name, perCore)
			}
			b.Run(name, func(b *testing.B) { benchmarkSmallPost(b, c.newRT(), perCore) })
		}
	}
}

// benchmarkSmallPost runs the calls of BenchmarkSmallPost through rt: one
// at a time when perCore is 0, else perCore goroutines per core.
func benchmarkSmallPost(b *testing.B, rt http.RoundTripper, perCore int) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		io.WriteString(w, `{"accepted":true}`)
	}))
	defer srv.Close()
	defer rt.(interface{ CloseIdleConnections() }).CloseIdleConnections()
	calltest.BenchPost(b, rt, srv.URL, perCore)
}
