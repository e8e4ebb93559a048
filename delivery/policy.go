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

package delivery

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"syscall"
)

// ErrDestinationDenied is wrapped by every refusal of the destination
// policy, at the header check and at dial time alike.
var ErrDestinationDenied = errors.New("destination denied")

// builtinDenied are never dialed unless an allowed range carves them out:
// loopback, link-local (cloud metadata), unspecified, multicast, broadcast.
var builtinDenied = []netip.Prefix{
	netip.MustParsePrefix("127.0.0.0/8"),
	netip.MustParsePrefix("0.0.0.0/8"),
	netip.MustParsePrefix("169.254.0.0/16"),
	netip.MustParsePrefix("224.0.0.0/4"),
	netip.MustParsePrefix("255.255.255.255/32"),
	netip.MustParsePrefix("::1/128"),
	netip.MustParsePrefix("::/128"),
	netip.MustParsePrefix("fe80::/10"),
	netip.MustParsePrefix("ff00::/8"),
	netip.MustParsePrefix("fd00:ec2::254/128"),
}

// Policy decides which addresses the proxy may connect to. The zero value
// denies only the built-in list.
type Policy struct {
	// Allowed are exceptions to the built-in list and to Self.
	Allowed []netip.Prefix
	// Denied are refused on top of the built-in list, with no exception.
	Denied []netip.Prefix
	// Self are the proxy's own addresses.
	Self []netip.Addr
	// API is the Kubernetes API's ClusterIP, refused like Denied (no
	// exception: an allowed service range must not open the API). Ignored
	// when invalid.
	API netip.Addr
}

// CheckAddr returns an error wrapping ErrDestinationDenied when a may not
// be dialed. IPv6 forms that embed an IPv4 address (mapped, NAT64, 6to4,
// Teredo) are judged by the address they embed as well.
func (p *Policy) CheckAddr(a netip.Addr) error {
	for _, c := range candidates(a) {
		if err := p.check(c); err != nil {
			return fmt.Errorf("%w: %s: %w", ErrDestinationDenied, a, err)
		}
	}
	return nil
}

func (p *Policy) check(a netip.Addr) error {
	if contains(p.Denied, a) {
		return errors.New("in a denied range")
	}
	if p.API.IsValid() && p.API == a {
		return errors.New("the Kubernetes API (KUBERNETES_SERVICE_HOST)")
	}
	if contains(p.Allowed, a) {
		return nil
	}
	if contains(builtinDenied, a) {
		return errors.New("loopback, link-local, unspecified or multicast")
	}
	for _, s := range p.Self {
		if s.Unmap() == a {
			return errors.New("one of the proxy's own addresses")
		}
	}
	return nil
}

// Control is a net.Dialer Control hook: it runs on every socket before it
// connects, with the address actually being dialed, so that DNS answers
// (rebinding included) are checked, not only names.
func (p *Policy) Control(_, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("%w: cannot parse dialed address %q", ErrDestinationDenied, address)
	}
	return p.CheckAddr(ap.Addr())
}

// AllowsLiteral reports whether an IP-literal host lies inside Allowed, in
// which case it needs no host pattern.
func (p *Policy) AllowsLiteral(a netip.Addr) bool {
	return contains(p.Allowed, a.Unmap())
}

var (
	nat64   = netip.MustParsePrefix("64:ff9b::/96")
	nat64l  = netip.MustParsePrefix("64:ff9b:1::/48")  // local-use NAT64 (RFC 8215), IPv4 in the last 32 bits
	siit    = netip.MustParsePrefix("::ffff:0:0:0/96") // IPv4-translated (RFC 2765)
	sixTo4  = netip.MustParsePrefix("2002::/16")
	teredo  = netip.MustParsePrefix("2001::/32")
	v4compa = netip.MustParsePrefix("::/96")
)

// candidates returns a and every IPv4 address it embeds.
func candidates(a netip.Addr) []netip.Addr {
	a = a.WithZone("")
	if a.Is4In6() {
		return []netip.Addr{a.Unmap()}
	}
	out := []netip.Addr{a}
	if !a.Is6() {
		return out
	}
	b := a.As16()
	switch {
	case nat64.Contains(a), nat64l.Contains(a), siit.Contains(a),
		v4compa.Contains(a) && !a.IsUnspecified() && a != netip.IPv6Loopback():
		out = append(out, netip.AddrFrom4([4]byte(b[12:16])))
	case sixTo4.Contains(a):
		out = append(out, netip.AddrFrom4([4]byte(b[2:6])))
	case teredo.Contains(a):
		out = append(out, netip.AddrFrom4([4]byte{b[12] ^ 0xff, b[13] ^ 0xff, b[14] ^ 0xff, b[15] ^ 0xff}))
	}
	return out
}

func contains(ps []netip.Prefix, a netip.Addr) bool {
	for _, p := range ps {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// LocalAddrs returns the addresses of this host's interfaces other than
// loopback (which the built-in list denies already).
func LocalAddrs() []netip.Addr {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return nil
	}
	var out []netip.Addr
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok {
			if ip, ok := netip.AddrFromSlice(n.IP); ok && !ip.Unmap().IsLoopback() {
				out = append(out, ip.Unmap())
			}
		}
	}
	return out
}

// HostAllowed reports whether a lower-cased host without port matches one
// of the patterns (MatchHost). The Kubernetes API (kubernetes,
// kubernetes.default and their longer forms) never matches.
func HostAllowed(host string, patterns []string) bool {
	if host == "kubernetes" || host == "kubernetes.default" || strings.HasPrefix(host, "kubernetes.default.") {
		return false
	}
	return MatchHost(host, patterns)
}

// MatchHost reports whether a lower-cased host without port matches one
// of the patterns (config.ParseHostPatterns reads them): "*.suffix"
// matches any name ending in ".suffix", "*" matches every name, anything
// else matches exactly.
func MatchHost(host string, patterns []string) bool {
	for _, p := range patterns {
		switch {
		case p == "*":
			return true
		case strings.HasPrefix(p, "*."):
			if strings.HasSuffix(host, p[1:]) && len(host) > len(p)-1 {
				return true
			}
		case host == p:
			return true
		}
	}
	return false
}
