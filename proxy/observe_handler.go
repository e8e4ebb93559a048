package proxy

import (
	"net/http"
	"time"

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
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		c := &call{metrics: m, start: start}
		sw := &statusWriter{ResponseWriter: w}
		ctx := withCall(r.Context(), c)
		if _, forwarding := r.Header[delivery.HeaderForwardTo]; tr != nil && (forwarding || !isProbe(r)) {
			sctx, span := tr.start(r.WithContext(ctx))
			ctx = sctx
			defer func() { tr.end(span, c, sw.status, sw.reason, outcomeOf(c, sw.status, sw.reason)) }()
		}
		defer func() {
			if c.probe {
				return
			}
			o := outcomeOf(c, sw.status, sw.reason)
			if sw.reason != "" {
				logAnswer(logger, r, c, o, sw)
			}
			if p := recover(); p != nil {
				// The answer broke off mid-stream (ReverseProxy aborts with
				// http.ErrAbortHandler): count it failed, then let it abort.
				m.ended(outcomeFailed, sw.status, time.Since(start).Seconds(), sw.reason)
				panic(p)
			}
			m.ended(o, sw.status, time.Since(start).Seconds(), sw.reason)
		}()
		next.ServeHTTP(sw, r.WithContext(ctx))
	})
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
