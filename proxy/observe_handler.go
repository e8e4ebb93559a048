package proxy

import (
	"net/http"
	"time"

	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"knative.dev/event-forwarding-proxy/delivery"
)

// NewObserveHandler is the outermost handler: it starts the request's call
// record and, unless the request is a probe, its server span; when the
// request ends it records the outcome, status class, duration and the
// proxy's reason, if the proxy answered itself, and logs each refused or
// failed call once. tr may be nil (no traces).
func NewObserveHandler(m *Metrics, tr *tracer, logger *zap.SugaredLogger, next http.Handler) http.Handler {
	return &observeHandler{m: m, tr: tr, logger: logger, next: next}
}

type observeHandler struct {
	m      *Metrics
	tr     *tracer
	logger *zap.SugaredLogger
	next   http.Handler
}

// observation is one request as the observe handler sees it. Its frame is
// the bottom of every call's stack, so the handler keeps no more in it
// than a pointer to this.
type observation struct {
	sw    statusWriter
	c     *call
	r     *http.Request // the request passed on, carrying c
	start time.Time
	span  trace.Span // nil when the request is not traced
}

func (h *observeHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	o := h.begin(w, r)
	defer h.end(o)
	h.next.ServeHTTP(&o.sw, o.r)
}

func (h *observeHandler) begin(w http.ResponseWriter, r *http.Request) *observation {
	start := time.Now()
	o := &observation{sw: statusWriter{ResponseWriter: w}, c: &call{metrics: h.m, start: start}, start: start}
	ctx := withCall(r.Context(), o.c)
	if _, forwarding := r.Header[delivery.HeaderForwardTo]; h.tr != nil && (forwarding || !isProbe(r)) {
		ctx, o.span = h.tr.start(r.WithContext(ctx))
	}
	o.r = r.WithContext(ctx)
	return o
}

// end records o's outcome, status class, duration and reason (a probe's
// only in its span), logs a refused or failed call, and ends the span. An
// answer that broke off mid-stream (the forwarder aborts with
// http.ErrAbortHandler) counts failed, then goes on aborting.
func (h *observeHandler) end(o *observation) {
	p := recover()
	if !o.c.probe {
		out := outcomeOf(o.c, o.sw.status, o.sw.reason)
		if o.sw.reason != "" {
			logAnswer(h.logger, o.r, o.c, out, &o.sw)
		}
		if p != nil {
			out = outcomeFailed
		}
		h.m.ended(out, o.sw.status, time.Since(o.start).Seconds(), o.sw.reason)
	}
	if o.span != nil {
		h.tr.end(o.span, o.c, o.sw.status, o.sw.reason, outcomeOf(o.c, o.sw.status, o.sw.reason))
	}
	if p != nil {
		panic(p)
	}
}

// logAnswer writes the one line of a call the proxy refused (info) or
// could not complete (warning).
func logAnswer(logger *zap.SugaredLogger, r *http.Request, c *call, o outcome, sw *statusWriter) {
	msg, level := "Refused a call", zapcore.InfoLevel
	if o == outcomeFailed {
		msg, level = "Call failed", zapcore.WarnLevel
	}
	if !logger.Desugar().Core().Enabled(level) {
		return
	}
	host := ""
	if c.dest != nil {
		host = c.dest.Host
	}
	logger.Logw(level, msg, zap.String("reason", string(sw.reason)), zap.Int("status", sw.status),
		zap.String("tenant", c.tenant), zap.String("destination", host),
		zap.String("ceId", r.Header.Get("Ce-Id")), zap.String("message", sw.message))
}

// statusWriter remembers the status written and the proxy's own reason.
// Unwrap lets http.ResponseController reach the connection's writer for
// flushes and deadlines.
type statusWriter struct {
	http.ResponseWriter
	status  int
	reason  Reason
	message string
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 && code >= 200 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
