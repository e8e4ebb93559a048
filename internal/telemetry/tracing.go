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

package telemetry

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// TraceParams says where a process's spans go.
type TraceParams struct {
	// Exporter is "otlp" to export spans; any other value, the empty
	// string included, exports none.
	Exporter string
	// SamplingRatio is the share of new traces sampled; a caller's own
	// decision is always followed. If zero, no new trace is sampled.
	SamplingRatio float64
	// ServiceName is the service.name of the spans' resource.
	ServiceName string
}

// NewTracerProvider returns the TracerProvider p asks for: nil when
// tracing is off, else one that batches spans to an OTLP/HTTP endpoint
// (from the standard OTEL_EXPORTER_OTLP_* variables), samples new traces at
// p.SamplingRatio and follows the caller's decision. Shut it down to flush.
func NewTracerProvider(ctx context.Context, p TraceParams) (*sdktrace.TracerProvider, error) {
	if p.Exporter != "otlp" {
		return nil, nil
	}
	exp, err := otlptracehttp.New(ctx)
	if err != nil {
		return nil, err
	}
	return sdktrace.NewTracerProvider(
		sdktrace.WithBatcher(exp),
		sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(p.SamplingRatio))),
		sdktrace.WithResource(resource.NewSchemaless(attribute.String("service.name", p.ServiceName))),
	), nil
}
