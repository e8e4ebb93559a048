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

package config

import (
	"net/netip"
	"regexp"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// env is a lookup backed by a map, as os.LookupEnv is backed by the process.
func env(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) {
		v, ok := m[k]
		return v, ok
	}
}

var comparePrefixes = cmp.Options{
	cmp.Comparer(func(a, b netip.Prefix) bool { return a == b }),
	cmp.Comparer(func(a, b netip.Addr) bool { return a == b }),
}

// defaults is the configuration with nothing set and no memory limit, as
// the field comments document it.
func defaults() Proxy {
	return Proxy{
		Port:                      8080,
		MetricsPort:               9090,
		AllowedHosts:              []string{"*.svc.cluster.local", "*.svc"},
		AllowedCIDRs:              nil,
		DeniedCIDRs:               nil,
		MaxInflight:               10000,
		MaxInflightPerDestination: 5000, // half
		MaxInflightPerTenant:      7500, // three quarters
		TenantReserve:             1000, // a tenth
		MemoryBudgetBytes:         256 << 20,
		MaxEventBytes:             4 << 20,
		MaxTimeout:                10 * time.Minute,
		MaxHeaderBytes:            64 << 10,
		ReadHeaderTimeout:         10 * time.Second,
		IdleTimeout:               5 * time.Minute,
		DestinationProtocol:       ProtocolAuto,
		DialTimeout:               5 * time.Second,
		IdleConnTimeout:           5 * time.Minute,
		MaxIdleConnsPerHost:       1024,
		BreakerFailures:           5,
		BreakerWindow:             10 * time.Second,
		BreakerCooldown:           5 * time.Second,
		H2MaxConcurrentStreams:    10000,
		H2ConnWindowBytes:         4 << 20,
		H2StreamWindowBytes:       256 << 10,
		AsyncRetries:              5,
		AsyncMaxRetries:           20,
		AsyncBackoffDelay:         500 * time.Millisecond,
		AsyncBackoffMax:           time.Minute,
		AsyncMaxRetryAfter:        5 * time.Minute,
		DrainQuietPeriod:          0,
		DrainTimeout:              10*time.Minute + 15*time.Second, // MaxTimeout + 15 s
		MetricsMaxLabelValues:     1000,
		BodyIdleTimeout:           30 * time.Second,
		BodyMinRate:               1024,
		Auth:                      "none",
		OIDCIssuer:                "https://kubernetes.default.svc.cluster.local",
		OIDCAudience:              "event-forwarding-proxy",
		TrustedNamespaces:         []string{"knative-eventing"},
		TraceExporter:             "none",
		TraceSamplingRatio:        1,
		LogLevel:                  "info",
		LogCallsPerSecond:         100,
		MaxConnections:            DefaultMaxConnections(OpenFileLimit()),
		KPACallsPerReport:         10,
		KPAReportMaxAge:           5 * time.Minute,
		SpreadTimeout:             2 * time.Second,
	}
}

func TestProxyFromEnv(t *testing.T) {
	tests := []struct {
		name     string
		env      map[string]string
		memLimit int64
		want     func(*Proxy) // applied to defaults()
	}{
		{name: "defaults", want: func(*Proxy) {}},
		{name: "empty values are unset", env: map[string]string{"PORT": "", "FORWARD_MAX_TIMEOUT": "  ", "FORWARD_ALLOWED_HOSTS": ""}, want: func(*Proxy) {}},
		{name: "sized from 1 GiB", memLimit: 1 << 30, want: func(p *Proxy) {
			p.MaxInflight, p.MaxInflightPerDestination, p.MaxInflightPerTenant, p.TenantReserve = 16384, 8192, 12288, 1638
			p.MemoryBudgetBytes = 322122540
		}},
		{name: "FORWARD_MAX_INFLIGHT wins over the memory limit", memLimit: 1 << 30, env: map[string]string{"FORWARD_MAX_INFLIGHT": "400"}, want: func(p *Proxy) {
			p.MaxInflight, p.MaxInflightPerDestination, p.MaxInflightPerTenant, p.TenantReserve = 400, 200, 300, 40
			p.MemoryBudgetBytes = 322122540
		}},
		{name: "FORWARD_MEMORY_BUDGET_BYTES wins over the memory limit", memLimit: 1 << 30, env: map[string]string{"FORWARD_MEMORY_BUDGET_BYTES": "67108864"}, want: func(p *Proxy) {
			p.MaxInflight, p.MaxInflightPerDestination, p.MaxInflightPerTenant, p.TenantReserve = 16384, 8192, 12288, 1638
			p.MemoryBudgetBytes = 64 << 20
		}},
		{name: "FORWARD_MEMORY_BUDGET_BYTES exactly the largest call", env: map[string]string{"FORWARD_MEMORY_BUDGET_BYTES": "4259840"}, want: func(p *Proxy) {
			p.MemoryBudgetBytes = 4<<20 + 64<<10
		}},
		{name: "a small memory limit's budget still takes the largest call", memLimit: 8 << 20, want: func(p *Proxy) {
			p.MaxInflight, p.MaxInflightPerDestination, p.MaxInflightPerTenant, p.TenantReserve = 128, 64, 96, 12
			p.MemoryBudgetBytes = 4<<20 + 64<<10 // 30 % of 8 MiB is less
		}},
		{name: "FORWARD_MAX_INFLIGHT of one", env: map[string]string{"FORWARD_MAX_INFLIGHT": "1"}, want: func(p *Proxy) {
			p.MaxInflight, p.MaxInflightPerDestination, p.MaxInflightPerTenant, p.TenantReserve = 1, 1, 1, 0
		}},
		{name: "KUBERNETES_SERVICE_HOST", env: map[string]string{"KUBERNETES_SERVICE_HOST": "10.96.0.1"}, want: func(p *Proxy) {
			p.KubernetesAPI = netip.MustParseAddr("10.96.0.1")
		}},
		{name: "KUBERNETES_SERVICE_HOST v6", env: map[string]string{"KUBERNETES_SERVICE_HOST": " fd00:10:96::1 "}, want: func(p *Proxy) {
			p.KubernetesAPI = netip.MustParseAddr("fd00:10:96::1")
		}},
		{name: "KUBERNETES_SERVICE_HOST mapped is the IPv4 address", env: map[string]string{"KUBERNETES_SERVICE_HOST": "::ffff:10.96.0.1"}, want: func(p *Proxy) {
			p.KubernetesAPI = netip.MustParseAddr("10.96.0.1")
		}},
		{name: "KUBERNETES_SERVICE_HOST a name is no address", env: map[string]string{"KUBERNETES_SERVICE_HOST": "kubernetes.default.svc"}, want: func(*Proxy) {}},
		{name: "PORT", env: map[string]string{"PORT": "8081"}, want: func(p *Proxy) { p.Port = 8081 }},
		{name: "PORT with spaces", env: map[string]string{"PORT": " 8081 "}, want: func(p *Proxy) { p.Port = 8081 }},
		{name: "PORT lowest", env: map[string]string{"PORT": "1"}, want: func(p *Proxy) { p.Port = 1 }},
		{name: "PORT highest", env: map[string]string{"PORT": "65535"}, want: func(p *Proxy) { p.Port = 65535 }},
		{name: "METRICS_PORT", env: map[string]string{"METRICS_PORT": "9091"}, want: func(p *Proxy) { p.MetricsPort = 9091 }},
		{name: "FORWARD_ASYNC_MAX_RETRY below the default retry lowers it", env: map[string]string{"FORWARD_ASYNC_MAX_RETRY": "3"},
			want: func(p *Proxy) { p.AsyncMaxRetries, p.AsyncRetries = 3, 3 }},
		{name: "FORWARD_H2_CONN_WINDOW_BYTES highest", env: map[string]string{"FORWARD_H2_CONN_WINDOW_BYTES": "2147483647"},
			want: func(p *Proxy) { p.H2ConnWindowBytes = 1<<31 - 1 }},
		{name: "FORWARD_ALLOWED_HOSTS normalised", env: map[string]string{"FORWARD_ALLOWED_HOSTS": "Sink.NS.svc., *.Example.com ,,*"}, want: func(p *Proxy) {
			p.AllowedHosts = []string{"sink.ns.svc", "*.example.com", "*"}
		}},
		{name: "FORWARD_ALLOWED_HOSTS only commas", env: map[string]string{"FORWARD_ALLOWED_HOSTS": " , ,"}, want: func(*Proxy) {}},
		{name: "FORWARD_H2C_HOSTS normalised as FORWARD_ALLOWED_HOSTS", env: map[string]string{"FORWARD_H2C_HOSTS": "Sink.NS.svc., *.H2C.example ,,*"}, want: func(p *Proxy) {
			p.H2CHosts = []string{"sink.ns.svc", "*.h2c.example", "*"}
		}},
		{name: "FORWARD_H2C_HOSTS only commas", env: map[string]string{"FORWARD_H2C_HOSTS": " , ,"}, want: func(*Proxy) {}},
		{name: "FORWARD_ALLOWED_CIDRS", env: map[string]string{"FORWARD_ALLOWED_CIDRS": "127.0.0.0/8, ::1/128"}, want: func(p *Proxy) {
			p.AllowedCIDRs = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")}
		}},
		{name: "FORWARD_ALLOWED_CIDRS masked", env: map[string]string{"FORWARD_ALLOWED_CIDRS": "10.1.2.3/8"}, want: func(p *Proxy) {
			p.AllowedCIDRs = []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}
		}},
		{name: "FORWARD_DENIED_CIDRS", env: map[string]string{"FORWARD_DENIED_CIDRS": "192.168.0.0/16,fd00::/8"}, want: func(p *Proxy) {
			p.DeniedCIDRs = []netip.Prefix{netip.MustParsePrefix("192.168.0.0/16"), netip.MustParsePrefix("fd00::/8")}
		}},
		{name: "FORWARD_MAX_INFLIGHT_PER_DESTINATION", env: map[string]string{"FORWARD_MAX_INFLIGHT_PER_DESTINATION": "10"}, want: func(p *Proxy) { p.MaxInflightPerDestination = 10 }},
		{name: "FORWARD_MAX_INFLIGHT_PER_DESTINATION equal to FORWARD_MAX_INFLIGHT", env: map[string]string{"FORWARD_MAX_INFLIGHT": "100", "FORWARD_MAX_INFLIGHT_PER_DESTINATION": "100"}, want: func(p *Proxy) {
			p.MaxInflight, p.MaxInflightPerDestination, p.MaxInflightPerTenant, p.TenantReserve = 100, 100, 75, 10
		}},
		{name: "FORWARD_MAX_INFLIGHT_PER_TENANT", env: map[string]string{"FORWARD_MAX_INFLIGHT_PER_TENANT": "20"}, want: func(p *Proxy) { p.MaxInflightPerTenant = 20 }},
		{name: "FORWARD_MAX_INFLIGHT_PER_TENANT equal to FORWARD_MAX_INFLIGHT", env: map[string]string{"FORWARD_MAX_INFLIGHT": "100", "FORWARD_MAX_INFLIGHT_PER_TENANT": "100"}, want: func(p *Proxy) {
			p.MaxInflight, p.MaxInflightPerDestination, p.MaxInflightPerTenant, p.TenantReserve = 100, 50, 100, 10
		}},
		{name: "FORWARD_TENANT_RESERVE zero", env: map[string]string{"FORWARD_TENANT_RESERVE": "0"}, want: func(p *Proxy) { p.TenantReserve = 0 }},
		{name: "FORWARD_TENANT_RESERVE one below FORWARD_MAX_INFLIGHT", env: map[string]string{"FORWARD_MAX_INFLIGHT": "100", "FORWARD_TENANT_RESERVE": "99"}, want: func(p *Proxy) {
			p.MaxInflight, p.MaxInflightPerDestination, p.MaxInflightPerTenant, p.TenantReserve = 100, 50, 75, 99
		}},
		{name: "FORWARD_MAX_EVENT_BYTES", env: map[string]string{"FORWARD_MAX_EVENT_BYTES": "1048576"}, want: func(p *Proxy) { p.MaxEventBytes = 1 << 20 }},
		{name: "FORWARD_MAX_TIMEOUT moves the drain timeout", env: map[string]string{"FORWARD_MAX_TIMEOUT": "30m"}, want: func(p *Proxy) {
			p.MaxTimeout, p.DrainTimeout = 30*time.Minute, 30*time.Minute+15*time.Second
		}},
		{name: "FORWARD_MAX_HEADER_BYTES", env: map[string]string{"FORWARD_MAX_HEADER_BYTES": "8192"}, want: func(p *Proxy) { p.MaxHeaderBytes = 8192 }},
		{name: "FORWARD_READ_HEADER_TIMEOUT", env: map[string]string{"FORWARD_READ_HEADER_TIMEOUT": "2s"}, want: func(p *Proxy) { p.ReadHeaderTimeout = 2 * time.Second }},
		{name: "FORWARD_IDLE_TIMEOUT", env: map[string]string{"FORWARD_IDLE_TIMEOUT": "90s"}, want: func(p *Proxy) { p.IdleTimeout = 90 * time.Second }},
		{name: "FORWARD_DESTINATION_PROTOCOL h2c any case", env: map[string]string{"FORWARD_DESTINATION_PROTOCOL": "H2C"}, want: func(p *Proxy) { p.DestinationProtocol = ProtocolH2C }},
		{name: "FORWARD_DESTINATION_PROTOCOL http1", env: map[string]string{"FORWARD_DESTINATION_PROTOCOL": "http1"}, want: func(p *Proxy) { p.DestinationProtocol = ProtocolHTTP1 }},
		{name: "FORWARD_DIAL_TIMEOUT at its minimum", env: map[string]string{"FORWARD_DIAL_TIMEOUT": "1ms"}, want: func(p *Proxy) { p.DialTimeout = time.Millisecond }},
		{name: "FORWARD_IDLE_CONN_TIMEOUT", env: map[string]string{"FORWARD_IDLE_CONN_TIMEOUT": "10m"}, want: func(p *Proxy) { p.IdleConnTimeout = 10 * time.Minute }},
		{name: "FORWARD_MAX_IDLE_CONNS_PER_HOST", env: map[string]string{"FORWARD_MAX_IDLE_CONNS_PER_HOST": "16"}, want: func(p *Proxy) { p.MaxIdleConnsPerHost = 16 }},
		{name: "FORWARD_H2_MAX_CONCURRENT_STREAMS", env: map[string]string{"FORWARD_H2_MAX_CONCURRENT_STREAMS": "500"}, want: func(p *Proxy) { p.H2MaxConcurrentStreams = 500 }},
		{name: "FORWARD_H2_CONN_WINDOW_BYTES", env: map[string]string{"FORWARD_H2_CONN_WINDOW_BYTES": "1048576"}, want: func(p *Proxy) { p.H2ConnWindowBytes = 1 << 20 }},
		{name: "FORWARD_H2_STREAM_WINDOW_BYTES", env: map[string]string{"FORWARD_H2_STREAM_WINDOW_BYTES": "65536"}, want: func(p *Proxy) { p.H2StreamWindowBytes = 65536 }},
		{name: "FORWARD_ASYNC_RETRY zero", env: map[string]string{"FORWARD_ASYNC_RETRY": "0"}, want: func(p *Proxy) { p.AsyncRetries = 0 }},
		{name: "FORWARD_ASYNC_RETRY equal to the max", env: map[string]string{"FORWARD_ASYNC_RETRY": "20"}, want: func(p *Proxy) { p.AsyncRetries = 20 }},
		{name: "FORWARD_ASYNC_MAX_RETRY", env: map[string]string{"FORWARD_ASYNC_MAX_RETRY": "50"}, want: func(p *Proxy) { p.AsyncMaxRetries = 50 }},
		{name: "no retries at all", env: map[string]string{"FORWARD_ASYNC_RETRY": "0", "FORWARD_ASYNC_MAX_RETRY": "0"}, want: func(p *Proxy) { p.AsyncRetries, p.AsyncMaxRetries = 0, 0 }},
		{name: "FORWARD_ASYNC_BACKOFF_DELAY", env: map[string]string{"FORWARD_ASYNC_BACKOFF_DELAY": "1.5s"}, want: func(p *Proxy) { p.AsyncBackoffDelay = 1500 * time.Millisecond }},
		{name: "FORWARD_ASYNC_BACKOFF_DELAY equal to the max", env: map[string]string{"FORWARD_ASYNC_BACKOFF_DELAY": "1m"}, want: func(p *Proxy) { p.AsyncBackoffDelay = time.Minute }},
		{name: "FORWARD_ASYNC_BACKOFF_MAX", env: map[string]string{"FORWARD_ASYNC_BACKOFF_MAX": "2m"}, want: func(p *Proxy) { p.AsyncBackoffMax = 2 * time.Minute }},
		{name: "FORWARD_ASYNC_MAX_RETRY_AFTER", env: map[string]string{"FORWARD_ASYNC_MAX_RETRY_AFTER": "1h"}, want: func(p *Proxy) { p.AsyncMaxRetryAfter = time.Hour }},
		{name: "FORWARD_DRAIN_QUIET_PERIOD", env: map[string]string{"FORWARD_DRAIN_QUIET_PERIOD": "20s"}, want: func(p *Proxy) { p.DrainQuietPeriod = 20 * time.Second }},
		{name: "FORWARD_DRAIN_QUIET_PERIOD zero", env: map[string]string{"FORWARD_DRAIN_QUIET_PERIOD": "0s"}, want: func(*Proxy) {}},
		{name: "FORWARD_DRAIN_TIMEOUT", env: map[string]string{"FORWARD_DRAIN_TIMEOUT": "1m"}, want: func(p *Proxy) { p.DrainTimeout = time.Minute }},
		{name: "FORWARD_LOG_LEVEL any case", env: map[string]string{"FORWARD_LOG_LEVEL": "DEBUG"}, want: func(p *Proxy) { p.LogLevel = "debug" }},
		{name: "FORWARD_LOG_LEVEL warn", env: map[string]string{"FORWARD_LOG_LEVEL": "warn"}, want: func(p *Proxy) { p.LogLevel = "warn" }},
		{name: "FORWARD_BODY_IDLE_TIMEOUT", env: map[string]string{"FORWARD_BODY_IDLE_TIMEOUT": "2s"}, want: func(p *Proxy) { p.BodyIdleTimeout = 2 * time.Second }},
		{name: "FORWARD_BODY_MIN_RATE", env: map[string]string{"FORWARD_BODY_MIN_RATE": "4096"}, want: func(p *Proxy) { p.BodyMinRate = 4096 }},
		{name: "FORWARD_BODY_MIN_RATE off", env: map[string]string{"FORWARD_BODY_MIN_RATE": "0"}, want: func(p *Proxy) { p.BodyMinRate = 0 }},
		{name: "FORWARD_AUTH", env: map[string]string{"FORWARD_AUTH": "oidc"}, want: func(p *Proxy) { p.Auth = "oidc" }},
		{name: "FORWARD_OIDC_ISSUER", env: map[string]string{"FORWARD_OIDC_ISSUER": "https://127.0.0.1:6443"}, want: func(p *Proxy) { p.OIDCIssuer = "https://127.0.0.1:6443" }},
		{name: "FORWARD_OIDC_AUDIENCE", env: map[string]string{"FORWARD_OIDC_AUDIENCE": "proxy"}, want: func(p *Proxy) { p.OIDCAudience = "proxy" }},
		{name: "FORWARD_AUTH_TRUSTED_NAMESPACES", env: map[string]string{"FORWARD_AUTH_TRUSTED_NAMESPACES": "knative-eventing, adapters"},
			want: func(p *Proxy) { p.TrustedNamespaces = []string{"knative-eventing", "adapters"} }},
		{name: "FORWARD_AUTH_TRUSTED_NAMESPACES none", env: map[string]string{"FORWARD_AUTH_TRUSTED_NAMESPACES": ","},
			want: func(p *Proxy) { p.TrustedNamespaces = []string{} }},
		{name: "FORWARD_TRUST_BUNDLES_NAMESPACE", env: map[string]string{"FORWARD_TRUST_BUNDLES_NAMESPACE": "knative-eventing"},
			want: func(p *Proxy) { p.TrustBundlesNamespace = "knative-eventing" }},
		{name: "FORWARD_TRUST_BUNDLES_NAMESPACE empty", env: map[string]string{"FORWARD_TRUST_BUNDLES_NAMESPACE": ""}, want: func(*Proxy) {}},
		{name: "FORWARD_TRACE_EXPORTER", env: map[string]string{"FORWARD_TRACE_EXPORTER": "OTLP"}, want: func(p *Proxy) { p.TraceExporter = "otlp" }},
		{name: "FORWARD_TRACE_SAMPLING_RATIO lowest", env: map[string]string{"FORWARD_TRACE_SAMPLING_RATIO": "0"}, want: func(p *Proxy) { p.TraceSamplingRatio = 0 }},
		{name: "FORWARD_TRACE_SAMPLING_RATIO", env: map[string]string{"FORWARD_TRACE_SAMPLING_RATIO": "0.25"}, want: func(p *Proxy) { p.TraceSamplingRatio = 0.25 }},
		{name: "FORWARD_METRICS_MAX_LABEL_VALUES", env: map[string]string{"FORWARD_METRICS_MAX_LABEL_VALUES": "5"}, want: func(p *Proxy) { p.MetricsMaxLabelValues = 5 }},
		{name: "FORWARD_LOG_LEVEL error", env: map[string]string{"FORWARD_LOG_LEVEL": "error"}, want: func(p *Proxy) { p.LogLevel = "error" }},
		{name: "FORWARD_MAX_CONNECTIONS one", env: map[string]string{"FORWARD_MAX_CONNECTIONS": "1"}, want: func(p *Proxy) { p.MaxConnections = 1 }},
		{name: "FORWARD_LOG_CALLS_PER_SECOND zero logs every line", env: map[string]string{"FORWARD_LOG_CALLS_PER_SECOND": "0"}, want: func(p *Proxy) { p.LogCallsPerSecond = 0 }},
		{name: "FORWARD_LOG_CALLS_PER_SECOND one", env: map[string]string{"FORWARD_LOG_CALLS_PER_SECOND": "1"}, want: func(p *Proxy) { p.LogCallsPerSecond = 1 }},
		{name: "FORWARD_BREAKER_FAILURES zero turns the breaker off", env: map[string]string{"FORWARD_BREAKER_FAILURES": "0"}, want: func(p *Proxy) { p.BreakerFailures = 0 }},
		{name: "FORWARD_BREAKER_FAILURES one", env: map[string]string{"FORWARD_BREAKER_FAILURES": "1"}, want: func(p *Proxy) { p.BreakerFailures = 1 }},
		{name: "FORWARD_BREAKER_WINDOW at its minimum", env: map[string]string{"FORWARD_BREAKER_WINDOW": "1ms"}, want: func(p *Proxy) { p.BreakerWindow = time.Millisecond }},
		{name: "FORWARD_BREAKER_COOLDOWN at its minimum", env: map[string]string{"FORWARD_BREAKER_COOLDOWN": "1ms"}, want: func(p *Proxy) { p.BreakerCooldown = time.Millisecond }},
		{name: "FORWARD_KPA_REPORT_URL", env: map[string]string{"FORWARD_KPA_REPORT_URL": "http://127.0.0.1:8012"},
			want: func(p *Proxy) { p.KPAReportURL = "http://127.0.0.1:8012" }},
		{name: "FORWARD_KPA_REPORT_URL IPv6", env: map[string]string{"FORWARD_KPA_REPORT_URL": "http://[::1]:8012/report"},
			want: func(p *Proxy) { p.KPAReportURL = "http://[::1]:8012/report" }},
		{name: "FORWARD_KPA_REPORT_URL empty", env: map[string]string{"FORWARD_KPA_REPORT_URL": ""}, want: func(*Proxy) {}},
		{name: "FORWARD_KPA_CALLS_PER_REPORT one", env: map[string]string{"FORWARD_KPA_CALLS_PER_REPORT": "1"}, want: func(p *Proxy) { p.KPACallsPerReport = 1 }},
		{name: "FORWARD_KPA_REPORT_MAX_AGE at FORWARD_MAX_TIMEOUT", env: map[string]string{"FORWARD_KPA_REPORT_MAX_AGE": "10m"},
			want: func(p *Proxy) { p.KPAReportMaxAge = 10 * time.Minute }},
		{name: "FORWARD_KPA_REPORT_MAX_AGE follows a lower FORWARD_MAX_TIMEOUT", env: map[string]string{"FORWARD_MAX_TIMEOUT": "2m"},
			want: func(p *Proxy) {
				p.MaxTimeout, p.KPAReportMaxAge, p.DrainTimeout = 2*time.Minute, 2*time.Minute, 2*time.Minute+15*time.Second
			}},
		{name: "FORWARD_SPREAD_ABOVE in Knative", env: map[string]string{"FORWARD_SPREAD_ABOVE": "40", "K_REVISION": "event-forwarding-proxy-00002"},
			want: func(p *Proxy) { p.SpreadAbove, p.SpreadURL = 40, "http://event-forwarding-proxy-00002-private" }},
		{name: "FORWARD_SPREAD_URL", env: map[string]string{"FORWARD_SPREAD_ABOVE": "1", "FORWARD_SPREAD_URL": "http://10.0.0.7:8012", "K_REVISION": "r-00001"},
			want: func(p *Proxy) { p.SpreadAbove, p.SpreadURL = 1, "http://10.0.0.7:8012" }},
		{name: "FORWARD_SPREAD_TIMEOUT", env: map[string]string{"FORWARD_SPREAD_TIMEOUT": "150ms"}, want: func(p *Proxy) { p.SpreadTimeout = 150 * time.Millisecond }},
		{name: "FORWARD_BREAKER_COOLDOWN long", env: map[string]string{"FORWARD_BREAKER_COOLDOWN": "10m"}, want: func(p *Proxy) { p.BreakerCooldown = 10 * time.Minute }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ProxyFromEnv(env(tt.env), tt.memLimit)
			if err != nil {
				t.Fatalf("ProxyFromEnv(%v) error: %v", tt.env, err)
			}
			want := defaults()
			tt.want(&want)
			if diff := cmp.Diff(&want, got, comparePrefixes); diff != "" {
				t.Errorf("ProxyFromEnv(%v) (-want +got):\n%s", tt.env, diff)
			}
		})
	}
}

func TestProxyFromEnvInvalidValue(t *testing.T) {
	var (
		ports     = []string{"abc", "0", "-1", "65536", "80.5"}
		positive  = []string{"abc", "0", "-1", "1.5", "1e3"}
		nonNeg    = []string{"abc", "-1", "1.5"}
		durations = []string{"10", "-1s", "0s", "0", "500us", "abc", "PT10M"}
		nonNegDur = []string{"10", "-1s", "abc"}
		hosts     = []string{"a*b.svc", "**.svc", "*.svc*", "*svc", "host:8080", "http://x.svc", "user@x.svc", "a b", "."}
		windows   = []string{"abc", "0", "65535", "2147483648", "-1"}
		cidrs     = []string{"abc", "10.0.0.0/33", "10.0.0.1", "fd00::/129", "10.0.0.0/8,bad"}
	)
	vars := []struct {
		name string
		bad  []string
	}{
		{"PORT", ports},
		{"METRICS_PORT", ports},
		{"FORWARD_ALLOWED_HOSTS", hosts},
		{"FORWARD_H2C_HOSTS", hosts},
		{"FORWARD_ALLOWED_CIDRS", cidrs},
		{"FORWARD_DENIED_CIDRS", cidrs},
		{"FORWARD_MAX_INFLIGHT", positive},
		{"FORWARD_MAX_INFLIGHT_PER_DESTINATION", positive},
		{"FORWARD_MAX_INFLIGHT_PER_TENANT", positive},
		{"FORWARD_TENANT_RESERVE", nonNeg},
		{"FORWARD_MAX_EVENT_BYTES", positive},
		{"FORWARD_MEMORY_BUDGET_BYTES", append([]string{"64Mi", "9223372036854775808"}, positive...)},
		{"FORWARD_MAX_TIMEOUT", durations},
		{"FORWARD_MAX_HEADER_BYTES", positive},
		{"FORWARD_READ_HEADER_TIMEOUT", durations},
		{"FORWARD_IDLE_TIMEOUT", durations},
		{"FORWARD_BODY_IDLE_TIMEOUT", durations},
		{"FORWARD_BODY_MIN_RATE", nonNeg},
		{"FORWARD_DESTINATION_PROTOCOL", []string{"h3", "http2", "abc"}},
		{"FORWARD_DIAL_TIMEOUT", durations},
		{"FORWARD_IDLE_CONN_TIMEOUT", durations},
		{"FORWARD_MAX_IDLE_CONNS_PER_HOST", positive},
		{"FORWARD_H2_MAX_CONCURRENT_STREAMS", positive},
		{"FORWARD_H2_CONN_WINDOW_BYTES", windows},
		{"FORWARD_H2_STREAM_WINDOW_BYTES", windows},
		{"FORWARD_ASYNC_RETRY", nonNeg},
		{"FORWARD_ASYNC_MAX_RETRY", nonNeg},
		{"FORWARD_ASYNC_BACKOFF_DELAY", durations},
		{"FORWARD_ASYNC_BACKOFF_MAX", durations},
		{"FORWARD_ASYNC_MAX_RETRY_AFTER", durations},
		{"FORWARD_DRAIN_QUIET_PERIOD", nonNegDur},
		{"FORWARD_DRAIN_TIMEOUT", durations},
		{"FORWARD_LOG_LEVEL", []string{"trace", "verbose", "abc"}},
		{"FORWARD_METRICS_MAX_LABEL_VALUES", positive},
		{"FORWARD_AUTH", []string{"jwt", "token", "on"}},
		{"FORWARD_OIDC_ISSUER", []string{"http://kubernetes.default.svc", "kubernetes.default.svc", "https://"}},
		{"FORWARD_AUTH_TRUSTED_NAMESPACES", []string{"Knative", "a_b", "-x"}},
		{"FORWARD_TRUST_BUNDLES_NAMESPACE", []string{"Knative", "a,b", "-x", "n123456789n123456789n123456789n123456789n123456789n123456789n123"}},
		{"FORWARD_TRACE_EXPORTER", []string{"jaeger", "zipkin", "otlp-grpc"}},
		{"FORWARD_TRACE_SAMPLING_RATIO", []string{"abc", "-0.1", "1.01", "NaN"}},
		{"FORWARD_BREAKER_FAILURES", nonNeg},
		{"FORWARD_LOG_CALLS_PER_SECOND", nonNeg},
		{"FORWARD_MAX_CONNECTIONS", positive},
		{"FORWARD_BREAKER_WINDOW", durations},
		{"FORWARD_KPA_REPORT_URL", []string{"https://127.0.0.1:8012", "http://localhost:8012", "http://10.0.0.1:8012",
			"http://127.0.0.1", "http://u@127.0.0.1:8012", "127.0.0.1:8012", "http://[::1"}},
		{"FORWARD_KPA_CALLS_PER_REPORT", positive},
		{"FORWARD_KPA_REPORT_MAX_AGE", durations},
		{"FORWARD_BREAKER_COOLDOWN", durations},
		{"FORWARD_SPREAD_ABOVE", nonNeg},
		{"FORWARD_SPREAD_URL", []string{"https://r-private", "r-private", "http://", "http://u@r-private", "http://[::1"}},
		{"FORWARD_SPREAD_TIMEOUT", durations},
	}
	for _, v := range vars {
		// The variable itself, not one whose name ends like it (PORT).
		named := regexp.MustCompile(`(^|[^A-Z_])` + v.name + `=`)
		for _, bad := range v.bad {
			t.Run(v.name+"="+bad, func(t *testing.T) {
				got, err := ProxyFromEnv(env(map[string]string{v.name: bad}), 0)
				if err == nil {
					t.Fatalf("ProxyFromEnv(%s=%q) = %+v, want an error", v.name, bad, got)
				}
				if got != nil {
					t.Errorf("ProxyFromEnv(%s=%q) returned a config along with its error", v.name, bad)
				}
				if !named.MatchString(err.Error()) {
					t.Errorf("error %q does not name %s", err, v.name)
				}
			})
		}
	}
}

func TestProxyFromEnvCrossField(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
		// wantNames must all appear in the error.
		wantNames []string
	}{
		{name: "per-destination one over the max", env: map[string]string{"FORWARD_MAX_INFLIGHT": "100", "FORWARD_MAX_INFLIGHT_PER_DESTINATION": "101"},
			wantNames: []string{"FORWARD_MAX_INFLIGHT_PER_DESTINATION", "FORWARD_MAX_INFLIGHT="}},
		{name: "per-tenant one over the max", env: map[string]string{"FORWARD_MAX_INFLIGHT": "100", "FORWARD_MAX_INFLIGHT_PER_TENANT": "101"},
			wantNames: []string{"FORWARD_MAX_INFLIGHT_PER_TENANT", "FORWARD_MAX_INFLIGHT="}},
		{name: "tenant reserve equal to the max", env: map[string]string{"FORWARD_MAX_INFLIGHT": "100", "FORWARD_TENANT_RESERVE": "100"},
			wantNames: []string{"FORWARD_TENANT_RESERVE", "FORWARD_MAX_INFLIGHT="}},
		{name: "tenant reserve above a max of one", env: map[string]string{"FORWARD_MAX_INFLIGHT": "1", "FORWARD_TENANT_RESERVE": "1"},
			wantNames: []string{"FORWARD_TENANT_RESERVE", "FORWARD_MAX_INFLIGHT="}},
		{name: "memory budget one byte below the largest call", env: map[string]string{"FORWARD_MEMORY_BUDGET_BYTES": "4259839"},
			wantNames: []string{"FORWARD_MEMORY_BUDGET_BYTES=", "FORWARD_MAX_EVENT_BYTES=", "FORWARD_MAX_HEADER_BYTES="}},
		{name: "event size raised past the memory budget", env: map[string]string{"FORWARD_MEMORY_BUDGET_BYTES": "8388608", "FORWARD_MAX_EVENT_BYTES": "8388608"},
			wantNames: []string{"FORWARD_MEMORY_BUDGET_BYTES=", "FORWARD_MAX_EVENT_BYTES=", "FORWARD_MAX_HEADER_BYTES="}},
		{name: "PORT on the default metrics port", env: map[string]string{"PORT": "9090"},
			wantNames: []string{"PORT", "METRICS_PORT"}},
		{name: "METRICS_PORT on the default port", env: map[string]string{"METRICS_PORT": "8080"},
			wantNames: []string{"PORT", "METRICS_PORT"}},
		{name: "spreading outside Knative with no address", env: map[string]string{"FORWARD_SPREAD_ABOVE": "1"},
			wantNames: []string{"FORWARD_SPREAD_ABOVE=1", "FORWARD_SPREAD_URL"}},
		{name: "retry one over the max", env: map[string]string{"FORWARD_ASYNC_RETRY": "21"},
			wantNames: []string{"FORWARD_ASYNC_RETRY=", "FORWARD_ASYNC_MAX_RETRY="}},
		{name: "max retry below an explicit retry", env: map[string]string{"FORWARD_ASYNC_MAX_RETRY": "3", "FORWARD_ASYNC_RETRY": "4"},
			wantNames: []string{"FORWARD_ASYNC_RETRY=", "FORWARD_ASYNC_MAX_RETRY="}},
		{name: "backoff delay over the backoff max", env: map[string]string{"FORWARD_ASYNC_BACKOFF_DELAY": "61s"},
			wantNames: []string{"FORWARD_ASYNC_BACKOFF_DELAY", "FORWARD_ASYNC_BACKOFF_MAX"}},
		{name: "KPA report age one second over the max timeout", env: map[string]string{"FORWARD_KPA_REPORT_MAX_AGE": "601s"},
			wantNames: []string{"FORWARD_KPA_REPORT_MAX_AGE=", "FORWARD_MAX_TIMEOUT="}},
		{name: "backoff max below the default delay", env: map[string]string{"FORWARD_ASYNC_BACKOFF_MAX": "100ms"},
			wantNames: []string{"FORWARD_ASYNC_BACKOFF_DELAY", "FORWARD_ASYNC_BACKOFF_MAX"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ProxyFromEnv(env(tt.env), 0)
			if err == nil {
				t.Fatalf("ProxyFromEnv(%v) = %+v, want an error", tt.env, got)
			}
			if got != nil {
				t.Errorf("ProxyFromEnv(%v) returned a config along with its error", tt.env)
			}
			for _, n := range tt.wantNames {
				if !regexp.MustCompile(`(^|[^A-Z_])` + regexp.QuoteMeta(n)).MatchString(err.Error()) {
					t.Errorf("error %q does not name %s", err, n)
				}
			}
		})
	}
}

func TestProxyFromEnvReadsOnlyThroughLookup(t *testing.T) {
	t.Setenv("PORT", "1234") // must be ignored: only the lookup counts
	var asked []string
	got, err := ProxyFromEnv(func(k string) (string, bool) { asked = append(asked, k); return "", false }, 0)
	if err != nil {
		t.Fatal(err)
	}
	if got.Port != 8080 {
		t.Errorf("Port = %d, want 8080 (read from the process environment?)", got.Port)
	}
	seen := map[string]bool{}
	for _, k := range asked {
		seen[k] = true
	}
	for _, k := range []string{"PORT", "METRICS_PORT", "FORWARD_MAX_INFLIGHT", "FORWARD_DRAIN_TIMEOUT", "FORWARD_LOG_LEVEL"} {
		if !seen[k] {
			t.Errorf("%s was never looked up", k)
		}
	}
}
