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

package adapter

import (
	"net/http"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"knative.dev/event-forwarding-proxy/config"
)

// TestSenderForwardsOnInflight: with one source, far under the sources'
// threshold, the sends a slow sink holds switch the Sender to the proxy
// once they pass the in-flight threshold; it goes direct again after the
// hold, once they ended. The gauge shows the held sends by route, and
// each switch is logged.
func TestSenderForwardsOnInflight(t *testing.T) {
	release := make(chan struct{})
	var once sync.Once
	free := func() { once.Do(func() { close(release) }) }
	arrived := make(chan struct{}, 3)
	sink := newServer(t, func(w http.ResponseWriter, _ *http.Request, n int) {
		if n <= 3 {
			arrived <- struct{}{}
			<-release
		}
		w.WriteHeader(http.StatusOK)
	})
	t.Cleanup(free) // before the sink's Close, which waits for its handlers
	proxy := newServer(t, statuses([]int{202}, nil))
	reader, mp := newTestMeterProvider()
	core, logs := observer.New(zap.InfoLevel)
	clock := newFakeClock()
	s := testSender(SenderParams{MeterProvider: mp, Logger: zap.New(core).Sugar()}, clock)
	s.SetForwarding(config.Forwarding{ProxyURL: proxy.url(t), Threshold: 500, InflightThreshold: 2, InflightHold: time.Minute})
	s.SetDirectSources(1)

	var held sync.WaitGroup
	for i := range 3 {
		held.Go(func() {
			if _, err := s.Send(ctxFor(t, 30*time.Second), Target{URL: sink.url(t)}, testEvent("held")); err != nil {
				t.Errorf("held send %d: %v", i, err)
			}
		})
		<-arrived // the Sender counted it before it sent it
	}
	if n := s.router.Inflight(RouteDirect); n != 3 {
		t.Fatalf("%d direct sends in flight, want the 3 the sink holds", n)
	}
	if proxy.count() != 0 {
		t.Fatalf("the proxy got %d events at the threshold", proxy.count())
	}
	res, err := s.Send(ctxFor(t, 10*time.Second), Target{URL: sink.url(t)}, testEvent("over"))
	if err != nil || res.Route != RouteProxy || proxy.count() != 1 {
		t.Fatalf("send over the threshold: route %s, err %v, proxy got %d; want it through the proxy", res.Route, err, proxy.count())
	}
	if got := counterByLabel(t, reader, metricSenderInflight, "route"); got["direct"] != 3 || got["proxy"] != 0 {
		t.Errorf("sends in flight %v, want 3 direct, 0 proxy", got)
	}
	free()
	held.Wait()

	clock.Advance(time.Minute - time.Nanosecond)
	if res, _ := s.Send(ctxFor(t, 10*time.Second), Target{URL: sink.url(t)}, testEvent("in the hold")); res.Route != RouteProxy {
		t.Errorf("a send within the hold went %s", res.Route)
	}
	clock.Advance(time.Nanosecond)
	if res, err := s.Send(ctxFor(t, 10*time.Second), Target{URL: sink.url(t)}, testEvent("after")); err != nil || res.Route != RouteDirect {
		t.Errorf("after the hold: route %s, err %v; want direct", res.Route, err)
	}
	if n := logs.FilterMessage("Forwarding through the event-forwarding proxy").Len(); n != 1 {
		t.Errorf("%d switches to the proxy logged, want 1", n)
	}
	back := logs.FilterMessage("Sending directly to the sinks").All()
	if len(back) != 1 || back[0].ContextMap()["direct_inflight"] != int64(0) {
		t.Errorf("switches back logged: %v", back)
	}
}
