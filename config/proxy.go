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

// Package config reads what operators set: the proxy's environment and the
// eventing ConfigMap. It imports neither proxy nor delivery.
package config

import (
	"fmt"
	"net/netip"
	"time"
)

// Destination protocols for FORWARD_DESTINATION_PROTOCOL.
const (
	// ProtocolAuto speaks h2c with prior knowledge to the plain-http
	// destinations whose host matches FORWARD_H2C_HOSTS, and HTTP/1.1 to
	// every other one. Nothing is sent to learn what a destination speaks:
	// the operator says so.
	ProtocolAuto = "auto"
	// ProtocolHTTP1 always speaks HTTP/1.1 to plain-http destinations.
	ProtocolHTTP1 = "http1"
	// ProtocolH2C always speaks h2c to plain-http destinations.
	ProtocolH2C = "h2c"
)

// Proxy is the proxy's configuration, read once from the environment.
// Every field names its variable; docs/configuration.md is the reference.
type Proxy struct {
	// Port serves events (HTTP/1.1 and h2c). PORT; if unset, 8080.
	Port int
	// MetricsPort serves /metrics. METRICS_PORT; if unset, 9090.
	MetricsPort int

	// AllowedHosts are the host patterns a destination may name
	// (FORWARD_ALLOWED_HOSTS); if unset, *.svc.cluster.local and *.svc.
	AllowedHosts []string
	// AllowedCIDRs are exceptions to the built-in deny list
	// (FORWARD_ALLOWED_CIDRS); if unset, none.
	AllowedCIDRs []netip.Prefix
	// DeniedCIDRs are denied on top of the built-in list
	// (FORWARD_DENIED_CIDRS); if unset, none.
	DeniedCIDRs []netip.Prefix
	// KubernetesAPI is the Kubernetes API's ClusterIP, from the
	// KUBERNETES_SERVICE_HOST every pod gets; never dialed, whatever name
	// leads to it and whatever FORWARD_ALLOWED_CIDRS allows. Invalid when
	// the variable is unset or not an address.
	KubernetesAPI netip.Addr

	// MaxInflight is the pod's admission limit, sync and async calls
	// together (FORWARD_MAX_INFLIGHT); if unset, sized from the memory limit.
	MaxInflight int
	// MaxInflightPerDestination caps one destination host
	// (FORWARD_MAX_INFLIGHT_PER_DESTINATION); if unset, half of MaxInflight.
	MaxInflightPerDestination int
	// MaxInflightPerTenant caps one tenant (FORWARD_MAX_INFLIGHT_PER_TENANT);
	// if unset, three quarters of MaxInflight.
	MaxInflightPerTenant int
	// TenantReserve is the number of the pod's last free slots that only
	// tenants below their fair share may take (FORWARD_TENANT_RESERVE); if
	// unset, a tenth of MaxInflight.
	TenantReserve int

	// MemoryBudgetBytes bounds the bytes the calls held keep that grow
	// with what callers send: every call's request headers, and the body
	// of every async call until its delivery ends
	// (FORWARD_MEMORY_BUDGET_BYTES). A call that does not fit gets 503
	// overloaded. If unset, DefaultMemoryBudget of the memory limit, at
	// least MaxEventBytes + MaxHeaderBytes; set, it may not be less.
	MemoryBudgetBytes int64

	// MaxEventBytes is the largest request body forwarded
	// (FORWARD_MAX_EVENT_BYTES); if unset, 4 MiB.
	MaxEventBytes int64
	// MaxTimeout caps Kn-Forward-Timeout and is the default deadline
	// (FORWARD_MAX_TIMEOUT); if unset, 10 minutes.
	MaxTimeout time.Duration
	// MaxHeaderBytes bounds a request's headers (FORWARD_MAX_HEADER_BYTES);
	// if unset, 64 KiB.
	MaxHeaderBytes int
	// ReadHeaderTimeout bounds reading a request's headers
	// (FORWARD_READ_HEADER_TIMEOUT); if unset, 10 s.
	ReadHeaderTimeout time.Duration
	// BodyIdleTimeout fails a request whose body stops coming for this long
	// (FORWARD_BODY_IDLE_TIMEOUT), answered 400 bad_request; if unset, 30 s.
	BodyIdleTimeout time.Duration
	// BodyMinRate fails a request whose body comes slower than this many
	// bytes a second on average, counted over the time the proxy waits for
	// it past a first BodyIdleTimeout (FORWARD_BODY_MIN_RATE), answered 400
	// bad_request as a stalled body; 0 turns it off; if unset,
	// DefaultBodyMinRate.
	BodyMinRate int64
	// IdleTimeout closes idle inbound connections (FORWARD_IDLE_TIMEOUT);
	// if unset, 5 minutes.
	IdleTimeout time.Duration

	// DestinationProtocol is auto, http1 or h2c
	// (FORWARD_DESTINATION_PROTOCOL); if unset, auto.
	DestinationProtocol string
	// H2CHosts are the host patterns, with FORWARD_ALLOWED_HOSTS' syntax,
	// of the plain-http destinations that auto speaks h2c to
	// (FORWARD_H2C_HOSTS); if unset, none: HTTP/1.1 to every plain-http
	// destination.
	H2CHosts []string
	// DialTimeout bounds DNS and connect (FORWARD_DIAL_TIMEOUT); if unset, 5 s.
	DialTimeout time.Duration
	// IdleConnTimeout keeps outbound connections pooled between ticks
	// (FORWARD_IDLE_CONN_TIMEOUT); if unset, 5 minutes.
	IdleConnTimeout time.Duration
	// MaxIdleConnsPerHost bounds one destination's idle pool
	// (FORWARD_MAX_IDLE_CONNS_PER_HOST); if unset, 1024.
	MaxIdleConnsPerHost int
	// BreakerFailures is the number of connect failures in a row that opens
	// a destination's circuit (FORWARD_BREAKER_FAILURES); 0 turns the
	// breaker off; if unset, 5.
	BreakerFailures int
	// BreakerWindow: a failure further than this from the previous one
	// starts a new count (FORWARD_BREAKER_WINDOW); if unset, 10 s.
	BreakerWindow time.Duration
	// BreakerCooldown is how long an open circuit refuses calls before one
	// probe goes through (FORWARD_BREAKER_COOLDOWN); if unset, 5 s.
	BreakerCooldown time.Duration

	// H2MaxConcurrentStreams is the streams a caller may open on one inbound
	// HTTP/2 connection (FORWARD_H2_MAX_CONCURRENT_STREAMS); if unset, 10000.
	// Outbound, each destination's own SETTINGS decide.
	H2MaxConcurrentStreams int
	// H2ConnWindowBytes is the HTTP/2 flow-control window of a connection,
	// inbound and to h2c destinations (FORWARD_H2_CONN_WINDOW_BYTES), 64 KiB
	// to 2^31-1; if unset, 4 MiB.
	H2ConnWindowBytes int
	// H2StreamWindowBytes is the HTTP/2 flow-control window of a stream,
	// inbound and to h2c destinations (FORWARD_H2_STREAM_WINDOW_BYTES), 64
	// KiB to 2^31-1; if unset, 256 KiB.
	H2StreamWindowBytes int

	// AsyncRetries is the default retry count of async calls
	// (FORWARD_ASYNC_RETRY); if unset, 5, or AsyncMaxRetries if lower.
	AsyncRetries int
	// AsyncMaxRetries caps Kn-Forward-Retry (FORWARD_ASYNC_MAX_RETRY); if
	// unset, 20.
	AsyncMaxRetries int
	// AsyncBackoffDelay is the default first retry delay of async calls
	// (FORWARD_ASYNC_BACKOFF_DELAY); if unset, 500 ms.
	AsyncBackoffDelay time.Duration
	// AsyncBackoffMax caps the exponential delay and Kn-Forward-Backoff-Delay
	// (FORWARD_ASYNC_BACKOFF_MAX); if unset, 1 minute.
	AsyncBackoffMax time.Duration
	// AsyncMaxRetryAfter caps how long a destination's Retry-After delays an
	// async retry (FORWARD_ASYNC_MAX_RETRY_AFTER); if unset, 5 minutes.
	AsyncMaxRetryAfter time.Duration

	// DrainQuietPeriod is waited after SIGTERM before held calls are awaited,
	// so endpoints can stop routing here (FORWARD_DRAIN_QUIET_PERIOD); if
	// unset, 0: new calls are refused at once with 503 draining anyway.
	DrainQuietPeriod time.Duration
	// DrainTimeout bounds the wait for held calls after SIGTERM
	// (FORWARD_DRAIN_TIMEOUT); if unset, MaxTimeout plus 15 s.
	DrainTimeout time.Duration

	// MetricsMaxLabelValues bounds the distinct namespace and tenant label
	// values of the metrics; later ones are counted as "_other"
	// (FORWARD_METRICS_MAX_LABEL_VALUES); if unset, 1000.
	MetricsMaxLabelValues int

	// Auth is none or oidc (FORWARD_AUTH); if unset, none. With oidc every
	// caller presents a service-account token for the proxy in
	// Kn-Forward-Authorization.
	Auth string
	// OIDCIssuer is the token issuer, discovered at start
	// (FORWARD_OIDC_ISSUER); if unset, https://kubernetes.default.svc.cluster.local.
	OIDCIssuer string
	// OIDCAudience is the audience tokens must name (FORWARD_OIDC_AUDIENCE);
	// if unset, event-forwarding-proxy.
	OIDCAudience string
	// TrustedNamespaces are the namespaces whose callers serve many tenants:
	// they name the tenant in Kn-Namespace and reach any namespace
	// (FORWARD_AUTH_TRUSTED_NAMESPACES); if unset, knative-eventing. Other
	// callers reach their own namespace only.
	TrustedNamespaces []string
	// TrustBundlesNamespace is where the proxy watches eventing's trust
	// bundles, ConfigMaps labelled networking.knative.dev/trust-bundle:
	// "true", and trusts their CA certificates for https destinations on
	// top of the system roots (FORWARD_TRUST_BUNDLES_NAMESPACE); if unset
	// or empty, only the system roots. It needs get, list and watch on
	// configmaps there.
	TrustBundlesNamespace string

	// TraceExporter is none or otlp (FORWARD_TRACE_EXPORTER); if unset,
	// none. otlp sends spans over OTLP/HTTP to the endpoint the standard
	// OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT names.
	TraceExporter string
	// TraceSamplingRatio is the share of new traces sampled; a caller's
	// sampling decision is followed (FORWARD_TRACE_SAMPLING_RATIO, 0 to 1);
	// if unset, 1.
	TraceSamplingRatio float64

	// LogLevel is debug, info, warn or error (FORWARD_LOG_LEVEL); if unset,
	// info.
	LogLevel string
	// LogCallsPerSecond bounds the per-call lines about refused and failed
	// synchronous calls; the lines beyond it are counted and their number
	// logged once a second (FORWARD_LOG_CALLS_PER_SECOND). 0 logs every
	// line; if unset, 100. Lost async events are always logged, each.
	LogCallsPerSecond int

	// KPAReportURL is queue-proxy's address in the pod, an http URL on a
	// loopback address (FORWARD_KPA_REPORT_URL): the proxy holds requests
	// of its own open through it, one per KPACallsPerReport async calls
	// held, so that Knative's Pod Autoscaler, which counts the requests
	// queue-proxy has in flight, sees them. If unset or empty, none.
	KPAReportURL string
	// KPACallsPerReport is how many async calls one report stands for
	// (FORWARD_KPA_CALLS_PER_REPORT); if unset, 10.
	KPACallsPerReport int
	// KPAReportMaxAge ends a report, which the next takes over, before
	// queue-proxy's timeout (the revision's timeoutSeconds) would
	// (FORWARD_KPA_REPORT_MAX_AGE), at most FORWARD_MAX_TIMEOUT; if unset,
	// 5 minutes or FORWARD_MAX_TIMEOUT if lower.
	KPAReportMaxAge time.Duration

	// SpreadAbove: an async call admitted while the pod holds more calls
	// than this is first offered to another pod of the revision, which
	// takes it if it holds fewer (FORWARD_SPREAD_ABOVE). 0 turns spreading
	// off; if unset, 0.
	SpreadAbove int
	// SpreadURL reaches a pod of the revision picked afresh for every
	// connection (FORWARD_SPREAD_URL): an http URL, by default the
	// revision's private Service, http://$K_REVISION-private, whose
	// ClusterIP sends each connection to one of its pods' queue-proxy.
	// Needed when SpreadAbove is set outside Knative.
	SpreadURL string
	// SpreadTimeout bounds one offer; past it the pod keeps the call
	// (FORWARD_SPREAD_TIMEOUT). If unset, 2 seconds.
	SpreadTimeout time.Duration

	// MaxConnections is the most inbound connections the process holds at
	// once; beyond it a new connection is closed as soon as it is accepted
	// (FORWARD_MAX_CONNECTIONS). If unset, DefaultMaxConnections of the
	// process's open-file limit.
	MaxConnections int
}

// DefaultBodyMinRate is FORWARD_BODY_MIN_RATE's default, in bytes a
// second. It cuts a body trickled at a byte a second once the first
// FORWARD_BODY_IDLE_TIMEOUT of waiting for it is spent (1 byte a second
// against 1024 allowed: after 30 s × 1024/1023, about 30.03 s), and lets
// a legitimate event over a slow link through with room: 1 MiB
// (1,048,576 bytes) over a 64 kbit/s link (8,000 bytes a second) comes in
// 131 s, at 7.8 times the minimum, and any 1 MiB body that comes evenly
// within FORWARD_MAX_TIMEOUT's default of 10 minutes comes at 1,748 bytes
// a second or more (1,048,576 / 600), above it.
const DefaultBodyMinRate = 1024

// bytesPerHeldCall is what a held call costs before its headers and body
// when sizing MaxInflight from the memory limit: the most measured, with
// HTTP/1.1 on both sides (30.6-38.1 KB; over h2c 5.3-10.1 KB, see
// docs/benchmarks.md).
const bytesPerHeldCall = 32 << 10

// DefaultMaxInflight sizes the admission limit from a memory limit in bytes:
// heldCallsPercent of it at bytesPerHeldCall each, within [100, 100000].
// Without a limit (zero or negative) it is 10000.
func DefaultMaxInflight(memLimit int64) int {
	if memLimit <= 0 {
		return 10000
	}
	// Clamp first so that the product cannot overflow; 1 PiB is far past
	// the cap.
	n := min(memLimit, 1<<50) * heldCallsPercent / 100 / bytesPerHeldCall
	return int(min(max(n, 100), 100000))
}

// ProxyFromEnv reads the proxy's configuration through lookup (os.LookupEnv
// in a process). memLimit is the container's memory limit in bytes, zero if
// unknown. An invalid value is an error naming its variable.
func ProxyFromEnv(lookup func(string) (string, bool), memLimit int64) (*Proxy, error) {
	r := reader{lookup: lookup}
	c := &Proxy{
		Port:                   r.port("PORT", 8080),
		MetricsPort:            r.port("METRICS_PORT", 9090),
		AllowedHosts:           r.hosts("FORWARD_ALLOWED_HOSTS", []string{"*.svc.cluster.local", "*.svc"}),
		AllowedCIDRs:           r.cidrs("FORWARD_ALLOWED_CIDRS"),
		DeniedCIDRs:            r.cidrs("FORWARD_DENIED_CIDRS"),
		KubernetesAPI:          kubernetesAPI(lookup),
		MaxInflight:            r.positiveInt("FORWARD_MAX_INFLIGHT", DefaultMaxInflight(memLimit)),
		MaxEventBytes:          r.positiveInt64("FORWARD_MAX_EVENT_BYTES", 4<<20),
		MaxTimeout:             r.duration("FORWARD_MAX_TIMEOUT", 10*time.Minute),
		MaxHeaderBytes:         r.positiveInt("FORWARD_MAX_HEADER_BYTES", 64<<10),
		ReadHeaderTimeout:      r.duration("FORWARD_READ_HEADER_TIMEOUT", 10*time.Second),
		IdleTimeout:            r.duration("FORWARD_IDLE_TIMEOUT", 5*time.Minute),
		BodyIdleTimeout:        r.duration("FORWARD_BODY_IDLE_TIMEOUT", 30*time.Second),
		BodyMinRate:            int64(r.nonNegativeInt("FORWARD_BODY_MIN_RATE", DefaultBodyMinRate)),
		DestinationProtocol:    r.oneOf("FORWARD_DESTINATION_PROTOCOL", ProtocolAuto, ProtocolHTTP1, ProtocolH2C),
		H2CHosts:               r.hosts("FORWARD_H2C_HOSTS", nil),
		DialTimeout:            r.duration("FORWARD_DIAL_TIMEOUT", 5*time.Second),
		IdleConnTimeout:        r.duration("FORWARD_IDLE_CONN_TIMEOUT", 5*time.Minute),
		MaxIdleConnsPerHost:    r.positiveInt("FORWARD_MAX_IDLE_CONNS_PER_HOST", 1024),
		BreakerFailures:        r.nonNegativeInt("FORWARD_BREAKER_FAILURES", 5),
		BreakerWindow:          r.duration("FORWARD_BREAKER_WINDOW", 10*time.Second),
		BreakerCooldown:        r.duration("FORWARD_BREAKER_COOLDOWN", 5*time.Second),
		H2MaxConcurrentStreams: r.positiveInt("FORWARD_H2_MAX_CONCURRENT_STREAMS", 10000),
		H2ConnWindowBytes:      r.intIn("FORWARD_H2_CONN_WINDOW_BYTES", 4<<20, 1<<16, 1<<31-1),
		H2StreamWindowBytes:    r.intIn("FORWARD_H2_STREAM_WINDOW_BYTES", 256<<10, 1<<16, 1<<31-1),
		AsyncMaxRetries:        r.nonNegativeInt("FORWARD_ASYNC_MAX_RETRY", 20),
		AsyncBackoffDelay:      r.duration("FORWARD_ASYNC_BACKOFF_DELAY", 500*time.Millisecond),
		AsyncBackoffMax:        r.duration("FORWARD_ASYNC_BACKOFF_MAX", time.Minute),
		AsyncMaxRetryAfter:     r.duration("FORWARD_ASYNC_MAX_RETRY_AFTER", 5*time.Minute),
		DrainQuietPeriod:       r.nonNegativeDuration("FORWARD_DRAIN_QUIET_PERIOD", 0),
		MetricsMaxLabelValues:  r.positiveInt("FORWARD_METRICS_MAX_LABEL_VALUES", 1000),
		Auth:                   r.oneOf("FORWARD_AUTH", "none", "oidc"),
		OIDCIssuer:             r.url("FORWARD_OIDC_ISSUER", "https://kubernetes.default.svc.cluster.local"),
		OIDCAudience:           r.str("FORWARD_OIDC_AUDIENCE", "event-forwarding-proxy"),
		TrustedNamespaces:      r.namespaces("FORWARD_AUTH_TRUSTED_NAMESPACES", []string{"knative-eventing"}),
		TrustBundlesNamespace:  r.namespace("FORWARD_TRUST_BUNDLES_NAMESPACE", ""),
		TraceExporter:          r.oneOf("FORWARD_TRACE_EXPORTER", "none", "otlp"),
		TraceSamplingRatio:     r.ratio("FORWARD_TRACE_SAMPLING_RATIO", 1),
		LogLevel:               r.oneOf("FORWARD_LOG_LEVEL", "info", "debug", "warn", "error"),
		LogCallsPerSecond:      r.nonNegativeInt("FORWARD_LOG_CALLS_PER_SECOND", 100),
		MaxConnections:         r.positiveInt("FORWARD_MAX_CONNECTIONS", DefaultMaxConnections(OpenFileLimit())),
	}
	c.AsyncRetries = r.nonNegativeInt("FORWARD_ASYNC_RETRY", min(5, c.AsyncMaxRetries))
	c.MaxInflightPerDestination = r.positiveInt("FORWARD_MAX_INFLIGHT_PER_DESTINATION", max(c.MaxInflight/2, 1))
	c.MaxInflightPerTenant = r.positiveInt("FORWARD_MAX_INFLIGHT_PER_TENANT", max(c.MaxInflight*3/4, 1))
	c.TenantReserve = r.nonNegativeInt("FORWARD_TENANT_RESERVE", c.MaxInflight/10)
	c.DrainTimeout = r.duration("FORWARD_DRAIN_TIMEOUT", c.MaxTimeout+15*time.Second)
	c.KPAReportURL = r.loopbackURL("FORWARD_KPA_REPORT_URL")
	c.KPACallsPerReport = r.positiveInt("FORWARD_KPA_CALLS_PER_REPORT", 10)
	c.KPAReportMaxAge = r.duration("FORWARD_KPA_REPORT_MAX_AGE", min(5*time.Minute, c.MaxTimeout))
	c.SpreadAbove = r.nonNegativeInt("FORWARD_SPREAD_ABOVE", 0)
	c.SpreadTimeout = r.duration("FORWARD_SPREAD_TIMEOUT", 2*time.Second)
	c.SpreadURL = r.httpURL("FORWARD_SPREAD_URL", revisionPrivateURL(&r))
	// The largest call must fit in an empty budget, or its caller would be
	// told to retry a call that can never be admitted.
	largest := c.MaxEventBytes + int64(c.MaxHeaderBytes)
	c.MemoryBudgetBytes = r.positiveInt64("FORWARD_MEMORY_BUDGET_BYTES", max(DefaultMemoryBudget(memLimit), largest))
	if r.err != nil {
		return nil, r.err
	}
	switch {
	case c.MemoryBudgetBytes < largest:
		return nil, fmt.Errorf("FORWARD_MEMORY_BUDGET_BYTES=%d is less than FORWARD_MAX_EVENT_BYTES=%d plus FORWARD_MAX_HEADER_BYTES=%d: the largest call would never be admitted",
			c.MemoryBudgetBytes, c.MaxEventBytes, c.MaxHeaderBytes)
	case c.MaxInflightPerDestination > c.MaxInflight:
		return nil, fmt.Errorf("FORWARD_MAX_INFLIGHT_PER_DESTINATION=%d exceeds FORWARD_MAX_INFLIGHT=%d", c.MaxInflightPerDestination, c.MaxInflight)
	case c.MaxInflightPerTenant > c.MaxInflight:
		return nil, fmt.Errorf("FORWARD_MAX_INFLIGHT_PER_TENANT=%d exceeds FORWARD_MAX_INFLIGHT=%d", c.MaxInflightPerTenant, c.MaxInflight)
	case c.TenantReserve >= c.MaxInflight:
		return nil, fmt.Errorf("FORWARD_TENANT_RESERVE=%d must be below FORWARD_MAX_INFLIGHT=%d", c.TenantReserve, c.MaxInflight)
	case c.Port == c.MetricsPort:
		return nil, fmt.Errorf("PORT and METRICS_PORT are both %d", c.Port)
	case c.AsyncRetries > c.AsyncMaxRetries:
		return nil, fmt.Errorf("FORWARD_ASYNC_RETRY=%d exceeds FORWARD_ASYNC_MAX_RETRY=%d", c.AsyncRetries, c.AsyncMaxRetries)
	case c.KPAReportMaxAge > c.MaxTimeout:
		return nil, fmt.Errorf("FORWARD_KPA_REPORT_MAX_AGE=%s exceeds FORWARD_MAX_TIMEOUT=%s", c.KPAReportMaxAge, c.MaxTimeout)
	case c.SpreadAbove > 0 && c.SpreadURL == "":
		return nil, fmt.Errorf("FORWARD_SPREAD_ABOVE=%d outside Knative (no K_REVISION) needs FORWARD_SPREAD_URL, an address that reaches the proxy's pods", c.SpreadAbove)
	case c.AsyncBackoffDelay > c.AsyncBackoffMax:
		return nil, fmt.Errorf("FORWARD_ASYNC_BACKOFF_DELAY=%s exceeds FORWARD_ASYNC_BACKOFF_MAX=%s", c.AsyncBackoffDelay, c.AsyncBackoffMax)
	}
	return c, nil
}
