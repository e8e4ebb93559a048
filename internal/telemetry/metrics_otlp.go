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
	"os"

	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetricgrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetrichttp"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"knative.dev/pkg/observability/metrics"
)

// NewOTLPMetricReader returns a reader that pushes metrics as cfg (the
// metrics part of config-observability) asks: over OTLP gRPC or
// HTTP/protobuf to its endpoint, every ExportInterval. For any other
// protocol it returns nil: Prometheus is served on its own port, and none
// means nothing more. As knative.dev/pkg does, OTEL_EXPORTER_OTLP_ENDPOINT
// or OTEL_EXPORTER_OTLP_METRICS_ENDPOINT, when set, win over the endpoint,
// and OTEL_METRIC_EXPORT_INTERVAL over the interval.
func NewOTLPMetricReader(ctx context.Context, cfg metrics.Config) (sdkmetric.Reader, error) {
	override := os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || os.Getenv("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT") != ""
	var (
		exp sdkmetric.Exporter
		err error
	)
	switch cfg.Protocol {
	case metrics.ProtocolGRPC:
		var opts []otlpmetricgrpc.Option
		if !override {
			opts = append(opts, otlpmetricgrpc.WithEndpointURL(cfg.Endpoint))
		}
		exp, err = otlpmetricgrpc.New(ctx, opts...)
	case metrics.ProtocolHTTPProtobuf:
		var opts []otlpmetrichttp.Option
		if !override {
			opts = append(opts, otlpmetrichttp.WithEndpointURL(cfg.Endpoint))
		}
		exp, err = otlpmetrichttp.New(ctx, opts...)
	default:
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var opts []sdkmetric.PeriodicReaderOption
	if cfg.ExportInterval > 0 && os.Getenv("OTEL_METRIC_EXPORT_INTERVAL") == "" {
		opts = append(opts, sdkmetric.WithInterval(cfg.ExportInterval))
	}
	return sdkmetric.NewPeriodicReader(exp, opts...), nil
}
