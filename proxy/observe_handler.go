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
// failed call once, at most linesPerSecond of them a second (0: no bound;
// the lines beyond it are counted and the count logged). tr may be nil
// (no traces).
func NewObserveHandler(m *Metrics, tr *tracer, logger *zap.SugaredLogger, linesPerSecond int, next http.Handler) http.Handler {
	return &observeHandler{m: m, tr: tr, logger: logger, lines: newLineBudget(linesPerSecond, logger, "Per-call log lines dropped"), next: next}
}

type observeHandler struct {
	m      *Metrics
	tr     *tracer
	logger *zap.SugaredLogger
	lines  *lineBudget // the per-call lines logAnswer writes
	next   http.Handler
}

// observation is one request as the observe handler sees it. Its frame is
// the bottom of every call's stack, so the handler keeps no more in it
// than a pointer to this.
type observation struct {
	sw statusWriter
	c  *call
	// header is the request's, for its log line (logAnswer): a held call
	// keeps no request of its own here, only the forwarder's outbound one.
	header http.Header
	span   trace.Span // nil when the request is not traced; its start is c.start

	// A held request (hold): the server's stream, detached from the
	// handler's goroutine, ends when end is called.
	h       *observeHandler
	end     func(p any)
	handoff func() // runs a handedOff call (forwarding.wait)
}

// detacher is a ResponseWriter whose stream can outlive its handler
// (proxy/internal/h2server): once Detach is called, the handler's return
// does not end the request, end does.
type detacher interface {
	Detach() (end func(p any))
}

func (h *observeHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if d, ok := w.(detacher); ok {
		h.hold(d, w, r)
		return
	}
	o := &observation{}
	r = h.begin(o, w, r)
	defer h.end(o)
	h.next.ServeHTTP(&o.sw, r)
}

// hold serves a request whose stream can outlive the handler (an HTTP/2
// one). The chain runs on the stream's goroutine, which ends once the
// forwarder has the call out to an h2c destination (suspend): a held call
// then keeps no goroutine at all, only its records, until the goroutine
// that gets the answer writes it and ends the stream (resumed). That is
// what keeps a held h2c call to a few KB (docs/benchmarks.md).
func (h *observeHandler) hold(d detacher, w http.ResponseWriter, r *http.Request) {
	o := &observation{h: h, end: d.Detach()}
	defer h.settle(o)
	r = h.begin(o, w, r)
	o.c.held = o
	h.next.ServeHTTP(&o.sw, r)
}

// settle ends a held request once the chain returns, unless its call
// outlives the chain (call.phase): resumed ends it then.
func (h *observeHandler) settle(o *observation) {
	p := recover()
	switch {
	case o.c == nil: // begin panicked
		o.end(p)
		return
	case o.c.phase.outlivesChain():
		if p != nil {
			// The call belongs to resumed: this is a bug, which must
			// not take the process down with every other call.
			h.logger.Errorw("Panic after a call was handed to its destination", zap.Any("panic", p))
		}
		if o.c.phase == handedOff {
			// A call that must wait on a goroutine (forwarder.handOff)
			// waits on a new one, whose stack the chain never
			// deepened; it ends the request (observation.resumed).
			go o.handoff()
		}
		return
	}
	h.record(o, p)
	o.end(p)
	// An async call's delivery goes on without its request: the call no
	// longer keeps the observation, nor through it the server's stream.
	o.c.held = nil
}

// resumed ends a held request whose call the forwarder suspended or handed
// off, once the answer is written or has failed: it gives the admission
// slot back, records the outcome and ends the stream (with a reset, for an
// answer that broke off). Deferred by the forwarder.
func (o *observation) resumed() {
	p := recover()
	o.c.release()
	o.h.record(o, p)
	o.end(p)
}

// begin starts o's record of r and returns the request to pass on (with
// its span, when traced).
func (h *observeHandler) begin(o *observation, w http.ResponseWriter, r *http.Request) *http.Request {
	start := time.Now()
	o.sw.ResponseWriter, o.c = w, &call{metrics: h.m, start: start}
	o.sw.c = o.c // the handlers find it there (callOf): r is not copied
	o.header = r.Header
	if _, forwarding := r.Header[delivery.HeaderForwardTo]; h.tr != nil && (forwarding || !isProbe(r)) {
		var ctx context.Context
		ctx, o.span = h.tr.start(r.WithContext(withCall(r.Context(), o.c)))
		r = r.WithContext(ctx)
	}
	return r
}

// end records o's outcome (record) once the chain returns, then goes on
// with a panic that came through it.
func (h *observeHandler) end(o *observation) {
	p := recover()
	h.record(o, p)
	if p != nil {
		panic(p)
	}
}

// record records o's outcome, status class, duration and reason (a
// probe's only in its span), logs a refused or failed call, and ends the
// span. An answer that broke off mid-stream (the forwarder aborts with
// http.ErrAbortHandler, p) counts failed.
func (h *observeHandler) record(o *observation, p any) {
	if !o.c.probe {
		out := outcomeOf(o.c, o.sw.status, o.sw.reason)
		if (o.sw.reason != "" || o.c.brokeOff != nil) && h.lines.take() {
			logAnswer(h.logger, o.header, o.c, out, &o.sw)
		}
		if p != nil {
			out = outcomeFailed
		}
		h.m.ended(out, o.sw.status, time.Since(o.c.start).Seconds(), o.sw.reason)
	}
	if o.span != nil {
		h.tr.end(o.span, o.c, o.sw.status, o.sw.reason, outcomeOf(o.c, o.sw.status, o.sw.reason))
	}
}

// logAnswer writes the one line of a call the proxy refused (info) or
// could not complete (warning), or whose answer broke off after its head
// went to the caller (warning).
func logAnswer(logger *zap.SugaredLogger, header http.Header, c *call, o outcome, sw *statusWriter) {
	msg, level := "Refused a call", zapcore.InfoLevel
	switch {
	case c.brokeOff != nil:
		msg, level = "Answer broke off", zapcore.WarnLevel
	case o == outcomeFailed:
		msg, level = "Call failed", zapcore.WarnLevel
	}
	if !logger.Desugar().Core().Enabled(level) {
		return
	}
	host, message := "", sw.message
	if c.dest != nil {
		host = c.dest.Host
	}
	if c.brokeOff != nil {
		message = c.brokeOff.Error()
	}
	logger.Logw(level, msg, zap.String("reason", string(sw.reason)), zap.Int("status", sw.status),
		zap.String("tenant", c.tenant), zap.String("destination", host),
		zap.String("ceId", header.Get("Ce-Id")), zap.String("message", message))
}

// statusWriter remembers the status written and the proxy's own reason.
// Unwrap lets http.ResponseController reach the connection's writer for
// flushes and deadlines.
type statusWriter struct {
	http.ResponseWriter
	c       *call // the request's (callOf)
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
