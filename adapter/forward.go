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
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"knative.dev/event-forwarding-proxy/delivery"
)

// ForwardOptions tune one Forward.
type ForwardOptions struct {
	// Sync holds the call through the proxy and returns the sink's answer
	// (a reply event). Otherwise the proxy takes the event with 202 and
	// delivers it in the background, with the Sender's retry policy.
	Sync bool
	// HTTPS lets https sinks go through the proxy. Leave it unset unless
	// the proxy trusts the CA that signed them: a client's own CA
	// certificates are not known here, and the proxy would fail to reach
	// such a sink.
	HTTPS bool
}

// Forward carries one HTTP request that a client built for its sink, such
// as the CloudEvents SDK's (package adapter/forwarding wraps it as the
// SDK's round-tripper decorator). While the Router forwards, the request
// goes to the proxy exactly as Send's events do: the same headers, the
// same retries when the proxy is busy, and the same fallback through
// direct when it is down or refuses the event. Otherwise, or on fallback,
// direct carries it as it would have without the proxy, once: retrying the
// sink stays the client's.
//
// The answer is the sink's, or the proxy's 202 for a hand-off. A
// synchronous call whose sink failed comes back with the proxy's 502 or 504,
// statuses a client retries as it would the sink's own. The request's body
// is read into memory for the proxy route, up to MaxForwardBytes: a larger
// one goes direct. An error means nothing came back (the context ended, or
// direct failed).
func (s *Sender) Forward(req *http.Request, direct http.RoundTripper, o ForwardOptions) (*http.Response, error) {
	ctx := req.Context()
	start := s.p.Now()
	route, proxyURL := s.router.Decide()
	if route == RouteDirect || (req.URL.Scheme == "https" && !o.HTTPS) || (req.URL.Scheme != "http" && req.URL.Scheme != "https") {
		return s.forwardDirect(ctx, req, direct, start, false)
	}
	m, rest, err := bufferRequest(req, s.p.MaxForwardBytes)
	if err != nil {
		return nil, fmt.Errorf("%w: reading the request's body: %w", ErrUndelivered, err)
	}
	if rest != nil {
		s.metrics.fallback(ctx, fallbackRefused)
		large := req.Clone(ctx)
		large.Body, large.GetBody = rest, nil
		return s.forwardDirect(ctx, large, direct, start, true)
	}
	res := &Result{Route: RouteProxy}
	fallback := fallbackProxyDown
	if !s.proxyDown() {
		t := Target{URL: req.URL, Sync: o.Sync}
		fallback, err = s.viaProxy(ctx, proxyURL, t, m, proxyMode{keep: openBody}, res)
	}
	if fallback == fallbackNone {
		s.metrics.sent(ctx, RouteProxy, deliveredIf(err == nil && isSuccess(res.StatusCode)), s.p.Now().Sub(start))
		if err != nil {
			return nil, err
		}
		return res.open, nil
	}
	s.metrics.fallback(ctx, fallback)
	replay := req.Clone(ctx)
	replay.Body, replay.ContentLength = io.NopCloser(bytes.NewReader(m.body)), int64(len(m.body))
	replay.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(m.body)), nil }
	return s.forwardDirect(ctx, replay, direct, start, true)
}

// forwardDirect sends req through direct, and counts it.
func (s *Sender) forwardDirect(ctx context.Context, req *http.Request, direct http.RoundTripper, start time.Time, fallback bool) (*http.Response, error) {
	s.router.inflight[RouteDirect].Add(1)
	defer s.router.inflight[RouteDirect].Add(-1)
	resp, err := direct.RoundTrip(req)
	s.metrics.sent(ctx, RouteDirect, deliveredIf(err == nil && isSuccess(resp.StatusCode)), s.p.Now().Sub(start))
	if err != nil && fallback {
		return nil, fmt.Errorf("%w: sent directly after the proxy could not take it: %w", ErrUndelivered, err)
	}
	return resp, err
}

// errBodyTooLarge is how bufferRequest tells a body over its limit.
var errBodyTooLarge = errors.New("body over the limit")

// bufferRequest copies req's headers and body, so that every attempt on
// either route can send them again. When the body is over limit bytes,
// rest is the whole body instead (what was read of it, then the rest), to
// be sent directly as it is.
func bufferRequest(req *http.Request, limit int64) (_ *encoded, rest io.ReadCloser, _ error) {
	m := &encoded{header: req.Header.Clone()}
	if m.header == nil {
		m.header = http.Header{}
	}
	for _, k := range []string{delivery.HeaderForwardTo, delivery.HeaderForwardTimeout, delivery.HeaderForwardRetry,
		delivery.HeaderForwardBackoffDelay, delivery.HeaderForwardBackoffPolicy, delivery.HeaderForwardRetryAfterMax,
		delivery.HeaderForwardDeadLetterTo, delivery.HeaderForwardAuthorization} {
		m.header.Del(k) // the Sender sets them; a client's own would be ambiguous
	}
	if req.Body == nil || req.Body == http.NoBody {
		return m, nil, nil
	}
	b, err := readAtMost(req.Body, limit)
	switch {
	case errors.Is(err, errBodyTooLarge):
		return nil, struct {
			io.Reader
			io.Closer
		}{io.MultiReader(bytes.NewReader(b), req.Body), req.Body}, nil
	case err != nil:
		_ = req.Body.Close()
		return nil, nil, err
	}
	_ = req.Body.Close()
	m.body = b
	return m, nil, nil
}

// readAtMost reads r to its end, or returns errBodyTooLarge with the first
// limit+1 bytes once it has more than limit.
func readAtMost(r io.Reader, limit int64) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return b, errBodyTooLarge
	}
	return b, nil
}
