//go:build integration

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

package e2e

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"knative.dev/event-forwarding-proxy/test/testproc"
)

// TestEveryLostEventIsLogged: each async event that fails for good gets a
// line of its own, however many fail at once. The logger the proxy used
// kept the first 100 lines of a message a second and then 1 in 100, so
// 3,000 failures left about 130 lines.
func TestEveryLostEventIsLogged(t *testing.T) {
	const events = 3000
	p := startProxy(t, "FORWARD_LOG_LEVEL=info", "FORWARD_ASYNC_RETRY=0")
	dest := testproc.NewSink(t, &testproc.SinkOptions{Respond: func(w http.ResponseWriter, r *http.Request, _ int) {
		w.WriteHeader(http.StatusBadRequest) // final: never retried
	}})
	send := make(chan int)
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() {
			for i := range send {
				resp := p.post(t, "lost", "Kn-Forward-To", dest.URL, "Prefer", "respond-async", "Ce-Id", fmt.Sprintf("lost-%d", i))
				resp.Body.Close()
				if resp.StatusCode != http.StatusAccepted {
					t.Errorf("event %d: status %d, want 202", i, resp.StatusCode)
				}
			}
		})
	}
	for i := range events {
		send <- i
	}
	close(send)
	wg.Wait()
	eventually(t, 60*time.Second, "every event reached the destination", func() bool { return dest.Count() == events })
	failed := func() int { return strings.Count(p.Logs.String(), "Async delivery failed") }
	deadline := time.Now().Add(30 * time.Second)
	for failed() < events && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if n := failed(); n != events {
		t.Fatalf("%d lines say Async delivery failed, want one for each of the %d lost events", n, events)
	}
	logs := p.Logs.String()
	for i := range events {
		if !strings.Contains(logs, fmt.Sprintf(`"ceId":"lost-%d"`, i)) {
			t.Errorf("no line names lost event lost-%d", i)
		}
	}
}
