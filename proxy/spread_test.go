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
	"fmt"
	"net/http"
	"sort"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"knative.dev/event-forwarding-proxy/proxy/proxytest"
)

// handOff hands event id off to tp for dest and wants 202.
func handOff(t *testing.T, tp *testProxy, dest, id string) {
	t.Helper()
	req := tp.newRequest(t, dest, bytes.NewReader(event))
	req.Header.Set("Prefer", "respond-async")
	req.Header.Set("Ce-Id", id)
	resp, body := do(t, h1Client(t), req)
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("hand-off %s: %d %q, want 202", id, resp.StatusCode, body)
	}
}

// arrivedIDs waits for n requests at dest and returns their Ce-Id, sorted,
// failing on any header meant for the proxy.
func arrivedIDs(t *testing.T, dest *proxytest.Destination, n int) []string {
	t.Helper()
	var ids []string
	for range n {
		r := dest.Next(t)
		for k := range r.Header {
			if strings.HasPrefix(k, "Kn-Forward-") {
				t.Errorf("%s reached the destination", k)
			}
		}
		ids = append(ids, r.Header.Get("Ce-Id"))
	}
	sort.Strings(ids)
	return ids
}

// TestSpreadToAFreerPod: above FORWARD_SPREAD_ABOVE a pod offers each
// async call to the pod behind FORWARD_SPREAD_URL, which takes it while it
// holds fewer calls and declines it once taking it would not even them
// out; every event reaches the destination once, delivered by the pod
// that kept it.
func TestSpreadToAFreerPod(t *testing.T) {
	hold := proxytest.NewHold(t)
	dest := proxytest.NewDestination(t, hold.Reply)
	other := newObserved(t, nil)
	pod := newObserved(t, map[string]string{"FORWARD_SPREAD_ABOVE": "2", "FORWARD_SPREAD_URL": other.URL})

	// Held here: 1, 2; then 3 > 2 is offered and taken (here 2, there 1),
	// again (2 and 2); the fifth is declined there (2 + 1 >= 3): here 3.
	for i := range 5 {
		handOff(t, pod.testProxy, dest.URL, fmt.Sprint("e-", i))
	}
	if got, want := []int{pod.Limiter.Inflight(), other.Limiter.Inflight()}, []int{3, 2}; got[0] != want[0] || got[1] != want[1] {
		t.Errorf("calls held here and there = %v, want %v", got, want)
	}
	// Each event counts once as accepted, where it is delivered; the
	// declined offer counts nowhere.
	for _, c := range []struct {
		name    string
		o       *observed
		outcome string
		want    int64
	}{
		{"here", pod, "accepted", 3}, {"here", pod, "spread", 2},
		{"there", other, "accepted", 2}, {"there", other, "rejected", 0},
	} {
		if got := c.o.sum(t, metricRequests, attribute.String("outcome", c.outcome)); got != c.want {
			t.Errorf("%s: %s{outcome=%s} = %d, want %d", c.name, metricRequests, c.outcome, got, c.want)
		}
	}
	hold.Release()
	ids := arrivedIDs(t, dest, 5)
	if want := []string{"e-0", "e-1", "e-2", "e-3", "e-4"}; fmt.Sprint(ids) != fmt.Sprint(want) {
		t.Errorf("events delivered = %v, want each of %v once", ids, want)
	}
	proxytest.Eventually(t, 5*time.Second, func() bool { return pod.Limiter.Inflight() == 0 && other.Limiter.Inflight() == 0 }, "both pods hold no call once the events are delivered")
	if n := dest.Count(); n != 5 {
		t.Errorf("%d requests reached the destination, want 5", n)
	}
}

// TestSpreadKeepsTheCallWhenNoPodAnswers: an offer that finds no pod
// (connection refused) leaves the call with the pod that has it, which
// delivers it and warns once.
func TestSpreadKeepsTheCallWhenNoPodAnswers(t *testing.T) {
	hold := proxytest.NewHold(t)
	dest := proxytest.NewDestination(t, hold.Reply)
	core, logs := observer.New(zapcore.WarnLevel)
	pod := newTestProxyLogger(t, map[string]string{"FORWARD_SPREAD_ABOVE": "1", "FORWARD_SPREAD_URL": "http://" + proxytest.NewRefusingAddr(t)}, zap.New(core).Sugar())

	// The first is kept (1 held); the next two are offered and kept.
	for i := range 3 {
		handOff(t, pod, dest.URL, fmt.Sprint("e-", i))
	}
	if n := pod.Limiter.Inflight(); n != 3 {
		t.Errorf("%d calls held, want the 3 handed off", n)
	}
	hold.Release()
	if ids := arrivedIDs(t, dest, 3); fmt.Sprint(ids) != "[e-0 e-1 e-2]" {
		t.Errorf("events delivered = %v, want e-0, e-1 and e-2 once each", ids)
	}
	if n := logs.FilterMessageSnippet("failed; this pod keeps it").Len(); n != 1 {
		t.Errorf("%d warnings about failed offers, want 1 (once a minute): %v", n, logs.All())
	}
}

// TestSpreadOfferNotTaken: a pod declines an offer from one that holds no
// more than it would (503 overloaded, counted nowhere), takes no offer of
// a synchronous call, and never passes the offer on.
func TestSpreadOfferNotTaken(t *testing.T) {
	dest := proxytest.NewDestination(t, nil)
	pod := newTestProxy(t, nil)

	req := pod.newRequest(t, dest.URL, bytes.NewReader(event))
	req.Header.Set("Prefer", "respond-async")
	req.Header.Set(headerSpreadOffer, "1")
	resp, body := do(t, h1Client(t), req)
	wantProxyError(t, resp, body, ReasonOverloaded)

	req = pod.newRequest(t, dest.URL, bytes.NewReader(event))
	req.Header.Set(headerSpreadOffer, "1")
	if resp, body := do(t, h1Client(t), req); resp.StatusCode != http.StatusOK {
		t.Errorf("a synchronous call with an offer header: %d %q, want the destination's 200", resp.StatusCode, body)
	}
	if r := dest.Next(t); r.Header.Get(headerSpreadOffer) != "" {
		t.Errorf("%s reached the destination", headerSpreadOffer)
	}
}

func TestDeclinesOffer(t *testing.T) {
	tests := []struct {
		held      int
		offeredBy int32
		want      bool
	}{
		{held: 0, offeredBy: 2, want: false},
		{held: 1, offeredBy: 2, want: true}, // 2 and 1 would become 1 and 2
		{held: 5, offeredBy: 5, want: true}, // the offering pod itself
		{held: 3, offeredBy: 10, want: false},
	}
	for _, tt := range tests {
		if got := declinesOffer(tt.held, tt.offeredBy); got != tt.want {
			t.Errorf("declinesOffer(%d, %d) = %t, want %t", tt.held, tt.offeredBy, got, tt.want)
		}
	}
}

func TestSpreadOfferHeader(t *testing.T) {
	for _, c := range []struct {
		v    string
		want int32
	}{{"", 0}, {"7", 7}, {" 7 ", 7}, {"0", 0}, {"-3", 0}, {"x", 0}, {"99999999999", 0}} {
		v, want := c.v, c.want
		r, _ := http.NewRequest(http.MethodPost, "/", nil)
		if v != "" {
			r.Header.Set(headerSpreadOffer, v)
		}
		if got := spreadOffer(r); got != want {
			t.Errorf("spreadOffer(%q) = %d, want %d", v, got, want)
		}
	}
}
