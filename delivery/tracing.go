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

package delivery

import (
	"net/http"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// TracerName names the tracer of the outbound side.
const TracerName = "knative.dev/event-forwarding-proxy/delivery"

// TraceTransport wraps base so that every call to a destination is a client
// span, child of the span in the request's context, and carries that span's
// W3C traceparent (and the baggage) to the destination. With a nil tp it
// returns base unchanged: the caller's own trace headers then pass through
// as any end-to-end header does.
func TraceTransport(base http.RoundTripper, tp trace.TracerProvider, prop propagation.TextMapPropagator) http.RoundTripper {
	if tp == nil {
		return base
	}
	if prop == nil {
		prop = propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})
	}
	return &traceTransport{base: base, tracer: tp.Tracer(TracerName), prop: prop}
}

type traceTransport struct {
	base   http.RoundTripper
	tracer trace.Tracer
	prop   propagation.TextMapPropagator
}

var _ http.RoundTripper = (*traceTransport)(nil)

func (t *traceTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	out, span := t.begin(req)
	resp, err := t.base.RoundTrip(out)
	end(span, out, resp, err)
	return resp, err
}

// Go is RoundTrip for callers that hold no goroutine while the
// destination answers (see Start): the span ends when done is called.
func (t *traceTransport) Go(req *http.Request, done func(*http.Response, error)) {
	out, span := t.begin(req)
	Start(t.base, out, func(resp *http.Response, err error) {
		end(span, out, resp, err)
		done(resp, err)
	})
}

// begin starts the client span of a call and returns the request that
// carries it.
func (t *traceTransport) begin(req *http.Request) (*http.Request, trace.Span) {
	ctx, span := t.tracer.Start(req.Context(), "kn-forward send "+req.Method,
		trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(
			attribute.String("http.request.method", req.Method),
			attribute.String("server.address", req.URL.Hostname()),
			attribute.String("network.protocol.name", "http"),
		))
	out := req.Clone(ctx)
	t.prop.Inject(ctx, propagation.HeaderCarrier(out.Header))
	return out, span
}

// end records a call's outcome on its span and ends it.
func end(span trace.Span, out *http.Request, resp *http.Response, err error) {
	defer span.End()
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, Classify(out.Context(), err).String())
		return
	}
	span.SetAttributes(attribute.Int("http.response.status_code", resp.StatusCode))
	if resp.StatusCode >= 500 {
		span.SetStatus(codes.Error, resp.Status)
	}
}

// Starter starts calls without a goroutine waiting for each: done gets the
// answer (whose body it must read or close) or the error, on a goroutine
// of its own, once either is there. h2c.Transport is one.
type Starter interface {
	Go(req *http.Request, done func(*http.Response, error))
}

// Start starts req through rt: with rt's own Go when rt is a Starter,
// else with RoundTrip on a goroutine that waits for the answer.
func Start(rt http.RoundTripper, req *http.Request, done func(*http.Response, error)) {
	if s, ok := rt.(Starter); ok {
		s.Go(req, done)
		return
	}
	go func() { done(rt.RoundTrip(req)) }()
}
