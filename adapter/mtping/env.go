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
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"knative.dev/eventing/pkg/observability"
	kle "knative.dev/pkg/leaderelection"
	"knative.dev/pkg/logging"
	"knative.dev/pkg/observability/metrics"
	"knative.dev/pkg/observability/tracing"

	"knative.dev/event-forwarding-proxy/config"
)

// DefaultMetricsPort is where /metrics is served: the port upstream's
// adapter Deployment names metrics.
const DefaultMetricsPort = 9090

// Env is the adapter process's configuration, read once from its
// environment (the names upstream's adapter Deployment sets are honoured).
type Env struct {
	// SystemNamespace holds config-event-forwarding, config-leader-election
	// and the Leases (SYSTEM_NAMESPACE). If unset, knative-eventing.
	SystemNamespace string
	// PodName is this replica's identity in the Leases (POD_NAME). If
	// unset, the host name.
	PodName string
	// ServiceAccount is the adapter's own service account in
	// SystemNamespace, whose token the proxy gets (SERVICE_ACCOUNT_NAME).
	// If unset, in a pod the account of its mounted token; elsewhere none,
	// and no OIDC token is sent at all.
	ServiceAccount string
	// ProbesPort serves /health and /readiness (PROBES_PORT). If unset, 8080.
	ProbesPort int
	// MetricsPort serves /metrics (METRICS_PORT). If unset,
	// DefaultMetricsPort.
	MetricsPort int
	// ZapConfig is the logger's zap configuration: the zap-logger-config
	// of K_LOGGING_CONFIG, which upstream's controller writes from
	// config-logging (with its loglevel.pingsource in the level). If
	// unset, knative.dev/pkg's production format at info.
	ZapConfig string
	// LogLevel is debug, info, warn or error (LOG_LEVEL); it overrides
	// ZapConfig's level. If unset, ZapConfig's level.
	LogLevel string
	// Tracing is where the sends' spans go: the tracing part of
	// K_OBSERVABILITY_CONFIG, which upstream's controller writes from
	// config-observability. If unset, nowhere.
	Tracing tracing.Config
	// Metrics is the metrics part of K_OBSERVABILITY_CONFIG. grpc and
	// http/protobuf push the adapter's metrics to its endpoint as well;
	// they are served in Prometheus text on METRICS_PORT whatever it says,
	// since the kit and the adapter's HPA scrape them there. If unset, none
	// pushed.
	Metrics metrics.Config
	// SinkTimeout bounds one call to a sink, in seconds (K_SINK_TIMEOUT, as
	// upstream's controller sets it). If unset or -1, 10 minutes.
	SinkTimeout time.Duration
	// DrainTimeout bounds the wait for running sends at shutdown
	// (DRAIN_TIMEOUT, a Go duration). If unset, 20 s.
	DrainTimeout time.Duration
	// Upstream is the election of upstream's adapter, which upstream's
	// controller writes into K_LEADER_ELECTION_CONFIG from Eventing's
	// config-leader-election (UpstreamLeaderElection). If unset, one
	// bucket.
	Upstream kle.ComponentConfig
	// SinkH2CHosts are the host patterns of the plain-http sinks sent h2c
	// with prior knowledge (SINK_H2C_HOSTS, the syntax of the proxy's
	// FORWARD_ALLOWED_HOSTS). If unset, none: HTTP/1.1 to every plain-http
	// sink, as upstream's adapter sends.
	SinkH2CHosts []string
}

// EnvFromLookup reads Env; a bad value is an error naming its variable.
func EnvFromLookup(lookup func(string) (string, bool)) (Env, error) {
	get := func(k string) string {
		v, _ := lookup(k)
		return strings.TrimSpace(v)
	}
	e := Env{
		SystemNamespace: config.SystemNamespace(lookup),
		PodName:         get("POD_NAME"),
		ServiceAccount:  get("SERVICE_ACCOUNT_NAME"),
		ProbesPort:      8080,
		MetricsPort:     DefaultMetricsPort,
		DrainTimeout:    20 * time.Second,
	}
	if e.PodName == "" {
		h, err := os.Hostname()
		if err != nil {
			return e, fmt.Errorf("POD_NAME unset and no host name: %w", err)
		}
		e.PodName = h
	}
	var errs []error
	port := func(k string, dst *int) {
		if v := get(k); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 || n > 65535 {
				errs = append(errs, fmt.Errorf("%s=%q: want a port number", k, v))
				return
			}
			*dst = n
		}
	}
	port("PROBES_PORT", &e.ProbesPort)
	port("METRICS_PORT", &e.MetricsPort)
	switch v := get("LOG_LEVEL"); v {
	case "":
	case "debug", "info", "warn", "error":
		e.LogLevel = v
	default:
		errs = append(errs, fmt.Errorf("LOG_LEVEL=%q: want debug, info, warn or error", v))
	}
	if v := get("K_LOGGING_CONFIG"); v != "" {
		cfg, err := logging.JSONToConfig(v)
		if err != nil {
			errs = append(errs, fmt.Errorf("K_LOGGING_CONFIG: want the JSON object upstream's controller writes from config-logging: %w", err))
		} else {
			e.ZapConfig = cfg.LoggingConfig
		}
	}
	if v := get("K_OBSERVABILITY_CONFIG"); v != "" {
		var cfg observability.Config
		switch err := json.Unmarshal([]byte(v), &cfg); {
		case err != nil:
			errs = append(errs, fmt.Errorf("K_OBSERVABILITY_CONFIG: want the JSON object upstream's controller writes from config-observability: %w", err))
		default:
			errs = append(errs, e.observability(cfg)...)
		}
	}
	if v := get("K_SINK_TIMEOUT"); v != "" && v != "-1" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			errs = append(errs, fmt.Errorf("K_SINK_TIMEOUT=%q: want a positive number of seconds, or -1", v))
		} else {
			e.SinkTimeout = time.Duration(n) * time.Second
		}
	}
	if v := get("DRAIN_TIMEOUT"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			errs = append(errs, fmt.Errorf("DRAIN_TIMEOUT=%q: want a positive duration such as 20s", v))
		} else {
			e.DrainTimeout = d
		}
	}
	up, err := UpstreamLeaderElection(get("K_LEADER_ELECTION_CONFIG"))
	if err != nil {
		errs = append(errs, fmt.Errorf("K_LEADER_ELECTION_CONFIG: %w", err))
	}
	e.Upstream = up
	if v := get("SINK_H2C_HOSTS"); v != "" {
		hosts, err := config.ParseHostPatterns(v)
		if err != nil {
			errs = append(errs, fmt.Errorf("SINK_H2C_HOSTS=%q: %w", v, err))
		}
		e.SinkH2CHosts = hosts
	}
	return e, errors.Join(errs...)
}

// observability takes the tracing and metrics parts of cfg, each when its
// protocol is set, and returns what is wrong with them.
func (e *Env) observability(cfg observability.Config) []error {
	var errs []error
	if cfg.Tracing.Protocol != "" {
		if err := cfg.Tracing.Validate(); err != nil {
			errs = append(errs, fmt.Errorf("K_OBSERVABILITY_CONFIG: tracing: %w", err))
		}
		e.Tracing = cfg.Tracing
	}
	if cfg.Metrics.Protocol != "" {
		if err := cfg.Metrics.Validate(); err != nil {
			errs = append(errs, fmt.Errorf("K_OBSERVABILITY_CONFIG: metrics: %w", err))
		}
		e.Metrics = cfg.Metrics
	}
	return errs
}
