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

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// tracer makes the server span of each call. A nil *tracer traces nothing.
type tracer struct {
	t    trace.Tracer
	prop propagation.TextMapPropagator
}

func newTracer(tp trace.TracerProvider, prop propagation.TextMapPropagator) *tracer {
	if tp == nil {
		return nil
	}
	return &tracer{t: tp.Tracer("knative.dev/event-forwarding-proxy/proxy"), prop: prop}
}

// start opens the server span of r, continuing the caller's trace from its
// traceparent and baggage headers, with the CloudEvent's attributes when it
// is in binary mode.
func (t *tracer) start(r *http.Request) (context.Context, trace.Span) {
	ctx := t.prop.Extract(r.Context(), propagation.HeaderCarrier(r.Header))
	attrs := []attribute.KeyValue{attribute.String("http.request.method", r.Method)}
	for _, a := range []struct{ header, key string }{
		{"Ce-Id", "cloudevents.event_id"},
		{"Ce-Type", "cloudevents.event_type"},
		{"Ce-Source", "cloudevents.event_source"},
	} {
		if v := r.Header.Get(a.header); v != "" {
			attrs = append(attrs, attribute.String(a.key, v))
		}
	}
	return t.t.Start(ctx, "kn-forward", trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(attrs...))
}

// end closes a server span with what became of the call.
func (t *tracer) end(span trace.Span, c *call, status int, reason Reason, o outcome) {
	attrs := []attribute.KeyValue{attribute.String("kn.forward.outcome", outcomeNames[o])}
	if status != 0 {
		attrs = append(attrs, attribute.Int("http.response.status_code", status))
	}
	if reason != "" {
		attrs = append(attrs, attribute.String("kn.forward.reason", string(reason)))
	}
	if c.dest != nil {
		attrs = append(attrs, attribute.String("kn.forward.destination.host", c.dest.Hostname()),
			attribute.String("kn.forward.tenant", c.tenant), attribute.Bool("kn.forward.async", c.async))
	}
	span.SetAttributes(attrs...)
	if o == outcomeFailed || status >= 500 {
		span.SetStatus(codes.Error, string(reason))
	}
	span.End()
}
