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
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"knative.dev/event-forwarding-proxy/test/testproc"
)

// TestMemoryBudgetBinary: async events of 4 MiB to a destination that
// never answers are accepted while the memory budget has room for them,
// and refused 503 overloaded with Retry-After after, so that the process's
// heap stays near the budget instead of growing with every event accepted.
func TestMemoryBudgetBinary(t *testing.T) {
	const (
		event  = 4 << 20
		budget = 32 << 20
		events = 40
		// Each event reserves its 4 MiB and a few hundred bytes of
		// headers: 7 fit in 32 MiB, the 8th does not.
		fit = 7
		// The heap may hold the budget, the idle process and what is
		// being read and sent besides: a generous bound, far below the
		// 160 MiB that 40 events held would take.
		heapBound = budget + 48<<20
	)
	var arrived atomic.Int64
	stop := make(chan struct{})
	never := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		arrived.Add(1)
		_, _ = io.Copy(io.Discard, r.Body)
		select { // never answers
		case <-r.Context().Done():
		case <-stop:
		}
	}))
	t.Cleanup(never.Close)
	t.Cleanup(func() { close(stop) }) // before Close, which waits for the handlers
	p := startProxy(t,
		"FORWARD_MEMORY_BUDGET_BYTES="+strconv.Itoa(budget),
		"FORWARD_MAX_INFLIGHT=1000", "FORWARD_MAX_INFLIGHT_PER_DESTINATION=1000", "FORWARD_MAX_INFLIGHT_PER_TENANT=1000",
		"FORWARD_TENANT_RESERVE=0", "FORWARD_LOG_LEVEL=warn")

	// The heap's peak, sampled while the events are sent (a scrape that
	// fails is a sample missed; the last one, below, must succeed).
	var peak atomic.Int64
	sample := func() {
		fams, err := testproc.Scrape(p.MetricsURL)
		if err != nil {
			return
		}
		if v := int64(value(fams, "go_memstats_heap_inuse_bytes", nil)); v > peak.Load() {
			peak.Store(v)
		}
	}
	idle := int64(value(p.scrape(t), "go_memstats_heap_inuse_bytes", nil))
	ctx, stopSampling := context.WithCancel(t.Context())
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				sample()
			}
		}
	}()

	body := bytes.Repeat([]byte("e"), event)
	client := &http.Client{Transport: &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 4}}
	t.Cleanup(client.CloseIdleConnections)
	var (
		mu       sync.Mutex
		statuses = map[int]int{}
		bad      []string
		wg       sync.WaitGroup
		next     atomic.Int64
	)
	for range 4 {
		wg.Go(func() {
			for next.Add(1) <= events {
				req, err := http.NewRequest(http.MethodPost, p.URL, bytes.NewReader(body))
				if err != nil {
					t.Error(err)
					return
				}
				req.Header.Set("Kn-Forward-To", never.URL)
				req.Header.Set("Prefer", "respond-async")
				req.Header.Set("Kn-Forward-Timeout", "PT5M")
				resp, err := client.Do(req)
				if err != nil {
					mu.Lock()
					bad = append(bad, err.Error())
					mu.Unlock()
					continue
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				mu.Lock()
				statuses[resp.StatusCode]++
				if resp.StatusCode == http.StatusServiceUnavailable &&
					(resp.Header.Get("Kn-Forward-Error") != "overloaded" || resp.Header.Get("Retry-After") == "") {
					bad = append(bad, "503 with Kn-Forward-Error "+resp.Header.Get("Kn-Forward-Error")+", Retry-After "+resp.Header.Get("Retry-After"))
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	eventually(t, 10*time.Second, "every accepted event reaches the destination", func() bool { return arrived.Load() >= fit })
	sample()
	stopSampling()
	<-sampled

	fams := p.scrape(t)
	reserved := value(fams, "kn_forward_memory_reserved_bytes", nil)
	t.Logf("%d events of %d MiB, budget %d MiB: %v; heap in use %d MiB idle, %d MiB at its peak; %.1f MiB reserved",
		events, event>>20, budget>>20, statuses, idle>>20, peak.Load()>>20, reserved/(1<<20))
	if len(bad) > 0 {
		t.Errorf("wrong answers: %q", bad)
	}
	if statuses[http.StatusAccepted] != fit || statuses[http.StatusServiceUnavailable] != events-fit {
		t.Errorf("answers %v, want %d × 202 and %d × 503", statuses, fit, events-fit)
	}
	if n := arrived.Load(); n != fit {
		t.Errorf("the destination got %d events, want the %d accepted", n, fit)
	}
	if got := value(fams, "kn_forward_memory_budget_bytes", nil); got != budget {
		t.Errorf("kn_forward_memory_budget_bytes = %v, want %d", got, budget)
	}
	if reserved <= fit*event || reserved > budget {
		t.Errorf("kn_forward_memory_reserved_bytes = %v, want the %d events held, within %d", reserved, fit, budget)
	}
	if peak.Load() > heapBound {
		t.Errorf("heap in use peaked at %d MiB, want at most %d MiB", peak.Load()>>20, heapBound>>20)
	}
}
