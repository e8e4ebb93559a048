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

// Router decides the route of each send from the forwarding configuration
// and the number of direct sources the adapter serves: through the proxy
// while that number is above the threshold, back to direct only once it
// falls below 90 % of it, so that an adapter hovering around the threshold
// does not flap. A threshold of 0 always forwards; no proxy URL never does.
// Its zero value routes everything direct. It is safe for concurrent use.
type Router struct {
	mu       sync.Mutex
	cfg      config.Forwarding
	sources  int
	proxying bool
}

// SetConfig applies a new forwarding configuration; the next Decide sees it.
func (r *Router) SetConfig(c config.Forwarding) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.cfg = c
	r.update()
}

// SetDirectSources records how many sources the adapter serves directly.
func (r *Router) SetDirectSources(n int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.sources = max(n, 0)
	r.update()
}

// Decide returns the route of the next send and, for RouteProxy, the
// proxy's URL (shared: do not modify it).
func (r *Router) Decide() (Route, *url.URL) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.proxying {
		return RouteProxy, r.cfg.ProxyURL
	}
	return RouteDirect, nil
}

// State returns the configuration, the number of direct sources and the
// current route, for logs and metrics.
func (r *Router) State() (config.Forwarding, int, Route) {
	r.mu.Lock()
	defer r.mu.Unlock()
	route := RouteDirect
	if r.proxying {
		route = RouteProxy
	}
	return r.cfg, r.sources, route
}

// update recomputes proxying; called with r.mu held. Between 90 % of the
// threshold and the threshold itself the route stays what it was.
func (r *Router) update() {
	t := int64(r.cfg.Threshold)
	n := int64(r.sources)
	switch {
	case r.cfg.ProxyURL == nil:
		r.proxying = false
	case t <= 0:
		r.proxying = true
	case n > t:
		r.proxying = true
	case n*10 < t*9:
		r.proxying = false
	}
}
