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
	"fmt"
	neturl "net/url"
	"strings"
	"time"
)

// The eventing ConfigMap that tells multi-tenant sources how to use the
// proxy. These names are a contract: the operator writes them and every
// source reads them, so renaming one breaks running installs.
const (
	// ForwardingConfigName is the ConfigMap's name, in the system namespace.
	ForwardingConfigName = "config-event-forwarding"
	// ForwardingProxyKey holds the proxy's URL; empty or absent means off.
	ForwardingProxyKey = "event-forwarding-proxy"
	// ForwardingThresholdKey holds the number of direct sources an adapter
	// serves before it forwards through the proxy; "0" means always.
	ForwardingThresholdKey = "event-forwarding-threshold"

	// ForwardingInflightThresholdKey holds the number of direct sends an
	// adapter may hold in flight before it forwards through the proxy,
	// whatever its number of sources; "0" turns that switch off.
	ForwardingInflightThresholdKey = "event-forwarding-inflight-threshold"
	// ForwardingInflightHoldKey holds how long an adapter that forwarded
	// for its sends in flight keeps forwarding after it was last over the
	// in-flight threshold.
	ForwardingInflightHoldKey = "event-forwarding-inflight-hold"

	// ForwardingDeadLetterSinkKey holds the dead-letter sink of every
	// async event a source sends: where it goes after its sink failed for
	// the last time. Empty or absent means none.
	ForwardingDeadLetterSinkKey = "event-forwarding-dead-letter-sink"
	// ForwardingBackoffPolicyKey holds how the wait between retries grows,
	// as a Knative delivery spec's backoffPolicy: exponential (the default)
	// or linear.
	ForwardingBackoffPolicyKey = "event-forwarding-backoff-policy"
	// ForwardingRetryAfterMaxKey caps how long a sink's Retry-After answer
	// delays a retry, as a delivery spec's retryAfterMax; 0 ignores
	// Retry-After. Empty or absent keeps the source's own cap.
	ForwardingRetryAfterMaxKey = "event-forwarding-retry-after-max"

	// DefaultForwardingThreshold applies when the threshold key is absent
	// or empty.
	DefaultForwardingThreshold = 500
	// DefaultForwardingInflightThreshold applies when its key is absent or
	// empty: as many held calls as the default sources, the point where
	// one adapter pod's latency grows by seconds.
	DefaultForwardingInflightThreshold = 500
	// DefaultForwardingInflightHold applies when its key is absent or
	// empty: about a slow sink's answer time, so that an adapter does not
	// take back calls as slow as those that sent it to the proxy.
	DefaultForwardingInflightHold = 5 * time.Minute
	// MinForwardingInflightHold is the shortest hold accepted.
	MinForwardingInflightHold = time.Second

	// DefaultSystemNamespace holds the ConfigMap when SYSTEM_NAMESPACE is
	// unset.
	DefaultSystemNamespace = "knative-eventing"
)

// Forwarding is the content of config-event-forwarding. The zero value is
// "off": every source sends straight to its sink.
type Forwarding struct {
	// ProxyURL is the absolute http(s) URL of the proxy Knative Service.
	// If nil, forwarding is off.
	ProxyURL *neturl.URL
	// Threshold is the number of direct sources an adapter may serve before
	// it forwards through the proxy; 0 means always forward (when ProxyURL
	// is set). NewForwardingFromMap defaults it to 500.
	Threshold int
	// InflightThreshold is the number of direct sends an adapter may hold
	// in flight before it forwards, whatever its sources; 0 turns the
	// switch off. NewForwardingFromMap defaults it to 500.
	InflightThreshold int
	// InflightHold is how long an adapter forwarding for its sends in
	// flight keeps forwarding after it was last over InflightThreshold.
	// NewForwardingFromMap defaults it to 5 minutes.
	InflightHold time.Duration

	// DeadLetterSink is where an async event goes after its sink failed
	// for the last time, by either route. If nil, none: the failure is
	// logged and counted.
	DeadLetterSink *neturl.URL
	// LinearBackoff makes the wait before retry n n times the first one,
	// rather than 2^(n-1) times.
	LinearBackoff bool
	// RetryAfterMax, when positive, caps how long a sink's Retry-After
	// delays a retry; IgnoreRetryAfter makes Retry-After count for
	// nothing. Both zero: the source's own cap.
	RetryAfterMax    time.Duration
	IgnoreRetryAfter bool
}

// Enabled reports whether a proxy is configured.
func (f Forwarding) Enabled() bool { return f.ProxyURL != nil }

// String describes f for logs.
func (f Forwarding) String() string {
	s := "off"
	if f.ProxyURL != nil {
		s = fmt.Sprintf("proxy %s above %d direct sources", f.ProxyURL.Redacted(), f.Threshold)
		if f.InflightThreshold > 0 {
			s += fmt.Sprintf(" or %d direct sends in flight (held %s)", f.InflightThreshold, f.InflightHold)
		}
	}
	if f.DeadLetterSink != nil {
		s += "; dead-letter sink " + f.DeadLetterSink.Redacted()
	}
	return s
}

// NewForwardingFromMap parses the data of config-event-forwarding. An
// absent ConfigMap reads as an empty map: forwarding off, thresholds 500
// sources and 500 sends in flight, hold 5 minutes. An
// invalid value is an error naming its key; the caller keeps its last good
// configuration.
func NewForwardingFromMap(data map[string]string) (*Forwarding, error) {
	r := reader{lookup: func(k string) (string, bool) {
		v, ok := data[k]
		return v, ok
	}}
	f := &Forwarding{
		Threshold:         r.nonNegativeInt(ForwardingThresholdKey, DefaultForwardingThreshold),
		InflightThreshold: r.nonNegativeInt(ForwardingInflightThresholdKey, DefaultForwardingInflightThreshold),
		InflightHold:      r.durationMin(ForwardingInflightHoldKey, DefaultForwardingInflightHold, MinForwardingInflightHold),
	}
	f.LinearBackoff = r.backoffPolicy(ForwardingBackoffPolicyKey)
	f.RetryAfterMax = r.nonNegativeDuration(ForwardingRetryAfterMaxKey, 0)
	f.IgnoreRetryAfter = f.RetryAfterMax == 0 && r.has(ForwardingRetryAfterMaxKey)
	if r.err != nil {
		return nil, r.err
	}
	for _, k := range []struct {
		key string
		to  **neturl.URL
	}{{ForwardingProxyKey, &f.ProxyURL}, {ForwardingDeadLetterSinkKey, &f.DeadLetterSink}} {
		if v, ok := r.get(k.key); ok {
			u, err := parseServiceURL(v)
			if err != nil {
				return nil, fmt.Errorf("%s=%q: %w", k.key, v, err)
			}
			*k.to = u
		}
	}
	return f, nil
}

// backoffPolicy reads a delivery spec's backoffPolicy: true for linear,
// false for exponential or when unset.
func (r *reader) backoffPolicy(name string) bool {
	v, ok := r.get(name)
	switch l := strings.ToLower(v); {
	case !ok || l == "exponential":
		return false
	case l == "linear":
		return true
	}
	r.fail(name, v, "want linear or exponential")
	return false
}

// has reports whether name has a non-empty value.
func (r *reader) has(name string) bool {
	_, ok := r.get(name)
	return ok
}

// parseServiceURL accepts an absolute http or https URL with a host and no
// user information, query or fragment.
func parseServiceURL(v string) (*neturl.URL, error) {
	u, err := neturl.Parse(v)
	switch {
	case err != nil:
		return nil, fmt.Errorf("not a URL: %w", err)
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, fmt.Errorf("want an absolute http or https URL such as http://name.namespace.svc.cluster.local")
	case u.Host == "" || u.Hostname() == "":
		return nil, fmt.Errorf("the URL has no host")
	case u.User != nil:
		return nil, fmt.Errorf("the URL must not carry user information")
	case u.RawQuery != "" || u.Fragment != "" || strings.HasSuffix(v, "?"):
		return nil, fmt.Errorf("the URL must not carry a query or a fragment")
	}
	return u, nil
}

// SystemNamespace returns SYSTEM_NAMESPACE as lookup (os.LookupEnv in a
// process) gives it, or knative-eventing when it is unset or empty.
func SystemNamespace(lookup func(string) (string, bool)) string {
	if v, ok := lookup("SYSTEM_NAMESPACE"); ok && strings.TrimSpace(v) != "" {
		return strings.TrimSpace(v)
	}
	return DefaultSystemNamespace
}
