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

package proxy

import (
	"errors"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"

	"knative.dev/event-forwarding-proxy/config"
	"knative.dev/event-forwarding-proxy/delivery"
)

// errMissingDestination and errBadDestination are the two ways a
// Kn-Forward-To header can be unusable.
var (
	errMissingDestination = errors.New("the " + delivery.HeaderForwardTo + " header is missing")
	errBadDestination     = errors.New("the " + delivery.HeaderForwardTo + " header is not an absolute http(s) URL")
)

// parseDestination validates the Kn-Forward-To values of a request: exactly
// one absolute http or https URL with a host, no user information, no
// fragment and no control characters. The host comes back lower-cased and
// without a trailing dot.
func parseDestination(values []string) (*url.URL, error) {
	switch len(values) {
	case 0:
		return nil, errMissingDestination
	case 1:
	default:
		return nil, wrapBad("it is repeated")
	}
	raw := values[0]
	if raw == "" {
		return nil, errMissingDestination
	}
	if strings.ContainsFunc(raw, func(r rune) bool { return r < 0x21 || r == 0x7f }) {
		return nil, wrapBad("it contains spaces or control characters")
	}
	if strings.Contains(raw, "#") {
		return nil, wrapBad("it has a fragment")
	}
	u, err := url.Parse(raw)
	if err != nil {
		return nil, wrapBad("it does not parse")
	}
	u.Scheme = strings.ToLower(u.Scheme)
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, wrapBad("the scheme is not http or https")
	case u.Opaque != "":
		return nil, wrapBad("it is not a hierarchical URL")
	case u.User != nil:
		return nil, wrapBad("it carries user information")
	}
	host := strings.TrimSuffix(strings.ToLower(u.Hostname()), ".")
	if host == "" {
		return nil, wrapBad("it has no host")
	}
	port := u.Port()
	if port != "" {
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
			return nil, wrapBad("its port is out of range")
		}
	}
	if strings.Contains(host, ":") { // IPv6 literal: must parse as one
		ip, err := netip.ParseAddr(host)
		if err != nil {
			return nil, wrapBad("its IPv6 address does not parse")
		}
		if !isZoneID(ip.Zone()) {
			return nil, wrapBad("its IPv6 zone is not made of RFC 6874's unreserved characters")
		}
	} else if ip, ok := parseLegacyIPv4(host); ok {
		// "2130706433", "0x7f000001" and "127.1" are the addresses they
		// spell: judged, dialed and sent as such.
		host = ip.String()
	} else if !isHostName(host) {
		return nil, wrapBad("its host is not a valid DNS name or IPv4 address")
	}
	u.Host = hostPort(host, port)
	return u, nil
}

// isZoneID reports whether z, an IPv6 zone, is made of the unreserved
// characters RFC 6874 allows in a URL (empty: no zone).
func isZoneID(z string) bool {
	for i := range len(z) {
		c := z[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '.' || c == '_' || c == '~') {
			return false
		}
	}
	return true
}

func hostPort(host, port string) string {
	if port == "" {
		if strings.Contains(host, ":") {
			return "[" + host + "]"
		}
		return host
	}
	return net.JoinHostPort(host, port)
}

func wrapBad(why string) error {
	return &destinationError{why: why}
}

// destinationError says why a Kn-Forward-To value is bad.
type destinationError struct{ why string }

func (e *destinationError) Error() string { return errBadDestination.Error() + ": " + e.why }
func (e *destinationError) Unwrap() error { return errBadDestination }

// destinationKey is the per-destination admission key: host and port,
// with the scheme's default port made explicit.
func destinationKey(u *url.URL) string {
	if u.Port() != "" {
		return u.Host
	}
	if u.Scheme == "https" {
		return hostPort(u.Hostname(), "443")
	}
	return hostPort(u.Hostname(), "80")
}

// clusterNamespace returns the namespace of a cluster-local service host
// (name.namespace.svc or name.namespace.svc.<cluster domain>), or "".
func clusterNamespace(host string) string {
	labels := strings.Split(host, ".")
	if len(labels) >= 3 && labels[2] == "svc" && isDNSLabel(labels[1]) {
		return labels[1]
	}
	return ""
}

// parseLegacyIPv4 reads the IPv4 spellings that resolvers accept besides
// the dotted quad, as the WHATWG URL standard does: one to four parts,
// each decimal, octal (leading 0) or hexadecimal (0x), the last filling the
// remaining bytes. A host whose last label is not a number is a name.
func parseLegacyIPv4(host string) (netip.Addr, bool) {
	parts := strings.Split(host, ".")
	if len(parts) > 4 {
		return netip.Addr{}, false
	}
	var nums []uint64
	for _, p := range parts {
		n, ok := parseIPv4Part(p)
		if !ok {
			return netip.Addr{}, false
		}
		nums = append(nums, n)
	}
	last := nums[len(nums)-1]
	if last >= 1<<(8*(5-len(nums))) {
		return netip.Addr{}, false
	}
	var v uint64
	for i, n := range nums[:len(nums)-1] {
		if n > 255 {
			return netip.Addr{}, false
		}
		v |= n << (8 * (3 - i))
	}
	v |= last
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}), true
}

func parseIPv4Part(p string) (uint64, bool) {
	base := 10
	switch {
	case p == "":
		return 0, false
	case len(p) > 2 && (p[:2] == "0x" || p[:2] == "0X"):
		base, p = 16, p[2:]
	case len(p) > 1 && p[0] == '0':
		base, p = 8, p[1:]
	}
	n, err := strconv.ParseUint(p, base, 32)
	return n, err == nil
}

// isHostName reports whether host (lower-case) is a DNS name: labels of
// letters, digits, '-' and '_', none empty or longer than 63, 253 in all.
func isHostName(host string) bool {
	if len(host) > 253 {
		return false
	}
	for label := range strings.SplitSeq(host, ".") {
		if label == "" || len(label) > 63 {
			return false
		}
		for i := range len(label) {
			c := label[i]
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return false
			}
		}
	}
	return true
}

// isDNSLabel reports whether s is a valid Kubernetes namespace name.
func isDNSLabel(s string) bool { return config.ValidNamespace(s) }

// prefersAsync reports whether a Prefer header asks for respond-async.
func prefersAsync(h http.Header) bool {
	for _, v := range h.Values(delivery.HeaderPrefer) {
		for pref := range strings.SplitSeq(v, ",") {
			tok, _, _ := strings.Cut(pref, ";")
			tok, _, _ = strings.Cut(tok, "=")
			if strings.EqualFold(strings.TrimSpace(tok), delivery.PreferRespondAsync) {
				return true
			}
		}
	}
	return false
}
