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
	"cmp"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"knative.dev/event-forwarding-proxy/delivery"
	"knative.dev/event-forwarding-proxy/proxy/proxytest"
)

// TestRefusalsReadNothingDialNothing: a call refused on arrival is answered
// at once, before its body is sent (the caller declared a megabyte, or the
// largest event, and waits), and nothing is dialed for it.
func TestRefusalsReadNothingDialNothing(t *testing.T) {
	limits := func(pod, dest, tenant int) map[string]string {
		return map[string]string{
			"FORWARD_MAX_INFLIGHT": strconv.Itoa(pod), "FORWARD_MAX_INFLIGHT_PER_DESTINATION": strconv.Itoa(dest),
			"FORWARD_MAX_INFLIGHT_PER_TENANT": strconv.Itoa(tenant), "FORWARD_MAX_EVENT_BYTES": "2097152",
		}
	}
	budgetFull := limits(4, 4, 4)
	budgetFull["FORWARD_MAX_HEADER_BYTES"] = "8192"
	budgetFull["FORWARD_MEMORY_BUDGET_BYTES"] = strconv.Itoa(2097152 + 8192) // the least allowed
	tests := []struct {
		name       string
		env        map[string]string
		held       []string // Kn-Namespace of the calls held first, at the busy destination
		heldHeader int      // bytes of a header each held call carries
		tenant     string   // of the refused call
		async      bool     // the refused call prefers respond-async
		declared   int      // its Content-Length; if zero, a megabyte
		drain      bool
		want       Reason
	}{
		{name: "pod full", env: limits(2, 2, 2), held: []string{"a", "b"}, tenant: "c", want: ReasonOverloaded},
		{name: "destination full", env: limits(4, 2, 4), held: []string{"a", "b"}, tenant: "c", want: ReasonDestinationBusy},
		{name: "tenant over its share", env: limits(4, 4, 2), held: []string{"a", "a"}, tenant: "a", want: ReasonTenantLimited},
		{name: "draining", env: limits(4, 4, 4), drain: true, tenant: "a", want: ReasonDraining},
		// The held call's headers leave less than the largest event and
		// its headers.
		{name: "memory budget full", env: budgetFull, held: []string{"a"}, heldHeader: 8000, tenant: "b",
			async: true, declared: 2097152, want: ReasonOverloaded},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			canary := proxytest.NewCanary(t)
			hold := proxytest.NewHold(t)
			busy := proxytest.NewDestination(t, hold.Reply)
			fp := newFaultProxy(t, tt.env, nil)
			client := h1Client(t)
			var calls []<-chan result
			for _, ns := range tt.held {
				req := fp.newRequest(t, busy.URL, strings.NewReader("e"))
				req.Header.Set(delivery.HeaderNamespace, ns)
				if tt.heldHeader > 0 {
					req.Header.Set("X-Padding", strings.Repeat("p", tt.heldHeader))
				}
				calls = append(calls, goDo(client, req))
			}
			proxytest.Eventually(t, 5*time.Second, func() bool { return busy.Count() == len(tt.held) }, "the calls were not held")
			if tt.drain {
				fp.Drain()
			}
			dest := canary.URL("127.0.0.1")
			if tt.want == ReasonDestinationBusy {
				dest = busy.URL
			}
			prefer := ""
			if tt.async {
				prefer = "Prefer: respond-async\r\n"
			}
			a := rawSend(t, fp.Addr, "POST / HTTP/1.1\r\nHost: proxy\r\nKn-Forward-To: "+dest+
				"\r\nKn-Namespace: "+tt.tenant+"\r\n"+prefer+"Content-Length: "+strconv.Itoa(cmp.Or(tt.declared, 1048576))+"\r\n\r\n")
			wantProxyError(t, a.resp, a.body, tt.want)
			if n := canary.Accepted(); n != 0 {
				t.Errorf("the destination accepted %d connections, want 0", n)
			}
			if n := busy.Count(); n != len(tt.held) {
				t.Errorf("the busy destination saw %d calls, want %d", n, len(tt.held))
			}
			hold.Release()
			for _, c := range calls {
				if r := await(t, c); r.err != nil || r.resp.StatusCode != http.StatusOK {
					t.Errorf("a held call ended with %v %v", r.err, r.resp)
				}
			}
		})
	}
}

// floodCalls sends n concurrent calls of tenant to dest and returns their
// statuses and reasons once all ended.
func floodCalls(t *testing.T, fp *faultProxy, client *http.Client, dest, tenant string, n int) (<-chan []string, *atomic.Int64) {
	out := make(chan []string, 1)
	var (
		mu       sync.Mutex
		got      []string
		wg       sync.WaitGroup
		answered atomic.Int64
	)
	for range n {
		req := fp.newRequest(t, dest, strings.NewReader("e"))
		req.Header.Set(delivery.HeaderNamespace, tenant)
		wg.Go(func() {
			r := <-goDo(client, req)
			s := "error"
			if r.err == nil {
				s = strconv.Itoa(r.resp.StatusCode) + " " + r.resp.Header.Get(delivery.HeaderForwardError)
			}
			mu.Lock()
			got = append(got, strings.TrimSpace(s))
			mu.Unlock()
			answered.Add(1)
		})
	}
	go func() { wg.Wait(); out <- got }()
	return out, &answered
}

// TestOneTenantFloodsASlowDestination: a tenant floods a slow destination
// far past its share; another tenant's single call, to another
// destination, still goes through at once; the flood's calls are either
// held and answered, or refused with 429 tenant_limited or 503.
func TestOneTenantFloodsASlowDestination(t *testing.T) {
	hold := proxytest.NewHold(t)
	slow := proxytest.NewDestination(t, hold.Reply)
	fast := proxytest.NewDestination(t, nil)
	fp := newFaultProxy(t, map[string]string{
		"FORWARD_MAX_INFLIGHT": "16", "FORWARD_MAX_INFLIGHT_PER_DESTINATION": "16",
		"FORWARD_MAX_INFLIGHT_PER_TENANT": "12", "FORWARD_TENANT_RESERVE": "4",
	}, nil)
	client := h1Client(t)
	results, _ := floodCalls(t, fp, client, slow.URL, "greedy", 60)
	proxytest.Eventually(t, 10*time.Second, func() bool { return slow.Count() == 12 }, "the flood did not fill the tenant's share")

	for i := range 3 {
		req := fp.newRequest(t, fast.URL, strings.NewReader("e"))
		req.Header.Set(delivery.HeaderNamespace, "quiet")
		if resp, body := do(t, client, req); resp.StatusCode != http.StatusOK {
			t.Errorf("call %d of the quiet tenant got %d %q while the other flooded", i, resp.StatusCode, body)
		}
	}
	hold.Release()
	counts := map[string]int{}
	for _, s := range <-results {
		counts[s]++
	}
	t.Logf("flood outcomes: %v", counts)
	if counts["200"] < 12 || counts["429 tenant_limited"] == 0 || counts["200"]+counts["429 tenant_limited"]+counts["503 overloaded"] != 60 {
		t.Errorf("flood outcomes %v: want 200 for the held calls and 429/503 refusals for the rest", counts)
	}
	if n := slow.Count(); n != counts["200"] {
		t.Errorf("the slow destination saw %d calls, want %d (refused calls never reach it)", n, counts["200"])
	}
}

// TestSlowDestinationCapped: a destination that holds every call gets at
// most FORWARD_MAX_INFLIGHT_PER_DESTINATION of them, the rest refused with
// 503 destination_busy, while calls to other destinations flow.
func TestSlowDestinationCapped(t *testing.T) {
	hold := proxytest.NewHold(t)
	slow := proxytest.NewDestination(t, hold.Reply)
	fast := proxytest.NewDestination(t, nil)
	fp := newFaultProxy(t, map[string]string{
		"FORWARD_MAX_INFLIGHT": "16", "FORWARD_MAX_INFLIGHT_PER_DESTINATION": "4", "FORWARD_MAX_INFLIGHT_PER_TENANT": "16",
	}, nil)
	client := h1Client(t)
	results, answered := floodCalls(t, fp, client, slow.URL, "a", 20)
	proxytest.Eventually(t, 10*time.Second, func() bool { return slow.Count() == 4 }, "the slow destination was not filled")
	// Every call of the flood has arrived once all but the held ones are
	// answered; released earlier, a late one would find a free slot.
	proxytest.Eventually(t, 10*time.Second, func() bool { return answered.Load() == 16 }, "the calls past the cap were not all answered")
	for i := range 10 {
		if resp, body := do(t, client, fp.newRequest(t, fast.URL, strings.NewReader("e"))); resp.StatusCode != http.StatusOK {
			t.Errorf("call %d to another destination got %d %q", i, resp.StatusCode, body)
		}
	}
	hold.Release()
	counts := map[string]int{}
	for _, s := range <-results {
		counts[s]++
	}
	if counts["200"] != 4 || counts["503 destination_busy"] != 16 {
		t.Errorf("outcomes at the slow destination %v, want 4 × 200 and 16 × 503 destination_busy", counts)
	}
}
