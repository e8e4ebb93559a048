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
	"errors"
	"fmt"
	"net/netip"
	neturl "net/url"
	"strconv"
	"strings"
	"time"
)

// reader parses variables and keeps the first error, so that ProxyFromEnv
// reads as a list of fields.
type reader struct {
	lookup func(string) (string, bool)
	err    error
}

func (r *reader) get(name string) (string, bool) {
	v, ok := r.lookup(name)
	v = strings.TrimSpace(v)
	return v, ok && v != ""
}

func (r *reader) fail(name, v, why string) {
	if r.err == nil {
		r.err = fmt.Errorf("%s=%q: %s", name, v, why)
	}
}

func (r *reader) int(name string, def, lowest int) int {
	v, ok := r.get(name)
	if !ok {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < lowest {
		r.fail(name, v, fmt.Sprintf("want an integer >= %d", lowest))
		return def
	}
	return n
}

// intIn reads an integer within [lowest, highest].
func (r *reader) intIn(name string, def, lowest, highest int) int {
	n := r.int(name, def, lowest)
	if n > highest {
		r.fail(name, strconv.Itoa(n), fmt.Sprintf("want an integer in [%d, %d]", lowest, highest))
	}
	return n
}

func (r *reader) positiveInt(name string, def int) int    { return r.int(name, def, 1) }
func (r *reader) nonNegativeInt(name string, def int) int { return r.int(name, def, 0) }

// positiveInt64 reads a count of bytes: a plain integer of at least 1.
func (r *reader) positiveInt64(name string, def int64) int64 {
	v, ok := r.get(name)
	if !ok {
		return def
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 1 {
		r.fail(name, v, "want a number of bytes, an integer >= 1")
		return def
	}
	return n
}

func (r *reader) port(name string, def int) int {
	p := r.int(name, def, 1)
	if p > 65535 {
		r.fail(name, strconv.Itoa(p), "want a port number in [1, 65535]")
	}
	return p
}

func (r *reader) durationMin(name string, def, lowest time.Duration) time.Duration {
	v, ok := r.get(name)
	if !ok {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < lowest {
		r.fail(name, v, fmt.Sprintf("want a duration such as 30s or 10m, at least %s", lowest))
		return def
	}
	return d
}

func (r *reader) duration(name string, def time.Duration) time.Duration {
	return r.durationMin(name, def, time.Millisecond)
}

func (r *reader) nonNegativeDuration(name string, def time.Duration) time.Duration {
	return r.durationMin(name, def, 0)
}

// str reads a string.
func (r *reader) str(name, def string) string {
	if v, ok := r.get(name); ok {
		return v
	}
	return def
}

// url reads an absolute https URL.
func (r *reader) url(name, def string) string {
	v, ok := r.get(name)
	if !ok {
		return def
	}
	u, err := neturl.Parse(v)
	if err != nil || u.Scheme != "https" || u.Host == "" {
		r.fail(name, v, "want an absolute https URL")
		return def
	}
	return v
}

// loopbackURL reads an http URL whose host is a loopback address (an IP
// literal, so that no resolver decides where it goes); empty is allowed.
func (r *reader) loopbackURL(name string) string {
	v, ok := r.get(name)
	if !ok || v == "" {
		return ""
	}
	u, err := neturl.Parse(v)
	if err != nil || u.Scheme != "http" || u.User != nil {
		r.fail(name, v, "want an http URL on a loopback address")
		return ""
	}
	if a, err := netip.ParseAddr(u.Hostname()); err != nil || !a.IsLoopback() || u.Port() == "" {
		r.fail(name, v, "want an http URL on a loopback address and port, such as http://127.0.0.1:8012")
		return ""
	}
	return v
}

// httpURL reads an absolute http URL with no user information.
func (r *reader) httpURL(name, def string) string {
	v, ok := r.get(name)
	if !ok {
		return def
	}
	u, err := neturl.Parse(v)
	if err != nil || u.Scheme != "http" || u.Host == "" || u.User != nil {
		r.fail(name, v, "want an absolute http URL such as http://event-forwarding-proxy-00001-private")
		return def
	}
	return v
}

// revisionPrivateURL is the address of the Knative revision's private
// Service (K_REVISION, which Knative sets, with -private), whose port 80
// leads to queue-proxy; "" outside Knative. A short name: the pod's DNS
// search list completes it in its own namespace.
func revisionPrivateURL(r *reader) string {
	rev, ok := r.get("K_REVISION")
	if !ok {
		return ""
	}
	return "http://" + rev + "-private"
}

// namespace reads one Kubernetes namespace name; empty is allowed.
func (r *reader) namespace(name, def string) string {
	v, ok := r.get(name)
	if !ok {
		return def
	}
	if v != "" && !ValidNamespace(v) {
		r.fail(name, v, "want a namespace name")
		return def
	}
	return v
}

// namespaces reads a list of Kubernetes namespace names.
func (r *reader) namespaces(name string, def []string) []string {
	v, ok := r.get(name)
	if !ok {
		return def
	}
	out := []string{}
	for f := range strings.SplitSeq(v, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		if !ValidNamespace(f) {
			r.fail(name, f, "want namespace names")
		}
		out = append(out, f)
	}
	return out
}

// ValidNamespace reports whether s is a valid Kubernetes namespace name (a
// DNS label).
func ValidNamespace(s string) bool {
	if s == "" || len(s) > 63 || s[0] == '-' || s[len(s)-1] == '-' {
		return false
	}
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

// ratio reads a number in [0, 1].
func (r *reader) ratio(name string, def float64) float64 {
	v, ok := r.get(name)
	if !ok {
		return def
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || !(f >= 0 && f <= 1) {
		r.fail(name, v, "want a number between 0 and 1")
		return def
	}
	return f
}

func (r *reader) oneOf(name string, choices ...string) string {
	v, ok := r.get(name)
	if !ok {
		return choices[0]
	}
	for _, c := range choices {
		if strings.EqualFold(v, c) {
			return c
		}
	}
	r.fail(name, v, "want one of "+strings.Join(choices, ", "))
	return choices[0]
}

func (r *reader) list(name string) []string {
	v, ok := r.get(name)
	if !ok {
		return nil
	}
	var out []string
	for _, f := range strings.Split(v, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

func (r *reader) hosts(name string, def []string) []string {
	v, ok := r.get(name)
	if !ok {
		return def
	}
	hosts, err := ParseHostPatterns(v)
	var bad *HostPatternError
	if errors.As(err, &bad) {
		r.fail(name, bad.Pattern, hostPatternsWanted)
		return def
	}
	if hosts == nil {
		return def // only commas
	}
	return hosts
}

const hostPatternsWanted = "want host patterns such as *.svc.cluster.local or an exact host name"

// HostPatternError is the pattern ParseHostPatterns refused.
type HostPatternError struct{ Pattern string }

func (e *HostPatternError) Error() string {
	return strconv.Quote(e.Pattern) + ": " + hostPatternsWanted
}

// ParseHostPatterns reads a comma-separated list of host patterns, the
// syntax of FORWARD_ALLOWED_HOSTS and FORWARD_H2C_HOSTS: "*.suffix", an
// exact host name, or "*". Patterns are lower-cased and lose a trailing
// dot; empty items are skipped, so a list of commas alone is nil. An
// invalid pattern is a *HostPatternError.
func ParseHostPatterns(v string) ([]string, error) {
	var out []string
	for _, f := range strings.Split(v, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		h := strings.TrimSuffix(strings.ToLower(f), ".")
		wild := strings.HasPrefix(h, "*") && h != "*" && !strings.HasPrefix(h, "*.")
		if wild || strings.Contains(h[min(1, len(h)):], "*") || strings.ContainsAny(h, "/:@ ") || h == "" {
			return nil, &HostPatternError{Pattern: f}
		}
		out = append(out, h)
	}
	return out, nil
}

// kubernetesAPI parses KUBERNETES_SERVICE_HOST, which Kubernetes sets to
// the API's ClusterIP in every pod; anything else (unset, a name) is no
// address.
func kubernetesAPI(lookup func(string) (string, bool)) netip.Addr {
	v, _ := lookup("KUBERNETES_SERVICE_HOST")
	a, err := netip.ParseAddr(strings.TrimSpace(v))
	if err != nil {
		return netip.Addr{}
	}
	return a.Unmap().WithZone("")
}

func (r *reader) cidrs(name string) []netip.Prefix {
	var out []netip.Prefix
	for _, f := range r.list(name) {
		p, err := netip.ParsePrefix(f)
		if err != nil {
			r.fail(name, f, "want CIDR ranges such as 10.0.0.0/8 or fd00::/8")
			continue
		}
		out = append(out, p.Masked())
	}
	return out
}
