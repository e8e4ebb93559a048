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
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"knative.dev/event-forwarding-proxy/config"
)

// Route is the way an event takes to its sink.
type Route uint8

const (
	// RouteDirect sends the event straight to the sink.
	RouteDirect Route = iota
	// RouteProxy hands the event to the event-forwarding proxy.
	RouteProxy
)

func (r Route) String() string {
	if r == RouteProxy {
		return "proxy"
	}
	return "direct"
}

// RouteChange is the route a Router has taken and why, as
// SenderParams.OnRouteChange receives it: at start, at every switch, and
// when the reason changes while the route stays (a proxy configured, the
// sources still under the threshold).
type RouteChange struct {
	// Seq numbers the reports: 0 at start, one more for each later one.
	// Two that race may arrive out of order; the higher Seq is the route
	// in effect.
	Seq uint64
	// Route is the route from now on.
	Route Route
	// Reason says why, as the switch's log line does.
	Reason string
	// DirectSources is the number of sources the adapter serves directly.
	DirectSources int
	// DirectInflight and ProxyInflight are the sends in flight by route.
	DirectInflight, ProxyInflight int64
}

// Router decides the route of each send from the forwarding configuration,
// the number of direct sources the adapter serves and the direct sends it
// holds in flight. It forwards through the proxy while either is over its
// threshold:
//
//   - sources: above event-forwarding-threshold, back to direct only once
//     they fall below 90 % of it, so that an adapter hovering around the
//     threshold does not flap. A threshold of 0 always forwards.
//   - sends in flight: above event-forwarding-inflight-threshold, back to
//     direct only after none of its Decides saw them over it for
//     event-forwarding-inflight-hold, and with them at or below half of
//     it. Forwarding empties the adapter's direct sends, so their count
//     alone would switch it back at once.
//
// No proxy URL never forwards. Each change of route is logged with its
// reason; it and each change of reason are reported to onChange outside
// the lock. The zero value routes everything direct and logs nothing. It
// is safe for concurrent use.
type Router struct {
	// inflight counts the sends in flight by route; the Sender keeps it.
	inflight [2]atomic.Int64

	mu        sync.Mutex
	cfg       config.Forwarding
	sources   int
	bySources bool      // the sources are over the threshold
	byLoad    bool      // the direct sends in flight were over theirs
	overAt    time.Time // when a Decide last saw them over it
	route     Route
	reports   uint64             // RouteChange.Seq of the last report
	reported  string             // its reason
	now       func() time.Time   // nil: time.Now
	logger    *zap.SugaredLogger // nil: switches are not logged
	// onChange is set once, before the Router is shared (notifyOn); nil:
	// switches are not reported.
	onChange func(RouteChange)
}

// notifyOn makes f receive every switch, and calls it now with the route
// at start. Call it before the Router is shared.
func (r *Router) notifyOn(f func(RouteChange)) {
	if f == nil {
		return
	}
	r.onChange = f
	r.mu.Lock()
	c := r.change()
	r.reported = c.Reason
	r.mu.Unlock()
	f(c)
}

// notify hands a switch that settle returned to onChange; called without
// r.mu, so that a slow hook never holds up a Decide.
func (r *Router) notify(c *RouteChange) {
	if c != nil {
		r.onChange(*c)
	}
}

// SetConfig applies a new forwarding configuration; the next Decide sees it.
func (r *Router) SetConfig(c config.Forwarding) {
	r.mu.Lock()
	r.cfg = c
	if c.ProxyURL == nil || c.InflightThreshold <= 0 {
		r.byLoad = false
	}
	r.updateSources()
	switched := r.settle()
	r.mu.Unlock()
	r.notify(switched)
}

// SetDirectSources records how many sources the adapter serves directly.
func (r *Router) SetDirectSources(n int) {
	r.mu.Lock()
	r.sources = max(n, 0)
	r.updateSources()
	switched := r.settle()
	r.mu.Unlock()
	r.notify(switched)
}

// Decide returns the route of the next send and, for RouteProxy, the
// proxy's URL (shared: do not modify it).
func (r *Router) Decide() (Route, *url.URL) {
	r.mu.Lock()
	var switched *RouteChange
	if r.cfg.ProxyURL != nil && r.cfg.InflightThreshold > 0 {
		switched = r.updateLoad()
	}
	route, proxyURL := r.route, r.cfg.ProxyURL
	r.mu.Unlock()
	r.notify(switched)
	if route == RouteProxy {
		return RouteProxy, proxyURL
	}
	return RouteDirect, nil
}

// State returns the configuration, the number of direct sources and the
// current route, for logs and metrics.
func (r *Router) State() (config.Forwarding, int, Route) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.cfg, r.sources, r.route
}

// Inflight returns the number of sends in flight on route.
func (r *Router) Inflight(route Route) int64 { return r.inflight[route].Load() }

// updateSources recomputes bySources; called with r.mu held. Between 90 %
// of the threshold and the threshold itself it stays what it was.
func (r *Router) updateSources() {
	t := int64(r.cfg.Threshold)
	n := int64(r.sources)
	switch {
	case r.cfg.ProxyURL == nil:
		r.bySources = false
	case t <= 0:
		r.bySources = true
	case n > t:
		r.bySources = true
	case n*10 < t*9:
		r.bySources = false
	}
}

// updateLoad recomputes byLoad from the direct sends in flight, and
// returns what settle does; called with r.mu held, with a proxy and an
// in-flight threshold set.
func (r *Router) updateLoad() *RouteChange {
	n, t := r.inflight[RouteDirect].Load(), int64(r.cfg.InflightThreshold)
	switch {
	case n > t:
		r.overAt, r.byLoad = r.clock(), true
	case !r.byLoad:
		return nil
	case n*2 <= t && r.clock().Sub(r.overAt) >= r.cfg.InflightHold:
		r.byLoad = false
	default:
		return nil
	}
	return r.settle()
}

// settle sets the route from bySources and byLoad and logs a change;
// called with r.mu held. It returns the report for notify, or nil when
// neither the route nor its reason changed, or nobody is to be told.
func (r *Router) settle() *RouteChange {
	route := RouteDirect
	if r.cfg.ProxyURL != nil && (r.bySources || r.byLoad) {
		route = RouteProxy
	}
	switched := route != r.route
	if switched {
		r.route = route
		r.logSwitch()
	}
	if r.onChange == nil || (!switched && r.reason() == r.reported) {
		return nil
	}
	r.reports++
	c := r.change()
	r.reported = c.Reason
	return &c
}

// change describes the route in effect; called with r.mu held.
func (r *Router) change() RouteChange {
	return RouteChange{Seq: r.reports, Route: r.route, Reason: r.reason(), DirectSources: r.sources,
		DirectInflight: r.inflight[RouteDirect].Load(), ProxyInflight: r.inflight[RouteProxy].Load()}
}

// logSwitch logs the route just taken; called with r.mu held.
func (r *Router) logSwitch() {
	if r.logger == nil {
		return
	}
	fields := []any{zap.String("reason", r.reason()), zap.Int("sources", r.sources), zap.Int("threshold", r.cfg.Threshold),
		zap.Int64("direct_inflight", r.inflight[RouteDirect].Load()), zap.Int("inflight_threshold", r.cfg.InflightThreshold)}
	if r.route == RouteProxy {
		r.logger.Infow("Forwarding through the event-forwarding proxy", append(fields, zap.String("proxy", r.cfg.ProxyURL.Redacted()))...)
	} else {
		r.logger.Infow("Sending directly to the sinks", fields...)
	}
}

// reason says why the route is what it is, for the log of a change.
func (r *Router) reason() string {
	switch {
	case r.cfg.ProxyURL == nil:
		return "no proxy configured"
	case r.bySources && r.cfg.Threshold == 0:
		return "threshold 0: always"
	case r.bySources:
		return "sources over the threshold"
	case r.byLoad:
		return "direct sends in flight over the in-flight threshold"
	}
	return "sources and direct sends in flight under their thresholds"
}

func (r *Router) clock() time.Time {
	if r.now == nil {
		return time.Now()
	}
	return r.now()
}
