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

package mtping

import (
	"os"
	"reflect"
	"testing"
	"time"

	kle "knative.dev/pkg/leaderelection"
	"knative.dev/pkg/logging"
	"knative.dev/pkg/observability/metrics"
	"knative.dev/pkg/observability/tracing"
)

func TestEnvFromLookup(t *testing.T) {
	host, _ := os.Hostname()
	tests := []struct {
		name    string
		env     map[string]string
		want    Env
		wantErr bool
	}{
		{name: "defaults", want: Env{SystemNamespace: "knative-eventing", PodName: host, ProbesPort: 8080, MetricsPort: 9090, DrainTimeout: 20 * time.Second}},
		{name: "upstream's deployment", env: map[string]string{"SYSTEM_NAMESPACE": "eventing", "POD_NAME": "adapter-1", "K_SINK_TIMEOUT": "-1", "K_NO_SHUTDOWN_AFTER": ""},
			want: Env{SystemNamespace: "eventing", PodName: "adapter-1", ProbesPort: 8080, MetricsPort: 9090, DrainTimeout: 20 * time.Second}},
		{name: "everything set", env: map[string]string{"POD_NAME": "p", "SERVICE_ACCOUNT_NAME": "sa", "PROBES_PORT": "1", "METRICS_PORT": "2",
			"LOG_LEVEL": "debug", "K_SINK_TIMEOUT": "30", "DRAIN_TIMEOUT": "5s"},
			want: Env{SystemNamespace: "knative-eventing", PodName: "p", ServiceAccount: "sa", ProbesPort: 1, MetricsPort: 2, LogLevel: "debug",
				SinkTimeout: 30 * time.Second, DrainTimeout: 5 * time.Second}},
		{name: "bad port", env: map[string]string{"PROBES_PORT": "http"}, wantErr: true},
		{name: "port out of range", env: map[string]string{"METRICS_PORT": "70000"}, wantErr: true},
		{name: "bad level", env: map[string]string{"LOG_LEVEL": "loud"}, wantErr: true},
		{name: "upstream's logging config", env: map[string]string{"K_LOGGING_CONFIG": `{"zap-logger-config":"{\"level\":\"debug\"}"}`},
			want: Env{SystemNamespace: "knative-eventing", PodName: host, ProbesPort: 8080, MetricsPort: 9090, DrainTimeout: 20 * time.Second,
				ZapConfig: `{"level":"debug"}`}},
		{name: "logging config without a zap config: knative's default", env: map[string]string{"K_LOGGING_CONFIG": `{"loglevel.pingsource":"debug"}`},
			want: Env{SystemNamespace: "knative-eventing", PodName: host, ProbesPort: 8080, MetricsPort: 9090, DrainTimeout: 20 * time.Second,
				ZapConfig: defaultZapConfig(t)}},
		{name: "logging config not JSON", env: map[string]string{"K_LOGGING_CONFIG": "level=debug"}, wantErr: true},
		{name: "upstream's observability config", env: map[string]string{"K_OBSERVABILITY_CONFIG": `{"tracing":{"protocol":"grpc","endpoint":"otel.ns.svc:4317","samplingRate":0.1},"metrics":{"protocol":"prometheus"}}`},
			want: Env{SystemNamespace: "knative-eventing", PodName: host, ProbesPort: 8080, MetricsPort: 9090, DrainTimeout: 20 * time.Second,
				Tracing: tracing.Config{Protocol: "grpc", Endpoint: "otel.ns.svc:4317", SamplingRate: 0.1}, Metrics: metrics.Config{Protocol: "prometheus"}}},
		{name: "observability config without tracing", env: map[string]string{"K_OBSERVABILITY_CONFIG": `{"metrics":{"protocol":"none"}}`},
			want: Env{SystemNamespace: "knative-eventing", PodName: host, ProbesPort: 8080, MetricsPort: 9090, DrainTimeout: 20 * time.Second,
				Metrics: metrics.Config{Protocol: "none"}}},
		{name: "metrics pushed over OTLP", env: map[string]string{"K_OBSERVABILITY_CONFIG": `{"metrics":{"protocol":"http/protobuf","endpoint":"http://otel.ns.svc:4318/v1/metrics","exportInterval":5000000000}}`},
			want: Env{SystemNamespace: "knative-eventing", PodName: host, ProbesPort: 8080, MetricsPort: 9090, DrainTimeout: 20 * time.Second,
				Metrics: metrics.Config{Protocol: "http/protobuf", Endpoint: "http://otel.ns.svc:4318/v1/metrics", ExportInterval: 5 * time.Second}}},
		{name: "metrics without an endpoint", env: map[string]string{"K_OBSERVABILITY_CONFIG": `{"metrics":{"protocol":"grpc"}}`}, wantErr: true},
		{name: "metrics of an unknown protocol", env: map[string]string{"K_OBSERVABILITY_CONFIG": `{"metrics":{"protocol":"statsd","endpoint":"x"}}`}, wantErr: true},
		{name: "metrics with a negative interval", env: map[string]string{"K_OBSERVABILITY_CONFIG": `{"metrics":{"protocol":"prometheus","exportInterval":-1}}`}, wantErr: true},
		{name: "tracing without an endpoint", env: map[string]string{"K_OBSERVABILITY_CONFIG": `{"tracing":{"protocol":"http/protobuf"}}`}, wantErr: true},
		{name: "tracing of an unknown protocol", env: map[string]string{"K_OBSERVABILITY_CONFIG": `{"tracing":{"protocol":"zipkin","endpoint":"x"}}`}, wantErr: true},
		{name: "observability config not JSON", env: map[string]string{"K_OBSERVABILITY_CONFIG": "tracing=on"}, wantErr: true},
		{name: "bad sink timeout", env: map[string]string{"K_SINK_TIMEOUT": "0"}, wantErr: true},
		{name: "bad drain timeout", env: map[string]string{"DRAIN_TIMEOUT": "20"}, wantErr: true},
		{name: "h2c sinks", env: map[string]string{"SINK_H2C_HOSTS": " *.Svc.cluster.local, sink.ns.svc. ,"},
			want: Env{SystemNamespace: "knative-eventing", PodName: host, ProbesPort: 8080, MetricsPort: 9090, DrainTimeout: 20 * time.Second,
				SinkH2CHosts: []string{"*.svc.cluster.local", "sink.ns.svc"}}},
		{name: "bad h2c sinks", env: map[string]string{"SINK_H2C_HOSTS": "sink:8080"}, wantErr: true},
		{name: "h2c sinks with a pattern that is no suffix", env: map[string]string{"SINK_H2C_HOSTS": "*svc"}, wantErr: true},
		{name: "upstream's leader election", env: map[string]string{"K_LEADER_ELECTION_CONFIG": `{"Component":"pingsource-mt-adapter","Buckets":3,` +
			`"LeaseDuration":60000000000,"RenewDeadline":40000000000,"RetryPeriod":10000000000,"Identity":"","LeaseNamesPrefixMapping":{"a":"b"}}`},
			want: Env{SystemNamespace: "knative-eventing", PodName: host, ProbesPort: 8080, MetricsPort: 9090, DrainTimeout: 20 * time.Second,
				Upstream: kle.ComponentConfig{Component: Component, Buckets: 3, LeaseDuration: time.Minute, RenewDeadline: 40 * time.Second,
					RetryPeriod: 10 * time.Second, LeaseNamesPrefixMapping: map[string]string{"a": "b"}}}},
		{name: "upstream's leader election not JSON", env: map[string]string{"K_LEADER_ELECTION_CONFIG": "buckets=3"}, wantErr: true},
		{name: "upstream's leader election past knative's buckets", env: map[string]string{"K_LEADER_ELECTION_CONFIG": `{"Buckets":11}`}, wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := EnvFromLookup(func(k string) (string, bool) { v, ok := tc.env[k]; return v, ok })
			if tc.wantErr != (err != nil) {
				t.Fatalf("err = %v, want error %v", err, tc.wantErr)
			}
			if tc.want.Upstream.Buckets == 0 {
				// What upstream's adapter takes without the variable.
				tc.want.Upstream = kle.ComponentConfig{Component: Component, Buckets: 1, LeaseDuration: 15 * time.Second,
					RenewDeadline: 10 * time.Second, RetryPeriod: 2 * time.Second}
			}
			if !tc.wantErr && !reflect.DeepEqual(got, tc.want) {
				t.Errorf("env = %+v\nwant  %+v", got, tc.want)
			}
		})
	}
}

// defaultZapConfig is knative.dev/pkg's zap configuration when
// config-logging has none.
func defaultZapConfig(t *testing.T) string {
	cfg, err := logging.NewConfigFromMap(nil)
	if err != nil {
		t.Fatal(err)
	}
	return cfg.LoggingConfig
}
