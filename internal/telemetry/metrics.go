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
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/exemplar"
)

// NewPrometheusMeterProvider returns a MeterProvider whose instruments are
// exported through reg, with the Go runtime and process collectors beside
// them. Series carry no scope or target labels: the names are the contract.
// They carry no exemplars either: the proxy records its measurements with
// no trace in their context, so the SDK's default trace-based filter would
// never keep one, yet it would run, with the exemplar reservoir, on every
// measurement of every call.
//
// opts add to the provider: more readers (NewOTLPMetricReader), the
// resource they report.
func NewPrometheusMeterProvider(reg *prometheus.Registry, opts ...sdkmetric.Option) (*sdkmetric.MeterProvider, error) {
	exp, err := otelprom.New(otelprom.WithRegisterer(reg), otelprom.WithoutScopeInfo(), otelprom.WithoutTargetInfo())
	if err != nil {
		return nil, err
	}
	if err := reg.Register(collectors.NewGoCollector()); err != nil {
		return nil, err
	}
	if err := reg.Register(collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})); err != nil {
		return nil, err
	}
	return sdkmetric.NewMeterProvider(append([]sdkmetric.Option{sdkmetric.WithReader(exp), sdkmetric.WithExemplarFilter(exemplar.AlwaysOffFilter)}, opts...)...), nil
}

// NewMetricsServer serves reg's metrics in Prometheus text on
// port/metrics.
func NewMetricsServer(port int, reg *prometheus.Registry) *http.Server {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	return &http.Server{
		Addr:              ":" + strconv.Itoa(port),
		Handler:           mux,
		ReadHeaderTimeout: 10 * time.Second,
	}
}
