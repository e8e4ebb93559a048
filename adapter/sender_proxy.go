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
	"context"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"go.uber.org/zap"

	"knative.dev/event-forwarding-proxy/delivery"
)

// fallbackReason says why an event meant for the proxy went direct; the
// reason label of kn_forward_sender_fallbacks_total.
type fallbackReason uint8

const (
	fallbackNone fallbackReason = iota
	// fallbackUnreachable: no answer from the proxy (connect, reset,
	// hand-off deadline).
	fallbackUnreachable
	// fallbackProxyDown: the proxy was unreachable moments ago.
	fallbackProxyDown
	// fallbackBusy: the proxy was still busy (429, 503) after every retry.
	fallbackBusy
	// fallbackRefused: the proxy refused the event (400, 401, 403, 413...),
	// which the sink itself may well accept.
	fallbackRefused
	// fallbackToken: no token for the proxy could be had.
	fallbackToken
	numFallbackReasons
)

var fallbackNames = [numFallbackReasons]string{"none", "unreachable", "proxy_down", "busy", "refused", "token"}

func (r fallbackReason) String() string { return fallbackNames[r] }

// proxyVerdict is what an answer from the proxy means for the send.
type proxyVerdict uint8

const (
	// proxyDelivered: 2xx, the hand-off's 202 or the sink's own success.
	proxyDelivered proxyVerdict = iota
	// proxyBusy: the proxy (or the gateway before it) is busy: retry, then
	// fall back.
	proxyBusy
	// proxySinkRetryable: a synchronous call whose sink failed in a way
	// worth retrying: retry through the proxy, then give up (going direct
	// would meet the same sink).
	proxySinkRetryable
	// proxySinkFinal: a synchronous call whose sink gave a final answer.
	proxySinkFinal
	// proxyRefused: the proxy will not carry this event: go direct.
	proxyRefused
)

// judgeProxyAnswer reads an answer from the proxy. Answers the proxy made
// itself carry Kn-Forward-Error with a reason; any other answer to a
// synchronous call is the sink's.
func judgeProxyAnswer(status int, h http.Header, sync bool) proxyVerdict {
	if isSuccess(status) {
		return proxyDelivered
	}
	switch h.Get(delivery.HeaderForwardError) {
	case "":
		switch {
		case sync && retryableStatus(status):
			return proxySinkRetryable
		case sync:
			return proxySinkFinal
		case status == http.StatusTooManyRequests || status == http.StatusBadGateway ||
			status == http.StatusServiceUnavailable || status == http.StatusGatewayTimeout:
			return proxyBusy // a gateway before the proxy: Knative's activator
		default:
			return proxyRefused
		}
	case "unreachable", "timeout":
		return proxySinkRetryable
	case "overloaded", "destination_busy", "draining", "tenant_limited":
		return proxyBusy
	default:
		return proxyRefused
	}
}

// proxyMode is how viaProxy treats the proxy's answers.
type proxyMode struct {
	keep keepBody
	// retrySink retries, through the proxy, a synchronous call whose sink
	// failed in a way worth retrying. Forward hands that failure back to
	// its caller instead: the caller's own retries would multiply these.
	retrySink bool
}

// viaProxy hands m to the proxy for t's sink. It returns fallbackNone when
// the send is settled (delivered, or failed for a reason going direct
// would not cure), and otherwise why the event must go direct. With
// openBody, the settled answer is left open in res.open.
func (s *Sender) viaProxy(ctx context.Context, proxyURL *url.URL, t Target, m *encoded, mode proxyMode, res *Result) (fallbackReason, error) {
	s.router.inflight[RouteProxy].Add(1)
	defer s.router.inflight[RouteProxy].Add(-1)
	rt := s.pools.forProxy(proxyURL)
	timeout := s.p.HandoffTimeout
	if t.Sync {
		timeout += s.p.Timeout
	}
	var last http.Header
	for attempt := 0; ; attempt++ {
		if attempt > 0 && !s.retryWait(ctx, RouteProxy, attempt, last) {
			return fallbackNone, ctx.Err()
		}
		res.Attempts++
		a, err := s.call(ctx, rt, proxyURL.String(), timeout, m, mode.keep, func(h http.Header) error {
			return s.setProxyHeaders(ctx, h, t)
		})
		if err != nil {
			return s.proxyFailed(ctx, proxyURL, err)
		}
		res.StatusCode = a.status
		if t.Sync {
			res.Header, res.Body = a.header, a.body
		}
		fallback, settled, err := s.judge(t, a, mode, attempt, res)
		if settled && err == nil && a.resp != nil {
			res.open = a.resp
		} else {
			a.close()
		}
		if settled {
			return fallback, err
		}
		last = a.header
	}
}

// proxyFailed settles an attempt that got no answer from the proxy.
func (s *Sender) proxyFailed(ctx context.Context, proxyURL *url.URL, err error) (fallbackReason, error) {
	isToken, proxyToken := asTokenError(err)
	switch {
	case ctx.Err() != nil:
		return fallbackNone, ctx.Err()
	case proxyToken:
		if s.shouldLogRefusal() {
			s.p.Logger.Warnw("No token for the event-forwarding proxy: sending directly", zap.Error(err))
		}
		return fallbackToken, nil
	case isToken:
		return fallbackNone, undelivered(err)
	}
	s.markProxyDown(proxyURL, err)
	return fallbackUnreachable, nil
}

// judge reads attempt number attempt's answer a: whether the send is
// settled, and if so whether it must go direct, or how it failed.
func (s *Sender) judge(t Target, a answer, mode proxyMode, attempt int, res *Result) (_ fallbackReason, settled bool, _ error) {
	verdict := judgeProxyAnswer(a.status, a.header, t.Sync)
	switch {
	case verdict == proxyDelivered:
		return fallbackNone, true, nil
	case verdict == proxyRefused:
		if s.shouldLogRefusal() {
			s.p.Logger.Warnw("The event-forwarding proxy refused an event: sending directly (logged once per "+logRefusals.String()+
				"; kn_forward_sender_fallbacks_total counts them all)",
				zap.Int("status", a.status), zap.String("reason", a.header.Get(delivery.HeaderForwardError)), zap.String("sink", t.URL.Redacted()))
		}
		return fallbackRefused, true, nil
	case verdict == proxySinkFinal, verdict == proxySinkRetryable && !mode.retrySink:
		if mode.keep == openBody {
			return fallbackNone, true, nil // the sink's answer, for the caller to judge
		}
		return fallbackNone, true, fmt.Errorf("%w: %s answered %d through the proxy after %d attempts", ErrUndelivered, t.URL.Redacted(), a.status, res.Attempts)
	case attempt < s.p.Retries:
		return fallbackNone, false, nil
	case verdict == proxyBusy:
		return fallbackBusy, true, nil
	}
	if mode.keep == openBody {
		return fallbackNone, true, nil
	}
	return fallbackNone, true, fmt.Errorf("%w: %s answered %d through the proxy (%s) after %d attempts",
		ErrUndelivered, t.URL.Redacted(), a.status, reasonOrSink(a.header), res.Attempts)
}

func reasonOrSink(h http.Header) string {
	if r := h.Get(delivery.HeaderForwardError); r != "" {
		return r
	}
	return "the sink's answer"
}

// setProxyHeaders adds the forwarding contract's headers to a call to the
// proxy, on top of the sink's own (Kn-Namespace, Authorization).
func (s *Sender) setProxyHeaders(ctx context.Context, h http.Header, t Target) error {
	if err := s.setProxyToken(ctx, h, t); err != nil {
		return err
	}
	if err := s.setSinkHeaders(ctx, h, &t); err != nil {
		return err
	}
	h.Set(delivery.HeaderForwardTo, t.URL.String())
	h.Set(delivery.HeaderForwardTimeout, delivery.FormatDuration(s.sinkTimeout(ctx, t)))
	if !t.Sync {
		h.Set(delivery.HeaderPrefer, delivery.PreferRespondAsync)
		s.setDeliveryHeaders(h, t)
	}
	return nil
}

// sinkTimeout is the deadline the proxy gets for its call to the sink:
// Timeout, or for a Sync send less if ctx ends sooner (the caller gives up
// then, and the proxy should too).
func (s *Sender) sinkTimeout(ctx context.Context, t Target) time.Duration {
	d := s.p.Timeout
	if dl, ok := ctx.Deadline(); ok && t.Sync {
		d = min(d, max(dl.Sub(s.p.Now()), time.Second))
	}
	return d
}

// setProxyToken adds, with OIDC, the token for the proxy's audience.
func (s *Sender) setProxyToken(ctx context.Context, h http.Header, t Target) error {
	if s.tokens == nil {
		return nil
	}
	sa := s.p.ProxyIdentity
	if sa.IsZero() {
		sa = ServiceAccount{Namespace: t.Namespace, Name: t.ServiceAccount}
	}
	if sa.IsZero() {
		return tokenError{err: fmt.Errorf("no service account to present to the proxy"), proxy: true}
	}
	tok, err := s.tokens.Token(ctx, sa, s.p.ProxyAudience)
	if err != nil {
		return tokenError{err: fmt.Errorf("token of %s for the proxy: %w", sa, err), proxy: true}
	}
	h.Set(delivery.HeaderForwardAuthorization, "Bearer "+tok.Value)
	return nil
}
