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
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"sync/atomic"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"

	"knative.dev/event-forwarding-proxy/config"
	"knative.dev/event-forwarding-proxy/delivery"
	"knative.dev/event-forwarding-proxy/internal/aside"
)

// Sender delivers CloudEvents for a multi-tenant source, to many sinks on
// behalf of many sources, directly or through the event-forwarding proxy.
//
// Directly, every send shares one set of connection pools (HTTP/1.1
// keep-alive, h2c to the sinks SinkH2CHosts names), kept between ticks; each call
// has a deadline and is retried as upstream's PingSource adapter retries
// (5 times, exponentially from 50 ms, on network errors and 404, 413, 425,
// 429, 502, 503 and 504), with jitter, a cap, and Retry-After honoured.
//
// Through the proxy, the event is POSTed to the proxy with Kn-Forward-To
// over h2c, by default with Prefer: respond-async so that the send ends at
// the proxy's 202. A proxy that is busy (429, 503) is retried after its
// Retry-After; a proxy that cannot be reached, or that keeps refusing, is
// bypassed: the event goes direct and the fallback is counted. Nothing is
// dropped because the proxy is down: delivery is at least once. A
// synchronous call the proxy was holding when it died is sent again
// directly (the sink may see it twice); an event the proxy accepted with
// 202 is the proxy's to deliver (it drains them on SIGTERM).
//
// The route follows the Router: the adapter reports how many sources it
// serves (SetDirectSources) and the eventing ConfigMap sets the proxy and
// the threshold (SetForwarding, which kube.WatchForwarding calls on every
// change; package adapter/kube). A source author wires it so:
//
//	kc := kubernetes.NewForConfigOrDie(restConfig)
//	sender := adapter.NewSender(adapter.SenderParams{
//		Logger:        logger,
//		MeterProvider: meterProvider,
//		Tokens:        kube.NewTokenRequester(kc), // OIDC; nil without it
//		ProxyIdentity: adapter.ServiceAccount{Namespace: "knative-eventing", Name: "pingsource-mt-adapter"},
//	})
//	// config-event-forwarding, watched: an edit applies to the next send.
//	if err := kube.WatchForwarding(ctx, kc, config.SystemNamespace(os.LookupEnv), sender, logger); err != nil {
//		return err
//	}
//	sender.SetDirectSources(len(sources)) // whenever the number changes
//
//	// At every tick, for every source (failures are logged and counted):
//	_, err := sender.Send(ctx, kube.TargetFor(src.Namespace, &src.Status.SourceStatus), event)
//
// A Sender is safe for concurrent use; make one per process.
type Sender struct {
	p         SenderParams
	router    Router
	pools     *pools
	tokens    TokenSource
	metrics   *senderMetrics
	spec      atomic.Pointer[deliverySpec] // from the eventing ConfigMap
	downUntil atomic.Int64                 // unix nanoseconds: the proxy is bypassed until then
	refusedAt atomic.Int64                 // unix nanoseconds: last refusal by the proxy logged
}

// SenderParams configure a Sender. The zero value sends directly with
// upstream's retry policy and no OIDC tokens.
type SenderParams struct {
	// Transport tunes the shared connection pools. Its zero value keeps up
	// to 1024 idle connections per sink for 5 minutes, past the gap
	// between two ticks.
	Transport delivery.TransportParams
	// SinkH2CHosts are host patterns (config.ParseHostPatterns: "*.suffix",
	// exact names, "*") of the plain-http sinks sent h2c with prior
	// knowledge; every other plain-http sink gets HTTP/1.1. If empty,
	// none: HTTP/1.1 to every plain-http sink, as upstream's adapter sends.
	// https sinks negotiate h2 or HTTP/1.1 with ALPN either way.
	SinkH2CHosts []string
	// TrustRoots, when set, are the roots https sinks verify against as
	// each connection opens: the system roots plus eventing's trust
	// bundles (trustbundles.Watch), and a Target's CACerts on top.
	// A sink whose CACerts are all in those bundles may then go through
	// the proxy, which loads the same bundles; any other sink with CACerts
	// goes direct. If nil, the system roots, and every sink with CACerts
	// goes direct.
	TrustRoots *delivery.TrustRoots
	// Timeout bounds one call to a sink: a direct attempt, or the call the
	// proxy makes (sent as Kn-Forward-Timeout). If zero, 10 minutes.
	Timeout time.Duration
	// HandoffTimeout bounds an asynchronous hand-off to the proxy, up to
	// its 202. If zero, 10 s.
	HandoffTimeout time.Duration
	// Retries is how many times a failed send is tried again. If zero, 5;
	// if negative, none.
	Retries int
	// BackoffDelay is the wait before the first retry; it doubles with
	// each further one. If zero, 50 ms.
	BackoffDelay time.Duration
	// BackoffMax caps the exponential wait. If zero, 10 s.
	BackoffMax time.Duration
	// MaxRetryAfter caps how long a Retry-After answer delays a retry,
	// unless config-event-forwarding sets event-forwarding-retry-after-max.
	// If zero, 30 s.
	MaxRetryAfter time.Duration
	// ProxyDownFor is how long sends bypass the proxy after it could not be
	// reached, before it is tried again. If zero, 5 s.
	ProxyDownFor time.Duration
	// MaxReplyBytes bounds the answer kept for a Sync send. If zero, 4 MiB.
	MaxReplyBytes int64
	// MaxForwardBytes bounds the body Forward holds in memory to send
	// through the proxy (and again directly, on fallback); a larger one
	// goes direct. If zero, 4 MiB, the proxy's default event size.
	MaxForwardBytes int64

	// Tokens issues OIDC tokens: the proxy's in Kn-Forward-Authorization,
	// the sink's (when the Target names an audience) in Authorization. They
	// are cached until shortly before they expire (a TokenSource that is a
	// *CachedTokens is used as is). If nil, no token is sent.
	Tokens TokenSource
	// ProxyAudience is the audience of the proxy's token. If empty,
	// event-forwarding-proxy.
	ProxyAudience string
	// ProxyIdentity is the service account that presents itself to the
	// proxy: the adapter's own, in a namespace the proxy trusts to name
	// tenants (knative-eventing). If zero, the Target's service account.
	ProxyIdentity ServiceAccount

	// Logger logs failed sends and fallbacks. If nil, nothing is logged.
	Logger *zap.SugaredLogger
	// OnRouteChange is told the route at start (from NewSender), after
	// every switch and when its reason changes, without the Router's lock,
	// from whichever goroutine made the change: a Send's among them, so it
	// must return at once
	// (kube.PodRoute.Publish only stores the change). Racing switches may
	// reach it concurrently and out of order: RouteChange.Seq orders them.
	// If nil, switches are only logged and counted.
	OnRouteChange func(RouteChange)
	// MeterProvider receives the kn_forward_sender_* metrics. If nil, none.
	MeterProvider metric.MeterProvider
	// TracerProvider, when set, makes every call a client span and carries
	// its trace context. If nil, no spans.
	TracerProvider trace.TracerProvider
	// Now is the clock. If nil, time.Now.
	Now func() time.Time
	// Sleep waits d, or until ctx ends, between retries. If nil, a timer.
	Sleep func(ctx context.Context, d time.Duration) error
	// Rand returns a number in [0, n) for the backoff jitter. If nil,
	// math/rand/v2.
	Rand func(n int64) int64
}

// Target is where one event goes, and on whose behalf.
type Target struct {
	// URL is the sink's absolute http(s) URL. Required.
	URL *url.URL
	// CACerts are PEM certificates an https sink may be signed by, on top
	// of the system roots. The proxy cannot be told to trust them, so an
	// event for such a sink always goes direct. If empty, the system roots.
	CACerts string
	// Audience is the sink's OIDC audience. If empty, or without a token
	// source, no Authorization header is sent.
	Audience string
	// Namespace is the source's namespace, sent as Kn-Namespace.
	Namespace string
	// ServiceAccount names the source's OIDC service account in Namespace,
	// whose token (audience Audience) the sink gets.
	ServiceAccount string
	// Sync asks for the sink's answer (a reply event): through the proxy
	// the call is held rather than handed off, and Result carries the
	// answer's headers and body.
	Sync bool
	// DeadLetter is where the event goes, with Knative's error
	// extensions, once the sink failed for the last time: the source's own
	// dead-letter sink (a delivery spec's deadLetterSink, resolved). If
	// nil, config-event-forwarding's event-forwarding-dead-letter-sink,
	// if any. A Sync send is never dead-lettered: its caller has the
	// failure.
	DeadLetter *url.URL
}

// Result is how a send ended.
type Result struct {
	// Route is the way the event took last.
	Route Route
	// Fallback is set when the event was meant for the proxy and went direct.
	Fallback bool
	// StatusCode is the last answer's status (202 for a hand-off to the
	// proxy); 0 when no answer came.
	StatusCode int
	// Attempts counts the calls made, on both routes, to the dead-letter
	// sink too.
	Attempts int
	// DeadLettered is set when the sink failed and the dead-letter sink
	// took the event: Send then returns no error.
	DeadLettered bool
	// Header and Body are the sink's answer to a Sync send (Body holds at
	// most MaxReplyBytes).
	Header http.Header
	Body   []byte

	open      *http.Response // Forward's answer through the proxy, unread
	errorHead []byte         // the start of the sink's last failed answer, for knativeerrordata
}

// ErrUndelivered is wrapped by the error of every send that did not reach
// its sink.
var ErrUndelivered = errors.New("event not delivered")

// NewSender returns a Sender with its shared pools.
func NewSender(p SenderParams) *Sender {
	p.defaults()
	s := &Sender{p: p, pools: newPools(p.Transport, p.TrustRoots, p.SinkH2CHosts, p.TracerProvider)}
	if p.Tokens != nil {
		if c, ok := p.Tokens.(*CachedTokens); ok {
			s.tokens = c
		} else {
			s.tokens = &CachedTokens{Source: p.Tokens, Now: p.Now}
		}
	}
	s.spec.Store(s.deliverySpecFor(config.Forwarding{}))
	s.router.logger, s.router.now = p.Logger, p.Now
	s.metrics = newSenderMetrics(p.MeterProvider, &s.router)
	s.router.notifyOn(p.OnRouteChange)
	return s
}

func (p *SenderParams) defaults() {
	p.Timeout = orDefault(p.Timeout, 10*time.Minute)
	p.HandoffTimeout = orDefault(p.HandoffTimeout, 10*time.Second)
	switch {
	case p.Retries == 0:
		p.Retries = 5
	case p.Retries < 0:
		p.Retries = 0
	}
	p.BackoffDelay = orDefault(p.BackoffDelay, 50*time.Millisecond)
	p.BackoffMax = orDefault(p.BackoffMax, 10*time.Second)
	p.MaxRetryAfter = orDefault(p.MaxRetryAfter, 30*time.Second)
	p.ProxyDownFor = orDefault(p.ProxyDownFor, 5*time.Second)
	p.MaxReplyBytes = orDefault(p.MaxReplyBytes, 4<<20)
	p.MaxForwardBytes = orDefault(p.MaxForwardBytes, 4<<20)
	if p.ProxyAudience == "" {
		p.ProxyAudience = "event-forwarding-proxy"
	}
	if p.Logger == nil {
		p.Logger = zap.NewNop().Sugar()
	}
	if p.Now == nil {
		p.Now = time.Now
	}
	if p.Sleep == nil {
		p.Sleep = sleep
	}
}

// SetForwarding applies the eventing ConfigMap's content to the next sends.
// A proxy found unreachable is tried again at once: the new one may not be.
func (s *Sender) SetForwarding(c config.Forwarding) {
	s.spec.Store(s.deliverySpecFor(c))
	s.router.SetConfig(c)
	s.downUntil.Store(0)
}

// SetDirectSources tells how many sources the adapter serves; above the
// threshold, sends go through the proxy.
func (s *Sender) SetDirectSources(n int) { s.router.SetDirectSources(n) }

// Route returns the route the next send takes (unless the proxy is down).
func (s *Sender) Route() Route {
	r, _ := s.router.Decide()
	return r
}

// Send delivers e to t, through the proxy or directly, and returns when
// the sink answered (or, handed off asynchronously, when the proxy
// accepted it). The error wraps ErrUndelivered when the event did not get
// there, or is the context's when ctx ended first.
func (s *Sender) Send(ctx context.Context, t Target, e event.Event) (*Result, error) {
	start := s.p.Now()
	res := &Result{}
	m, err := prepareAside(ctx, t, &e)
	if err != nil {
		return res, err
	}
	route, proxyURL := s.router.Decide()
	if route == RouteProxy && t.CACerts != "" && !s.proxyTrusts(t.CACerts) {
		route = RouteDirect
	}
	if route == RouteProxy {
		res.Route = RouteProxy
		fallback := fallbackProxyDown
		if !s.proxyDown() {
			fallback, err = s.viaProxy(ctx, proxyURL, t, m, proxyMode{keep: keepFor(t.Sync), retrySink: true}, res)
		}
		if fallback != fallbackNone {
			s.metrics.fallback(ctx, fallback)
			res.Route, res.Fallback = RouteDirect, true
			err = s.direct(ctx, t, m, res)
		}
	} else {
		err = s.direct(ctx, t, m, res)
	}
	if err != nil {
		err = s.deadLetterFailed(ctx, t, m, res, err)
	}
	s.metrics.sent(ctx, res.Route, outcomeOf(res, err), s.p.Now().Sub(start))
	if err != nil {
		s.logUndelivered(t, &e, res, err)
	}
	return res, err
}

// prepare checks the sink URL and the event, and encodes the event.
//
// It and logUndelivered keep their temporaries out of Send's frame: the
// goroutine that waits for a sink's answer keeps, for as long as it waits,
// a stack as large as the deepest point the send reached (the event's
// validation, or the transport's header encoding), and Send is under all
// of it: a large frame there would be paid for by every held send.
func prepare(ctx context.Context, t Target, e *event.Event) (*encoded, error) {
	if t.URL == nil || (t.URL.Scheme != "http" && t.URL.Scheme != "https") || t.URL.Host == "" {
		return nil, fmt.Errorf("%w: the sink URL %v is not an absolute http(s) URL", ErrUndelivered, t.URL)
	}
	if err := e.Validate(); err != nil {
		return nil, fmt.Errorf("%w: invalid event: %w", ErrUndelivered, err)
	}
	m, err := encode(ctx, e)
	if err != nil {
		return nil, fmt.Errorf("%w: encoding the event: %w", ErrUndelivered, err)
	}
	return m, nil
}

// prepareAside runs prepare on a goroutine of its own (aside.Do): the
// CloudEvents SDK's validation and binary encoding run about 2.1 KB of
// frames deep.
func prepareAside(ctx context.Context, t Target, e *event.Event) (*encoded, error) {
	return aside.Do(func() (*encoded, error) { return prepare(ctx, t, e) })
}

// logUndelivered logs an event that could not be delivered.
func (s *Sender) logUndelivered(t Target, e *event.Event, res *Result, err error) {
	s.p.Logger.Errorw("Event not delivered", zap.String("sink", t.URL.Redacted()), zap.String("id", e.ID()),
		zap.String("source", e.Source()), zap.String("namespace", t.Namespace), zap.Stringer("route", res.Route),
		zap.Bool("fallback", res.Fallback), zap.Int("attempts", res.Attempts), zap.Int("status", res.StatusCode), zap.Error(err))
}

// CloseIdleConnections closes the idle connections of every pool. Call it
// at shutdown only: between ticks the pools are what make the next tick
// cheap.
func (s *Sender) CloseIdleConnections() { s.pools.closeIdle() }

// proxyTrusts reports whether the proxy may reach a sink signed by
// caCerts: they are all in the trust bundles this Sender loads, which the
// proxy loads too.
func (s *Sender) proxyTrusts(caCerts string) bool {
	return s.p.TrustRoots != nil && s.p.TrustRoots.Covers(caCerts)
}

// proxyDown reports whether the proxy is being bypassed after it could not
// be reached.
func (s *Sender) proxyDown() bool {
	return s.p.Now().UnixNano() < s.downUntil.Load()
}

// markProxyDown bypasses the proxy for ProxyDownFor.
func (s *Sender) markProxyDown(proxyURL *url.URL, err error) {
	until := s.p.Now().Add(s.p.ProxyDownFor)
	if prev := s.downUntil.Swap(until.UnixNano()); s.p.Now().UnixNano() >= prev {
		s.p.Logger.Warnw("The event-forwarding proxy cannot be reached: sending directly for a while",
			zap.String("proxy", proxyURL.Redacted()), zap.Duration("for", s.p.ProxyDownFor), zap.Error(err))
	}
}

// logRefusals is how often a proxy's refusals are logged: an adapter with
// a misconfigured proxy must not log each of thousands of events per tick.
const logRefusals = 10 * time.Second

// shouldLogRefusal reports whether a refusal by the proxy is to be logged
// now, at most once per logRefusals.
func (s *Sender) shouldLogRefusal() bool {
	now := s.p.Now().UnixNano()
	last := s.refusedAt.Load()
	return now-last >= int64(logRefusals) && s.refusedAt.CompareAndSwap(last, now)
}

// retryWait sleeps before retry number attempt (1 for the first); false
// when ctx ended first.
func (s *Sender) retryWait(ctx context.Context, route Route, attempt int, h http.Header) bool {
	var ra time.Duration
	if h != nil {
		ra = delivery.RetryAfter(h, s.p.Now())
	}
	s.metrics.retried(ctx, route)
	return s.p.Sleep(ctx, s.spec.Load().backoff.Wait(attempt, ra)) == nil
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// orDefault returns v, or def when v is not positive: how zero settings
// take their defaults.
func orDefault[T int | int64 | time.Duration](v, def T) T {
	if v <= 0 {
		return def
	}
	return v
}
