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
	"sync/atomic"
	"testing"
	"time"

	"knative.dev/event-forwarding-proxy/proxy/proxytest"
)

// TestAsyncHeldHeapProfile writes the heap profile of n async events held
// by an h2c destination to $ASYNC_HEAP_PROFILE, for reading with
// go tool pprof (run with GODEBUG=memprofilerate=1 for exact figures;
// the proxy's frames are those of packages proxy and delivery). Skipped
// unless the variable is set.
func TestAsyncHeldHeapProfile(t *testing.T) {
	path := os.Getenv("ASYNC_HEAP_PROFILE")
	if path == "" {
		t.Skip("ASYNC_HEAP_PROFILE not set")
	}
	const n = 5000
	var held atomic.Int64
	release := make(chan struct{})
	sink := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		held.Add(1)
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	sink.Config.Protocols = new(http.Protocols)
	sink.Config.Protocols.SetUnencryptedHTTP2(true)
	sink.Config.HTTP2 = &http.HTTP2Config{MaxConcurrentStreams: n}
	sink.Start()
	t.Cleanup(sink.Close)
	max := strconv.Itoa(2 * n)
	tp := newTestProxy(t, map[string]string{
		"FORWARD_H2C_HOSTS": "127.0.0.1", "FORWARD_MAX_INFLIGHT": max,
		"FORWARD_MAX_INFLIGHT_PER_DESTINATION": max, "FORWARD_MAX_INFLIGHT_PER_TENANT": max,
		"FORWARD_H2_MAX_CONCURRENT_STREAMS": max, "FORWARD_MAX_TIMEOUT": "60s",
	})
	t.Cleanup(func() { close(release) }) // first: the proxy's cleanup waits for the events
	client := h2cClient(t)
	body := `{"id":"1","source":"/bench","type":"dev.knative.bench","specversion":"1.0"}`
	for i := range n {
		req := tp.newRequest(t, sink.URL+"/", strings.NewReader(body))
		req.Header.Set("Prefer", "respond-async")
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Ce-Id", strconv.Itoa(i))
		resp, b := do(t, client, req)
		if resp.StatusCode != http.StatusAccepted {
			t.Fatalf("event %d: %d %s", i, resp.StatusCode, b)
		}
	}
	proxytest.Eventually(t, 30*time.Second, func() bool { return held.Load() == n }, "the sink never held every event")
	client.CloseIdleConnections()
	base := heapAfterGC()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	heapAfterGC()
	if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d events held; heap %d B in all", n, base)
}
