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

package proxy

import (
	"net/http"
	"net/http/httptest"
	"os"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"knative.dev/event-forwarding-proxy/proxy/proxytest"
)

// BenchmarkAsyncHeldHeap holds 5,000 async events at an h2c destination
// in each iteration and reports the heap they take per event, after a
// collection: the in-process destination's share and the client's
// included, so it reads above the proxy's own (the profile tells them
// apart). With $ASYNC_HEAP_PROFILE set, it also writes the heap
// profile of the first iteration's held state there, for go tool pprof
// (run with GODEBUG=memprofilerate=1 for exact figures; the proxy's
// frames are those of packages proxy, delivery and internal).
func BenchmarkAsyncHeldHeap(b *testing.B) {
	const n = 5000
	var (
		held    atomic.Int64
		mu      sync.Mutex
		release = make(chan struct{})
	)
	sink := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		rel := release
		mu.Unlock()
		held.Add(1)
		defer held.Add(-1)
		select {
		case <-rel:
		case <-r.Context().Done():
		}
	}))
	sink.Config.Protocols = new(http.Protocols)
	sink.Config.Protocols.SetUnencryptedHTTP2(true)
	sink.Config.HTTP2 = &http.HTTP2Config{MaxConcurrentStreams: n}
	sink.Start()
	b.Cleanup(sink.Close)
	max := strconv.Itoa(2 * n)
	tp := newTestProxy(b, map[string]string{
		"FORWARD_H2C_HOSTS": "127.0.0.1", "FORWARD_MAX_INFLIGHT": max,
		"FORWARD_MAX_INFLIGHT_PER_DESTINATION": max, "FORWARD_MAX_INFLIGHT_PER_TENANT": max,
		"FORWARD_H2_MAX_CONCURRENT_STREAMS": max, "FORWARD_MAX_TIMEOUT": "60s",
	})
	releaseAll := func() {
		mu.Lock()
		close(release)
		release = make(chan struct{})
		mu.Unlock()
	}
	b.Cleanup(releaseAll) // first: the proxy's cleanup waits for the events
	client := h2cClient(b)
	body := `{"id":"1","source":"/bench","type":"dev.knative.bench","specversion":"1.0"}`
	profile := os.Getenv("ASYNC_HEAP_PROFILE")
	var perEvent float64
	for i := 0; b.Loop(); i++ {
		base := heapAfterGC()
		for k := range n {
			req := tp.newRequest(b, sink.URL+"/", strings.NewReader(body))
			req.Header.Set("Prefer", "respond-async")
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Ce-Id", strconv.Itoa(i*n+k))
			resp, got := do(b, client, req)
			if resp.StatusCode != http.StatusAccepted {
				b.Fatalf("event %d: %d %s", k, resp.StatusCode, got)
			}
		}
		proxytest.Eventually(b, 30*time.Second, func() bool { return held.Load() == n }, "the sink never held every event")
		client.CloseIdleConnections()
		perEvent = (float64(heapAfterGC()) - float64(base)) / n
		if i == 0 && profile != "" {
			writeHeapProfile(b, profile)
		}
		releaseAll()
		proxytest.Eventually(b, 30*time.Second, func() bool { return held.Load() == 0 && tp.Limiter.Inflight() == 0 },
			"the held events did not end")
	}
	b.ReportMetric(perEvent, "heap-B/event-with-sink")
}

func writeHeapProfile(b *testing.B, path string) {
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	heapAfterGC()
	if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
		b.Fatal(err)
	}
}
