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
	"context"
	"errors"
	"net"
	"net/http"
	"time"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"

	"knative.dev/event-forwarding-proxy/config"
	"knative.dev/event-forwarding-proxy/delivery"
)

// Proxy is one forwarding proxy process's handler chain and the state that
// outlives a request: admission counts, drain state, background deliveries.
type Proxy struct {
	Limiter *Limiter
	Budget  *MemoryBudget
	Drainer *Drainer
	async   *Async
	reports *KPAReports             // nil unless FORWARD_KPA_REPORT_URL is set
	stop    context.CancelCauseFunc // cuts the synchronous calls still held
	base    context.Context         // the connections' base context (BaseContext)
	trs     *delivery.Transports    // idle connections closed by Shutdown
	handler http.Handler
	logger  *zap.SugaredLogger
}

// Option changes how New builds a Proxy.
type Option func(*options)

type options struct {
	transports     *delivery.Transports
	loopID         string
	meterProvider  metric.MeterProvider
	authenticator  Authenticator
	tracerProvider trace.TracerProvider
	trustRoots     *delivery.TrustRoots
}

// WithTrustRoots makes https destinations verify against r (the system
// roots and eventing's trust bundles, see kube.WatchTrustBundles) as it
// is when each connection opens. If unset, the system roots. Ignored with
// WithTransports.
func WithTrustRoots(r *delivery.TrustRoots) Option {
	return func(o *options) { o.trustRoots = r }
}

// WithAuthenticator makes every caller authenticate with a bearer token
// in Kn-Forward-Authorization, verified by a. If unset, callers are not
// authenticated and their tenant is what Kn-Namespace says.
func WithAuthenticator(a Authenticator) Option {
	return func(o *options) { o.authenticator = a }
}

// WithTracerProvider makes a server span of every call and a client span of
// every attempt to reach its destination, through tp, propagating W3C trace
// context and baggage. If unset, nothing is traced and the caller's trace
// headers pass through untouched.
func WithTracerProvider(tp trace.TracerProvider) Option {
	return func(o *options) { o.tracerProvider = tp }
}

// WithMeterProvider records the proxy's metrics through mp. If unset,
// nothing is recorded.
func WithMeterProvider(mp metric.MeterProvider) Option {
	return func(o *options) { o.meterProvider = mp }
}

// WithTransports makes the proxy reach destinations through t instead of
// transports built from the configuration.
func WithTransports(t *delivery.Transports) Option {
	return func(o *options) { o.transports = t }
}

// WithLoopID sets the identity written into CDN-Loop. If unset,
// DefaultLoopID.
func WithLoopID(id string) Option {
	return func(o *options) { o.loopID = id }
}

// New builds the proxy described by cfg. The handler chain, outermost
// first: loop check, probes and drain, destination, admission, then the
// synchronous forwarder or the async hand-off; all inside the metrics
// handler, which sees every request but the proxy's own KPA reports
// (KPAReports). With FORWARD_KPA_REPORT_URL set, Drain must be called.
func New(cfg *config.Proxy, logger *zap.SugaredLogger, opts ...Option) *Proxy {
	o := options{loopID: DefaultLoopID}
	for _, opt := range opts {
		opt(&o)
	}
	policy := DestinationPolicy(cfg)
	if o.transports == nil {
		tp := TransportParams(cfg, policy)
		if o.trustRoots != nil {
			tp.Roots = o.trustRoots
		}
		o.transports = delivery.NewTransports(tp)
	}
	p := &Proxy{
		Limiter: NewLimiter(LimiterParams{
			MaxInflight:       cfg.MaxInflight,
			MaxPerDestination: cfg.MaxInflightPerDestination,
			MaxPerTenant:      cfg.MaxInflightPerTenant,
			Reserve:           cfg.TenantReserve,
		}),
		Budget:  NewMemoryBudget(cfg.MemoryBudgetBytes),
		Drainer: &Drainer{},
		trs:     o.transports,
		logger:  logger,
	}
	m, err := NewMetrics(o.meterProvider, p.Limiter, p.Budget, cfg.MetricsMaxLabelValues)
	if err != nil {
		// Only an invalid instrument name can cause this: a bug, not a setting.
		logger.Errorw("Metrics are off: cannot build instruments", zap.Error(err))
	}
	stopCtx, stop := context.WithCancelCause(context.Background())
	p.stop = stop
	p.base = context.WithValue(stopCtx, stopScope{}, stopCtx)
	fp := ForwardParams{
		Stop:            stopCtx,
		Transports:      o.transports,
		Protocol:        cfg.DestinationProtocol,
		H2CHosts:        cfg.H2CHosts,
		MaxEventBytes:   cfg.MaxEventBytes,
		LoopID:          o.loopID,
		BodyIdleTimeout: cfg.BodyIdleTimeout,
		BodyMinRate:     cfg.BodyMinRate,
		Tracing:         o.tracerProvider,
	}
	p.async = NewAsync(AsyncParams{ForwardParams: fp, MaxBackoff: cfg.AsyncBackoffMax, MaxRetryAfter: cfg.AsyncMaxRetryAfter}, logger)
	if cfg.SpreadAbove > 0 {
		s, err := NewSpreader(SpreadParams{URL: cfg.SpreadURL, Above: cfg.SpreadAbove, Timeout: cfg.SpreadTimeout}, p.Limiter.Inflight, logger)
		if err != nil {
			// config.ProxyFromEnv refuses such a URL: a bug, not a setting.
			logger.Errorw("Spreading is off", zap.Error(err))
		}
		p.async.spread = s
	}

	// Innermost first.
	h := modeSwitch(NewForwardHandler(fp, logger), p.async)
	h = NewAdmissionHandler(p.Limiter, p.Budget, h)
	h = NewDestinationHandler(DestinationParams{
		AllowedHosts:    cfg.AllowedHosts,
		Policy:          policy,
		MaxTimeout:      cfg.MaxTimeout,
		MaxEventBytes:   cfg.MaxEventBytes,
		Retries:         cfg.AsyncRetries,
		MaxRetries:      cfg.AsyncMaxRetries,
		BackoffDelay:    cfg.AsyncBackoffDelay,
		MaxBackoffDelay: cfg.AsyncBackoffMax,
	}, h)
	if o.authenticator != nil {
		h = NewAuthHandler(AuthParams{Authenticator: o.authenticator, TrustedNamespaces: cfg.TrustedNamespaces}, h)
	}
	h = NewProbeHandler(p.Drainer, h)
	h = NewRequestGuardHandler(h)
	h = NewLoopHandler(o.loopID, h)
	p.handler = NewObserveHandler(m, newTracer(o.tracerProvider, propagator), logger, cfg.LogCallsPerSecond, h)
	if cfg.KPAReportURL != "" {
		// Outermost: a report is no call, and no metric counts it.
		p.reports = NewKPAReports(KPAReportParams{
			URL: cfg.KPAReportURL, CallsPerReport: cfg.KPACallsPerReport, MaxAge: cfg.KPAReportMaxAge,
		}, p.async.Pending, logger)
		p.handler = p.reports.Handler(p.handler)
	}
	return p
}

// DestinationPolicy is the address policy of cfg: the built-in deny list
// with its allowed exceptions, the denied ranges, the proxy's own addresses
// and the Kubernetes API's ClusterIP.
func DestinationPolicy(cfg *config.Proxy) *delivery.Policy {
	return &delivery.Policy{Allowed: cfg.AllowedCIDRs, Denied: cfg.DeniedCIDRs, Self: delivery.LocalAddrs(), API: cfg.KubernetesAPI}
}

// TransportParams derives the outbound transport settings from cfg, with
// policy checking every dialed address.
func TransportParams(cfg *config.Proxy, policy *delivery.Policy) delivery.TransportParams {
	return delivery.TransportParams{
		DialTimeout:         cfg.DialTimeout,
		IdleConnTimeout:     cfg.IdleConnTimeout,
		MaxIdleConnsPerHost: cfg.MaxIdleConnsPerHost,
		HTTP2:               HTTP2Config(cfg),
		Control:             policy.Control,
		Breaker:             delivery.BreakerParams{Failures: cfg.BreakerFailures, Window: cfg.BreakerWindow, Cooldown: cfg.BreakerCooldown},
		MaxH2CConnsPerHost:  H2CConnsPerDestination(cfg.MaxInflightPerDestination),
	}
}

// H2CConnsPerDestination is how many h2c connections the proxy opens to one
// destination: enough for the calls one destination may hold
// (FORWARD_MAX_INFLIGHT_PER_DESTINATION) at 100 streams per connection, the
// least RFC 9113 recommends a server to allow, and at least 4.
func H2CConnsPerDestination(maxPerDestination int) int {
	return max(4, (maxPerDestination+99)/100)
}

// HTTP2Config is the HTTP/2 tuning of cfg, shared by the inbound server and
// the outbound transports.
func HTTP2Config(cfg *config.Proxy) *http.HTTP2Config {
	return &http.HTTP2Config{
		MaxConcurrentStreams:          cfg.H2MaxConcurrentStreams,
		MaxReceiveBufferPerConnection: cfg.H2ConnWindowBytes,
		MaxReceiveBufferPerStream:     cfg.H2StreamWindowBytes,
		SendPingTimeout:               30 * time.Second,
		PingTimeout:                   15 * time.Second,
	}
}

// propagator reads and writes W3C trace context and baggage.
var propagator = propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})

// modeSwitch sends async calls to async and the others to sync.
func modeSwitch(sync, async http.Handler) http.Handler {
	return &modeHandler{sync: sync, async: async}
}

type modeHandler struct{ sync, async http.Handler }

func (h *modeHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if callOf(w, r).async {
		h.async.ServeHTTP(w, r)
		return
	}
	h.sync.ServeHTTP(w, r)
}

// Handler returns the handler chain.
func (p *Proxy) Handler() http.Handler { return p.handler }

// Server returns the inbound server of the proxy (NewServer) with
// BaseContext set.
func (p *Proxy) Server(cfg *config.Proxy, logger *zap.SugaredLogger) *http.Server {
	s := NewServer(cfg, p.handler, logger)
	s.BaseContext = p.BaseContext
	return s
}

// BaseContext is the base context of the proxy's connections, for
// http.Server.BaseContext: the shutdown deadline cuts it. A call whose
// request context comes from it needs no hook of its own to be cut then;
// one served by another server gets one (context.AfterFunc), which costs
// each call a registration with the shutdown context and its lock.
func (p *Proxy) BaseContext(net.Listener) context.Context { return p.base }

// stopScope marks a context under ForwardParams.Stop: its value is Stop.
type stopScope struct{}

// Drain starts draining: readiness fails and new calls get 503 draining,
// including one that passed the drain check just before and is not yet
// admitted.
func (p *Proxy) Drain() {
	p.Drainer.Drain()
	p.Limiter.Close()
	if p.reports != nil {
		p.reports.Stop()
	}
}

// Shutdown waits until every held call, sync or async, has ended. When ctx
// ends first, the calls still held are cut: a synchronous caller whose
// answer has not started gets 503 draining (never a bare reset), and each
// background delivery is logged as abandoned. The error is then ctx's.
// Either way, the idle connections to destinations are closed.
func (p *Proxy) Shutdown(ctx context.Context) error {
	defer p.trs.CloseIdleConnections()
	err := p.Limiter.WaitIdle(ctx)
	if err == nil {
		return p.async.Wait(ctx)
	}
	p.stop(errShuttingDown)
	p.async.Abort()
	wctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return errors.Join(err, p.Limiter.WaitIdle(wctx), p.async.Wait(wctx))
}
