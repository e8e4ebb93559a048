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
	"bytes"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"knative.dev/event-forwarding-proxy/proxy/proxytest"
)

// TestAsyncBurstDeliversEveryEvent: a burst of async events, handed off
// at once over h2c, is delivered whole, each event once, however the
// first attempts were queued behind the hand-offs; every slot is then
// free again.
func TestAsyncBurstDeliversEveryEvent(t *testing.T) {
	const events = 500
	dest := proxytest.NewH2CDestination(t, nil)
	limit := strconv.Itoa(events)
	tp := newTestProxy(t, map[string]string{
		"FORWARD_H2C_HOSTS":    "127.0.0.1",
		"FORWARD_MAX_INFLIGHT": limit, "FORWARD_MAX_INFLIGHT_PER_DESTINATION": limit, "FORWARD_MAX_INFLIGHT_PER_TENANT": limit,
	})
	client := h2cClient(t)

	var wg sync.WaitGroup
	statuses := make(chan int, events)
	for i := range events {
		wg.Go(func() {
			req := tp.newRequest(t, dest.URL+"/in", bytes.NewReader(event))
			req.Header.Set("Prefer", "respond-async")
			req.Header.Set("Ce-Id", strconv.Itoa(i))
			resp, _ := do(t, client, req)
			statuses <- resp.StatusCode
		})
	}
	wg.Wait()
	close(statuses)
	for s := range statuses {
		if s != http.StatusAccepted {
			t.Fatalf("a hand-off was answered %d, want 202", s)
		}
	}
	proxytest.Eventually(t, 10*time.Second, func() bool { return dest.Count() >= events && tp.Limiter.Inflight() == 0 },
		"the burst's deliveries did not all end")
	seen := map[string]int{}
	for _, r := range dest.Requests() {
		seen[r.Header.Get("Ce-Id")]++
	}
	for i := range events {
		if n := seen[strconv.Itoa(i)]; n != 1 {
			t.Errorf("event %d delivered %d times, want once", i, n)
		}
	}
	if len(seen) != events {
		t.Errorf("%d distinct events delivered, want %d", len(seen), events)
	}
}
