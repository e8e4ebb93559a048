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
	"errors"
	"math"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"knative.dev/event-forwarding-proxy/delivery"
)

// DestinationParams configure the destination handler.
type DestinationParams struct {
	// AllowedHosts are the host patterns a destination may name (see
	// delivery.HostAllowed). If empty, no host name is allowed.
	AllowedHosts []string
	// Policy judges IP-literal destinations before anything is dialed; the
	// dialer judges resolved names. If nil, the zero Policy.
	Policy *delivery.Policy
	// MaxTimeout caps Kn-Forward-Timeout and is the default deadline.
	// If zero, 10 minutes.
	MaxTimeout time.Duration
	// MaxEventBytes refuses larger declared bodies at once. If zero, 4 MiB.
	MaxEventBytes int64
	// Retries is the default retry count of async calls. If zero, none.
	Retries int
	// MaxRetries caps Kn-Forward-Retry. If zero, Retries.
	MaxRetries int
	// BackoffDelay is the default first retry delay. If zero, 500 ms.
	BackoffDelay time.Duration
	// MaxBackoffDelay caps Kn-Forward-Backoff-Delay. If zero, 1 minute.
	MaxBackoffDelay time.Duration

	destinations *destinationCache // set by NewDestinationHandler; nil parses every time
}

// NewDestinationHandler reads what a request asks of the proxy (destination,
// deadline, async mode and retries, tenant), refuses what is malformed or
// not allowed with 400, 403 or 413, and passes the rest on with its call.
func NewDestinationHandler(p DestinationParams, next http.Handler) http.Handler {
	if p.Policy == nil {
		p.Policy = &delivery.Policy{}
	}
	if p.MaxTimeout <= 0 {
		p.MaxTimeout = 10 * time.Minute
	}
	if p.MaxEventBytes <= 0 {
		p.MaxEventBytes = 4 << 20
	}
	if p.MaxRetries <= 0 {
		p.MaxRetries = p.Retries
	}
	if p.BackoffDelay <= 0 {
		p.BackoffDelay = 500 * time.Millisecond
	}
	if p.MaxBackoffDelay <= 0 {
		p.MaxBackoffDelay = time.Minute
	}
	p.destinations = &destinationCache{}
	return &destinationHandler{p: p, next: next}
}

type destinationHandler struct {
	p    DestinationParams
	next http.Handler
}

func (h *destinationHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r, ok := h.read(w, r); ok {
		h.next.ServeHTTP(w, r)
	}
}

// read fills r's call, or refuses r.
func (h *destinationHandler) read(w http.ResponseWriter, r *http.Request) (*http.Request, bool) {
	c := callOf(w, r)
	if c == nil {
		c = &call{}
		r = r.WithContext(withCall(r.Context(), c))
	}
	if reason, err := h.p.fill(c, r); err != nil {
		writeError(w, reason, err.Error())
		return r, false
	}
	return r, true
}

// fill completes c from r, or says why r is refused.
func (p *DestinationParams) fill(c *call, r *http.Request) (Reason, error) {
	if !c.authenticated {
		c.tenant = tenantOf(r.Header, "")
	}
	d, err := p.destinations.parse(r.Header.Values(delivery.HeaderForwardTo))
	if err != nil {
		if errors.Is(err, errMissingDestination) {
			return ReasonMissingDestination, err
		}
		return ReasonBadDestination, err
	}
	c.dest = d.url
	if err := p.allowed(d.url.Hostname()); err != nil {
		return ReasonDestinationDenied, err
	}
	if r.ContentLength > p.MaxEventBytes {
		return ReasonBodyTooLarge, errors.New("the body has " + strconv.FormatInt(r.ContentLength, 10) +
			" bytes, more than the " + strconv.FormatInt(p.MaxEventBytes, 10) + " allowed")
	}
	c.destKey = d.key
	c.namespace = d.namespace
	c.timeout = p.MaxTimeout
	c.async = prefersAsync(r.Header)
	if c.async {
		c.offeredBy = spreadOffer(r)
	}
	c.retries = int32(min(p.Retries, math.MaxInt32))
	c.backoff = p.BackoffDelay
	if !c.authenticated {
		c.tenant = tenantOf(r.Header, c.namespace)
	}
	if c.onlyNamespace != "" && c.namespace != c.onlyNamespace {
		return ReasonDestinationDenied, errors.New("a caller of namespace " + c.onlyNamespace +
			" may reach services of its own namespace only, not " + d.url.Hostname())
	}
	if v := r.Header.Get(delivery.HeaderForwardTimeout); v != "" {
		d, err := delivery.ParseDuration(strings.TrimSpace(v))
		if err != nil || d <= 0 {
			return ReasonBadRequest, errors.New(delivery.HeaderForwardTimeout + " is not a positive ISO-8601 duration such as PT10M")
		}
		c.timeout = min(d, p.MaxTimeout)
	}
	if v := r.Header.Get(delivery.HeaderForwardRetry); v != "" {
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil || n < 0 {
			return ReasonBadRequest, errors.New(delivery.HeaderForwardRetry + " is not a non-negative integer")
		}
		c.retries = int32(min(n, p.MaxRetries, math.MaxInt32))
	}
	if v := r.Header.Get(delivery.HeaderForwardBackoffDelay); v != "" {
		d, err := delivery.ParseDuration(strings.TrimSpace(v))
		if err != nil || d <= 0 {
			return ReasonBadRequest, errors.New(delivery.HeaderForwardBackoffDelay + " is not a positive ISO-8601 duration such as PT0.5S")
		}
		c.backoff = min(d, p.MaxBackoffDelay)
	}
	if _, err := parseRetryOptions(r.Header); err != nil {
		return ReasonBadRequest, err
	}
	return p.checkDeadLetter(c, r.Header.Values(delivery.HeaderForwardDeadLetterTo))
}

// allowed says why host may not be a destination, if it may not: an
// address outside the policy, or a name outside FORWARD_ALLOWED_HOSTS.
func (p *DestinationParams) allowed(host string) error {
	if ip, err := netip.ParseAddr(host); err == nil {
		if !p.Policy.AllowsLiteral(ip) && !delivery.HostAllowed(host, hostPatternsOnly(p.AllowedHosts)) {
			return errors.New("destination " + host + " is an address outside FORWARD_ALLOWED_CIDRS")
		}
		return p.Policy.CheckAddr(ip)
	}
	if !delivery.HostAllowed(host, p.AllowedHosts) {
		return errors.New("destination host " + host + " is not allowed by FORWARD_ALLOWED_HOSTS")
	}
	return nil
}

// checkDeadLetter refuses a dead-letter sink (Kn-Forward-Dead-Letter-To,
// values) that c could not name as its destination, or on a synchronous
// call, whose caller gets the destination's failure itself.
func (p *DestinationParams) checkDeadLetter(c *call, values []string) (Reason, error) {
	if len(values) == 0 {
		return "", nil
	}
	if !c.async {
		return ReasonBadRequest, errors.New(delivery.HeaderForwardDeadLetterTo + " applies to async calls (Prefer: respond-async) only")
	}
	d, err := p.destinations.parse(values)
	if err != nil {
		return ReasonBadDestination, errors.New(delivery.HeaderForwardDeadLetterTo + ": " + err.Error())
	}
	if err := p.allowed(d.url.Hostname()); err != nil {
		return ReasonDestinationDenied, errors.New("dead-letter sink: " + err.Error())
	}
	if c.onlyNamespace != "" && d.namespace != c.onlyNamespace {
		return ReasonDestinationDenied, errors.New("a caller of namespace " + c.onlyNamespace +
			" may name a dead-letter sink of its own namespace only, not " + d.url.Hostname())
	}
	return "", nil
}

// hostPatternsOnly keeps the patterns that can match an IP literal: an
// exact entry or "*" (a suffix wildcard never names an address).
func hostPatternsOnly(patterns []string) []string {
	var out []string
	for _, p := range patterns {
		if !strings.HasPrefix(p, "*.") {
			out = append(out, p)
		}
	}
	return out
}

// tenantOf returns whom a call counts against: the Kn-Namespace header that
// Knative sources set when it is a valid namespace name, otherwise the
// destination's namespace.
func tenantOf(h http.Header, destNamespace string) string {
	if ns := h.Get(delivery.HeaderNamespace); isDNSLabel(ns) {
		return ns
	}
	return destNamespace
}
