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

package sender

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"knative.dev/event-forwarding-proxy/adapter"
	"knative.dev/event-forwarding-proxy/config"
	"knative.dev/event-forwarding-proxy/delivery"
)

// TestProxyBusyRetryAfter: a full proxy answers 503 with Retry-After; the
// sender waits that long (not its 50 ms backoff), retries, and the event
// goes through the proxy, not around it.
func TestProxyBusyRetryAfter(t *testing.T) {
	t.Parallel()
	proxy := startProxy(t, "FORWARD_MAX_INFLIGHT=1")
	sink := newSink(t)

	// A slow destination holds the proxy's only slot until released.
	release := make(chan struct{})
	var once sync.Once
	free := func() { once.Do(func() { close(release) }) }
	t.Cleanup(free)
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(slow.Close)
	held := make(chan error, 1)
	go func() {
		req, _ := http.NewRequestWithContext(ctxFor(t, time.Minute), http.MethodPost, proxy.URL, strings.NewReader("hold"))
		req.Header.Set(delivery.HeaderForwardTo, slow.URL)
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		held <- err
	}()
	eventually(t, 30*time.Second, "the proxy holds its only call", func() bool {
		return proxy.metric("kn_forward_active_requests") == 1
	})

	// Record every backoff wait, and free the slot during the first one.
	var (
		mu    sync.Mutex
		waits []time.Duration
	)
	sleep := func(ctx context.Context, d time.Duration) error {
		mu.Lock()
		waits = append(waits, d)
		mu.Unlock()
		free()
		timer := time.NewTimer(d)
		defer timer.Stop()
		select {
		case <-timer.C:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	logger, _ := testLogger(t)
	s := adapter.NewSender(adapter.SenderParams{Logger: logger, Sleep: sleep})
	s.SetForwarding(config.Forwarding{ProxyURL: mustURL(t, proxy.URL), Threshold: 0})
	d := newDriver(t, s, adapter.Target{URL: sink.url(t), Namespace: "tenant"}, "busy")
	start := time.Now()
	_, res := d.send()
	took := time.Since(start)

	if res.Route != adapter.RouteProxy || res.Fallback || res.Attempts != 2 || res.StatusCode != http.StatusAccepted {
		t.Errorf("result %+v, want a 202 from the proxy at the second attempt", res)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(waits) != 1 || waits[0] < time.Second {
		t.Errorf("waits %v, want one of at least the proxy's Retry-After (1 s)", waits)
	}
	if took < time.Second {
		t.Errorf("the send took %s, less than the Retry-After", took)
	}
	if got := proxy.metric("kn_forward_rejected_total", `reason="overloaded"`); got != 1 {
		t.Errorf("the proxy refused %v calls as overloaded (503), want 1", got)
	}
	if err := <-held; err != nil {
		t.Errorf("the held call: %v", err)
	}
	d.checkArrivals(sink)
	t.Logf("503 + Retry-After honoured: the send waited %s and took %s", waits[0].Round(time.Millisecond), took.Round(time.Millisecond))
}
