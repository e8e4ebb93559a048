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
	"net/url"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"knative.dev/event-forwarding-proxy/config"
)

func TestRouterHysteresis(t *testing.T) {
	proxyURL, _ := url.Parse("http://proxy.knative-eventing.svc.cluster.local")
	on := func(threshold int) config.Forwarding {
		return config.Forwarding{ProxyURL: proxyURL, Threshold: threshold}
	}
	// A step either sets the config or the number of sources, then checks
	// the route.
	type step struct {
		cfg     *config.Forwarding
		sources int
		want    Route
	}
	cfg := func(c config.Forwarding) *config.Forwarding { return &c }
	tests := []struct {
		name  string
		steps []step
	}{
		{name: "zero value is direct", steps: []step{{sources: 100000, want: RouteDirect}}},
		{name: "no proxy URL never forwards", steps: []step{
			{cfg: cfg(config.Forwarding{Threshold: 0}), want: RouteDirect},
			{sources: 1 << 30, want: RouteDirect},
		}},
		{name: "threshold 0 always forwards", steps: []step{
			{cfg: cfg(on(0)), want: RouteProxy},
			{sources: 0, want: RouteProxy},
		}},
		{name: "up above the threshold, down only below 90 % of it", steps: []step{
			{cfg: cfg(on(500)), want: RouteDirect},
			{sources: 500, want: RouteDirect}, // not above
			{sources: 501, want: RouteProxy},
			{sources: 500, want: RouteProxy}, // inside the band
			{sources: 450, want: RouteProxy}, // 90 % exactly: still inside
			{sources: 449, want: RouteDirect},
			{sources: 480, want: RouteDirect}, // inside the band from below
			{sources: 501, want: RouteProxy},
		}},
		{name: "small threshold", steps: []step{
			{cfg: cfg(on(1)), want: RouteDirect},
			{sources: 1, want: RouteDirect},
			{sources: 2, want: RouteProxy},
			{sources: 1, want: RouteProxy}, // 1 is not below 0.9
			{sources: 0, want: RouteDirect},
		}},
		{name: "turning the proxy off then on starts direct", steps: []step{
			{cfg: cfg(on(10)), want: RouteDirect},
			{sources: 11, want: RouteProxy},
			{cfg: cfg(config.Forwarding{Threshold: 10}), want: RouteDirect},
			{sources: 10, want: RouteDirect},
			{cfg: cfg(on(10)), want: RouteDirect}, // 10 is in the band: stays direct
			{sources: 11, want: RouteProxy},
		}},
		{name: "lowering the threshold below the count forwards at once", steps: []step{
			{cfg: cfg(on(500)), want: RouteDirect},
			{sources: 300, want: RouteDirect},
			{cfg: cfg(on(200)), want: RouteProxy},
			{cfg: cfg(on(320)), want: RouteProxy}, // 300 is inside [288, 320]
			{cfg: cfg(on(400)), want: RouteDirect},
		}},
		{name: "negative counts read as zero", steps: []step{
			{cfg: cfg(on(5)), want: RouteDirect},
			{sources: 6, want: RouteProxy},
			{sources: -3, want: RouteDirect},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var r Router
			for i, s := range tc.steps {
				if s.cfg != nil {
					r.SetConfig(*s.cfg)
				} else {
					r.SetDirectSources(s.sources)
				}
				got, u := r.Decide()
				if got != s.want {
					_, n, _ := r.State()
					t.Fatalf("step %d (%d sources): route %s, want %s", i, n, got, s.want)
				}
				if (got == RouteProxy) != (u != nil) {
					t.Fatalf("step %d: route %s with URL %v", i, got, u)
				}
			}
		})
	}
}

// TestRouterInflight: the direct sends in flight switch the route to the
// proxy above their threshold, and back only after the hold with them at
// or below half of it; each switch is logged once, with its reason.
func TestRouterInflight(t *testing.T) {
	proxyURL, _ := url.Parse("http://proxy.knative-eventing.svc.cluster.local")
	// Sources never switch in these cases: 10 sources, threshold 500.
	withLoad := config.Forwarding{ProxyURL: proxyURL, Threshold: 500, InflightThreshold: 100, InflightHold: time.Minute}
	type step struct {
		inflight int64         // direct sends in flight at this Decide
		after    time.Duration // the clock moves by this first
		cfg      *config.Forwarding
		want     Route
		reason   string // the reason logged, when this step switches
	}
	cfg := func(c config.Forwarding) *config.Forwarding { return &c }
	tests := []struct {
		name  string
		steps []step
	}{
		{name: "at the threshold stays direct, above it forwards", steps: []step{
			{inflight: 100, want: RouteDirect},
			{inflight: 101, want: RouteProxy, reason: "direct sends in flight over the in-flight threshold"},
		}},
		{name: "back only after the hold, at half the threshold", steps: []step{
			{inflight: 101, want: RouteProxy, reason: "direct sends in flight over the in-flight threshold"},
			{inflight: 0, after: time.Minute - time.Nanosecond, want: RouteProxy},
			{inflight: 51, after: time.Hour, want: RouteProxy}, // over half
			{inflight: 50, want: RouteDirect, reason: "sources and direct sends in flight under their thresholds"},
		}},
		{name: "the hold counts from the last Decide over the threshold", steps: []step{
			{inflight: 101, want: RouteProxy, reason: "direct sends in flight over the in-flight threshold"},
			{inflight: 150, after: 50 * time.Second, want: RouteProxy},
			{inflight: 0, after: 59 * time.Second, want: RouteProxy},
			{inflight: 0, after: time.Second, want: RouteDirect, reason: "sources and direct sends in flight under their thresholds"},
		}},
		{name: "0 turns the switch off", steps: []step{
			{cfg: cfg(config.Forwarding{ProxyURL: proxyURL, Threshold: 500}), inflight: 1 << 40, want: RouteDirect},
		}},
		{name: "no proxy never forwards", steps: []step{
			{cfg: cfg(config.Forwarding{Threshold: 500, InflightThreshold: 100, InflightHold: time.Minute}), inflight: 1000, want: RouteDirect},
		}},
		{name: "turning the switch off while forwarding for load goes direct", steps: []step{
			{inflight: 101, want: RouteProxy, reason: "direct sends in flight over the in-flight threshold"},
			{cfg: cfg(config.Forwarding{ProxyURL: proxyURL, Threshold: 500}), inflight: 101, want: RouteDirect,
				reason: "sources and direct sends in flight under their thresholds"},
		}},
		{name: "the sources keep it forwarding after the load is gone", steps: []step{
			{inflight: 101, want: RouteProxy, reason: "direct sends in flight over the in-flight threshold"},
			{cfg: cfg(config.Forwarding{ProxyURL: proxyURL, Threshold: 5, InflightThreshold: 100, InflightHold: time.Minute}), want: RouteProxy},
			{inflight: 0, after: time.Hour, want: RouteProxy},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			core, logs := observer.New(zap.InfoLevel)
			now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
			r := &Router{logger: zap.New(core).Sugar(), now: func() time.Time { return now }}
			r.SetConfig(withLoad)
			r.SetDirectSources(10)
			for i, s := range tc.steps {
				before := logs.Len()
				now = now.Add(s.after)
				r.inflight[RouteDirect].Store(s.inflight)
				if s.cfg != nil {
					r.SetConfig(*s.cfg)
				}
				if got, _ := r.Decide(); got != s.want {
					t.Fatalf("step %d (%d in flight): route %s, want %s", i, s.inflight, got, s.want)
				}
				switched := logs.All()[before:]
				switch {
				case s.reason == "" && len(switched) > 0:
					t.Errorf("step %d: logged %q with no switch", i, switched[0].Message)
				case s.reason != "" && len(switched) != 1:
					t.Errorf("step %d: %d log lines for one switch", i, len(switched))
				case s.reason != "" && switched[0].ContextMap()["reason"] != s.reason:
					t.Errorf("step %d: reason %q, want %q", i, switched[0].ContextMap()["reason"], s.reason)
				}
			}
		})
	}
}

func TestRouteString(t *testing.T) {
	tests := []struct {
		name  string
		route Route
		want  string
	}{
		{name: "direct", route: RouteDirect, want: "direct"},
		{name: "proxy", route: RouteProxy, want: "proxy"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.route.String(); got != tc.want {
				t.Errorf("String() = %q, want %q", got, tc.want)
			}
		})
	}
}

// TestRouterReportsSwitches: the hook gets the route at start, each switch
// and each change of reason once, with the counts, never with the lock
// held.
func TestRouterReportsSwitches(t *testing.T) {
	proxyURL, _ := url.Parse("http://proxy.knative-eventing.svc.cluster.local")
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	r := &Router{now: func() time.Time { return now }}
	var got []RouteChange
	r.notifyOn(func(c RouteChange) {
		if !r.mu.TryLock() {
			t.Errorf("switch %d reported with the Router's lock held", c.Seq)
		} else {
			r.mu.Unlock()
		}
		got = append(got, c)
	})
	r.SetConfig(config.Forwarding{ProxyURL: proxyURL, Threshold: 2}) // still direct, another reason
	r.SetConfig(config.Forwarding{ProxyURL: proxyURL, Threshold: 2}) // the same: no report
	r.SetDirectSources(3)
	r.SetDirectSources(2) // inside the band: no switch
	r.inflight[RouteDirect].Store(7)
	r.inflight[RouteProxy].Store(4)
	r.SetDirectSources(1)
	r.SetConfig(config.Forwarding{ProxyURL: proxyURL, Threshold: 2, InflightThreshold: 5, InflightHold: time.Minute})
	r.Decide() // 7 direct sends in flight, over 5
	r.Decide() // still over: no switch

	want := []RouteChange{
		{Seq: 0, Route: RouteDirect, Reason: "no proxy configured"},
		{Seq: 1, Route: RouteDirect, Reason: "sources and direct sends in flight under their thresholds"},
		{Seq: 2, Route: RouteProxy, Reason: "sources over the threshold", DirectSources: 3},
		{Seq: 3, Route: RouteDirect, Reason: "sources and direct sends in flight under their thresholds", DirectSources: 1, DirectInflight: 7, ProxyInflight: 4},
		{Seq: 4, Route: RouteProxy, Reason: "direct sends in flight over the in-flight threshold", DirectSources: 1, DirectInflight: 7, ProxyInflight: 4},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("reported changes (-want +got):\n%s", diff)
	}
}

// TestSenderReportsRoute: NewSender reports the route at start, and a
// configuration that forwards is a switch.
func TestSenderReportsRoute(t *testing.T) {
	proxyURL, _ := url.Parse("http://proxy.knative-eventing.svc.cluster.local")
	var got []Route
	s := NewSender(SenderParams{OnRouteChange: func(c RouteChange) { got = append(got, c.Route) }})
	defer s.CloseIdleConnections()
	s.SetForwarding(config.Forwarding{ProxyURL: proxyURL, Threshold: 0})
	s.SetForwarding(config.Forwarding{ProxyURL: proxyURL, Threshold: 0}) // the same: no switch
	if diff := cmp.Diff([]Route{RouteDirect, RouteProxy}, got); diff != "" {
		t.Errorf("routes reported (-want +got):\n%s", diff)
	}
}
