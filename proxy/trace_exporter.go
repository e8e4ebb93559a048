package proxy

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"knative.dev/event-forwarding-proxy/config"
)

// NewTracerProvider returns the TracerProvider cfg asks for: nil when
// tracing is off (FORWARD_TRACE_EXPORTER=none), else one that batches spans
// to an OTLP/HTTP endpoint (from the standard OTEL_EXPORTER_OTLP_*
// variables), samples new traces at cfg.TraceSamplingRatio and follows the
// caller's decision. Shut it down to flush.
func NewTracerProvider(ctx context.Context, cfg *config.Proxy) (*sdktrace.TracerProvider, error) {
	if cfg.TraceExporter != "otlp" {
		return nil, nil
	}
	exp, err := otlptracehttp.New(ctx)
	if err != nil {
		return nil, err
	}
	return sdktrace.NewTracerProvider(
		sdktrace.WithBatcher(exp),
		sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(cfg.TraceSamplingRatio))),
		sdktrace.WithResource(resource.NewSchemaless(attribute.String("service.name", "event-forwarding-proxy"))),
	), nil
}
