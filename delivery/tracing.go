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
	ctx, span := t.tracer.Start(req.Context(), "kn-forward send "+req.Method,
		trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(
			attribute.String("http.request.method", req.Method),
			attribute.String("server.address", req.URL.Hostname()),
			attribute.String("network.protocol.name", "http"),
		))
	defer span.End()
	out := req.Clone(ctx)
	t.prop.Inject(ctx, propagation.HeaderCarrier(out.Header))
	resp, err := t.base.RoundTrip(out)
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, Classify(ctx, err).String())
		return nil, err
	}
	span.SetAttributes(attribute.Int("http.response.status_code", resp.StatusCode))
	if resp.StatusCode >= 500 {
		span.SetStatus(codes.Error, resp.Status)
	}
	return resp, nil
}
