package proxy

import (
	"context"
	"errors"
	"net/http"
	"net/http/httputil"
	"strconv"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"

	"knative.dev/event-forwarding-proxy/config"
	"knative.dev/event-forwarding-proxy/delivery"
)

// ForwardParams configure how calls reach their destinations.
type ForwardParams struct {
	// Transports reach destinations. Required.
	Transports *delivery.Transports
	// Protocol is config.ProtocolAuto (h2c when the caller came over
	// HTTP/2 and the destination speaks it), ProtocolHTTP1 or ProtocolH2C.
	// If empty, auto.
	Protocol string
	// MaxEventBytes bounds bodies of unknown length. If zero, 4 MiB.
	MaxEventBytes int64
	// LoopID is written into CDN-Loop. If empty, DefaultLoopID.
	LoopID string
	// BodyIdleTimeout fails a request whose body stops coming for this
	// long. If zero, 30 s.
	BodyIdleTimeout time.Duration
	// Stop, when done, cuts every synchronous call still held; its cause
	// decides the answer (errShuttingDown: 503 draining). If nil, never.
	Stop context.Context
	// Tracing makes a client span of every attempt. If nil, none.
	Tracing trace.TracerProvider
}

// roundTrippers returns the HTTP/1.1 and h2c transports, traced when
// tracing is on.
func (p *ForwardParams) roundTrippers() (h1, h2c http.RoundTripper) {
	return delivery.TraceTransport(p.Transports.HTTP1, p.Tracing, propagator),
		delivery.TraceTransport(p.Transports.H2C, p.Tracing, propagator)
}

func (p *ForwardParams) defaults() {
	if p.Protocol == "" {
		p.Protocol = config.ProtocolAuto
	}
	if p.MaxEventBytes <= 0 {
		p.MaxEventBytes = 4 << 20
	}
	if p.LoopID == "" {
		p.LoopID = DefaultLoopID
	}
	if p.BodyIdleTimeout <= 0 {
		p.BodyIdleTimeout = 30 * time.Second
	}
}

// useH2C reports whether call c, which arrived over HTTP/2 or not, goes
// out over h2c. Only plain-http destinations can. In auto mode, as
// Knative's activator does, an HTTP/2 caller gets h2c to the destination,
// but only once the prober has seen that the destination speaks it: a plain
// HTTP/1.1 sink then still gets HTTP/1.1 instead of a failed call.
func (p *ForwardParams) useH2C(ctx context.Context, inboundHTTP2 bool, c *call) bool {
	switch {
	case c.dest.Scheme != "http":
		return false
	case p.Protocol == config.ProtocolH2C:
		return true
	case p.Protocol != config.ProtocolAuto || !inboundHTTP2:
		return false
	case p.Transports.Prober == nil:
		return true
	default:
		return p.Transports.Prober.Supports(ctx, c.destKey)
	}
}

// NewForwardHandler forwards a synchronous call and streams the
// destination's answer back: method, body and end-to-end headers as they
// came, hop-by-hop and Kn-Forward-* headers stripped, status, headers and
// body of the answer unchanged. It never retries: the caller owns retries.
func NewForwardHandler(p ForwardParams, logger *zap.SugaredLogger) http.Handler {
	p.defaults()
	f := &forwarder{p: p, logger: logger}
	h1, h2c := p.roundTrippers()
	f.h1 = f.reverseProxy(h1)
	f.h2 = f.reverseProxy(h2c)
	return f
}

type forwarder struct {
	p      ForwardParams
	logger *zap.SugaredLogger
	h1, h2 *httputil.ReverseProxy
}

func (f *forwarder) reverseProxy(t http.RoundTripper) *httputil.ReverseProxy {
	return &httputil.ReverseProxy{
		Rewrite:      f.rewrite,
		Transport:    t,
		BufferPool:   copyBuffers,
		ErrorHandler: f.fail,
		ErrorLog:     zap.NewStdLog(f.logger.Desugar()),
	}
}

func (f *forwarder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	c := callFrom(r.Context())
	ctx := r.Context()
	if f.p.Stop != nil {
		var cut context.CancelCauseFunc
		ctx, cut = context.WithCancelCause(ctx)
		defer cut(nil)
		defer context.AfterFunc(f.p.Stop, func() { cut(context.Cause(f.p.Stop)) })()
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	defer releaseStalledCaller(ctx, w)()
	out := r.WithContext(ctx)
	if r.Body != nil && r.Body != http.NoBody {
		c.body = newGuardedBody(w, r.Body, f.p.MaxEventBytes, f.p.BodyIdleTimeout)
		out.Body = c.body
	}
	if f.p.useH2C(ctx, r.ProtoMajor == 2, c) {
		f.h2.ServeHTTP(w, out)
	} else {
		f.h1.ServeHTTP(w, out)
	}
}

// errShuttingDown is the cause of calls cut at the drain deadline.
var errShuttingDown = errors.New("the proxy shut down before the destination answered")

// forwardedHeaders are end-to-end headers that ReverseProxy removes before
// Rewrite; the proxy forwards them as the caller sent them.
var forwardedHeaders = []string{"X-Forwarded-For", "X-Forwarded-Host", "X-Forwarded-Proto", "Forwarded"}

func (f *forwarder) rewrite(pr *httputil.ProxyRequest) {
	c := callFrom(pr.In.Context())
	u := *c.dest
	pr.Out.URL = &u
	pr.Out.Host = ""
	for _, k := range forwardedHeaders {
		if v, ok := pr.In.Header[k]; ok {
			pr.Out.Header[k] = v
		}
	}
	removeForwardHeaders(pr.Out.Header)
	pr.Out.Header.Add(headerCDNLoop, f.p.LoopID)
}

// fail answers a call that got no response from its destination.
func (f *forwarder) fail(w http.ResponseWriter, out *http.Request, err error) {
	c := callFrom(out.Context())
	reason := failureReason(out.Context(), c, err)
	if reason == "" {
		f.logger.Debugw("Caller went away", zap.String("destination", c.dest.Host), zap.Error(err))
		return
	}
	writeError(w, reason, failureMessage(reason, c, err))
}

// failureReason classifies why a call got no response; "" when the caller
// went away and nobody is listening.
func failureReason(ctx context.Context, c *call, err error) Reason {
	switch {
	case c.body != nil && c.body.tooLarge.Load():
		return ReasonBodyTooLarge
	case c.body != nil && c.body.stalled.Load():
		return ReasonBadRequest
	case c.body != nil && c.body.malformed.Load() && ctx.Err() == nil:
		return ReasonBadRequest
	case errors.Is(err, delivery.ErrDestinationDenied):
		return ReasonDestinationDenied
	case errors.Is(err, delivery.ErrBreakerOpen):
		return ReasonDestinationBusy
	case errors.Is(context.Cause(ctx), errShuttingDown):
		return ReasonDraining
	}
	switch delivery.Classify(ctx, err) {
	case delivery.TimedOut:
		return ReasonTimeout
	case delivery.CallerGone:
		return ""
	default:
		return ReasonUnreachable
	}
}

func failureMessage(reason Reason, c *call, err error) string {
	switch reason {
	case ReasonTimeout:
		return "no response from " + c.dest.Host + " within " + c.timeout.String()
	case ReasonDraining:
		return errShuttingDown.Error() + "; retry on another instance"
	case ReasonBadRequest:
		if c.body.malformed.Load() {
			return "the request body could not be read: " + err.Error()
		}
		return "no byte of the request body came for " + c.body.idle.String()
	case ReasonBodyTooLarge:
		return "the body is larger than the " + strconv.FormatInt(c.body.max, 10) + " bytes allowed"
	default:
		return err.Error()
	}
}

// copyBuffers lends ReverseProxy 32 KiB copy buffers, so that a held call
// owns no buffer while it waits.
var copyBuffers httputil.BufferPool = bufferPool{}

const copyBufferSize = 32 << 10

var copyBufferPool = sync.Pool{New: func() any { return new([copyBufferSize]byte) }}

type bufferPool struct{}

func (bufferPool) Get() []byte { return copyBufferPool.Get().(*[copyBufferSize]byte)[:] }
func (bufferPool) Put(b []byte) {
	if len(b) == copyBufferSize {
		copyBufferPool.Put((*[copyBufferSize]byte)(b))
	}
}
