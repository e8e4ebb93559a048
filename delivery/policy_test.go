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

package delivery_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"sync/atomic"
	"testing"

	"knative.dev/event-forwarding-proxy/delivery"
)

// teredo returns a Teredo address (2001:0::/32) whose client part hides v4,
// stored bit-inverted as RFC 4380 prescribes.
func teredo(v4 string) netip.Addr {
	c := netip.MustParseAddr(v4).As4()
	b := netip.MustParseAddr("2001:0:4136:e378:8000:63bf::").As16()
	for i := range 4 {
		b[12+i] = c[i] ^ 0xff
	}
	return netip.AddrFrom16(b)
}

func prefixes(ss ...string) []netip.Prefix {
	var out []netip.Prefix
	for _, s := range ss {
		out = append(out, netip.MustParsePrefix(s))
	}
	return out
}

func TestTeredoHelper(t *testing.T) {
	// The XOR form of 127.0.0.1 is 80.ff.ff.fe.
	if got, want := teredo("127.0.0.1"), netip.MustParseAddr("2001:0:4136:e378:8000:63bf:80ff:fffe"); got != want {
		t.Fatalf("teredo(127.0.0.1) = %v, want %v", got, want)
	}
}

func TestPolicyCheckAddr(t *testing.T) {
	tests := []struct {
		name   string
		policy delivery.Policy
		addr   netip.Addr
		denied bool
	}{
		{name: "loopback v4", addr: netip.MustParseAddr("127.0.0.1"), denied: true},
		{name: "loopback v4 end of range", addr: netip.MustParseAddr("127.255.255.254"), denied: true},
		{name: "loopback v6", addr: netip.MustParseAddr("::1"), denied: true},
		{name: "cloud metadata", addr: netip.MustParseAddr("169.254.169.254"), denied: true},
		{name: "link-local v6", addr: netip.MustParseAddr("fe80::1"), denied: true},
		{name: "link-local v6 with zone", addr: netip.MustParseAddr("fe80::1%eth0"), denied: true},
		{name: "AWS metadata v6", addr: netip.MustParseAddr("fd00:ec2::254"), denied: true},
		{name: "unspecified v4", addr: netip.MustParseAddr("0.0.0.0"), denied: true},
		{name: "this network", addr: netip.MustParseAddr("0.1.2.3"), denied: true},
		{name: "unspecified v6", addr: netip.MustParseAddr("::"), denied: true},
		{name: "multicast v4", addr: netip.MustParseAddr("224.0.0.1"), denied: true},
		{name: "multicast v6", addr: netip.MustParseAddr("ff02::1"), denied: true},
		{name: "broadcast", addr: netip.MustParseAddr("255.255.255.255"), denied: true},
		{name: "IPv4-mapped loopback", addr: netip.MustParseAddr("::ffff:127.0.0.1"), denied: true},
		{name: "IPv4-mapped metadata", addr: netip.MustParseAddr("::ffff:169.254.169.254"), denied: true},
		{name: "IPv4-compatible loopback", addr: netip.MustParseAddr("::7f00:1"), denied: true},
		{name: "NAT64 loopback", addr: netip.MustParseAddr("64:ff9b::7f00:1"), denied: true},
		{name: "NAT64 metadata", addr: netip.MustParseAddr("64:ff9b::a9fe:a9fe"), denied: true},
		{name: "6to4 loopback", addr: netip.MustParseAddr("2002:7f00:1::"), denied: true},
		{name: "6to4 metadata", addr: netip.MustParseAddr("2002:a9fe:a9fe::1"), denied: true},
		{name: "Teredo loopback", addr: teredo("127.0.0.1"), denied: true},
		{name: "Teredo metadata", addr: teredo("169.254.169.254"), denied: true},

		{name: "public v4", addr: netip.MustParseAddr("8.8.8.8")},
		{name: "private 10/8", addr: netip.MustParseAddr("10.1.2.3")},
		{name: "private 172.16/12", addr: netip.MustParseAddr("172.16.0.1")},
		{name: "private 192.168/16", addr: netip.MustParseAddr("192.168.1.1")},
		{name: "shared address space", addr: netip.MustParseAddr("100.64.0.1")},
		{name: "unique local v6", addr: netip.MustParseAddr("fd00::1")},
		{name: "public v6", addr: netip.MustParseAddr("2001:4860:4860::8888")},
		{name: "IPv4-mapped public", addr: netip.MustParseAddr("::ffff:8.8.8.8")},
		{name: "NAT64 public", addr: netip.MustParseAddr("64:ff9b::808:808")},
		{name: "6to4 public", addr: netip.MustParseAddr("2002:808:808::")},
		{name: "Teredo public", addr: teredo("8.8.8.8")},

		{name: "allowed carve-out", policy: delivery.Policy{Allowed: prefixes("127.0.0.0/8")}, addr: netip.MustParseAddr("127.0.0.1")},
		{name: "allowed carve-out, mapped", policy: delivery.Policy{Allowed: prefixes("127.0.0.0/8")}, addr: netip.MustParseAddr("::ffff:127.0.0.1")},
		{name: "allowed carve-out, NAT64", policy: delivery.Policy{Allowed: prefixes("127.0.0.0/8")}, addr: netip.MustParseAddr("64:ff9b::7f00:1")},
		{name: "allowed v4 range leaves ::1 denied", policy: delivery.Policy{Allowed: prefixes("127.0.0.0/8")}, addr: netip.MustParseAddr("::1"), denied: true},
		{name: "allowed range leaves metadata denied", policy: delivery.Policy{Allowed: prefixes("127.0.0.0/8")}, addr: netip.MustParseAddr("169.254.169.254"), denied: true},
		{name: "denied overrides allowed", policy: delivery.Policy{Allowed: prefixes("127.0.0.0/8"), Denied: prefixes("127.0.0.1/32")}, addr: netip.MustParseAddr("127.0.0.1"), denied: true},
		{name: "denied overrides allowed, mapped", policy: delivery.Policy{Allowed: prefixes("127.0.0.0/8"), Denied: prefixes("127.0.0.1/32")}, addr: netip.MustParseAddr("::ffff:127.0.0.1"), denied: true},
		{name: "denied leaves the rest of allowed", policy: delivery.Policy{Allowed: prefixes("127.0.0.0/8"), Denied: prefixes("127.0.0.1/32")}, addr: netip.MustParseAddr("127.0.0.2")},
		{name: "denied private range", policy: delivery.Policy{Denied: prefixes("10.0.0.0/8")}, addr: netip.MustParseAddr("10.1.2.3"), denied: true},
		{name: "denied private range, mapped", policy: delivery.Policy{Denied: prefixes("10.0.0.0/8")}, addr: netip.MustParseAddr("::ffff:10.1.2.3"), denied: true},
		{name: "denied private range, NAT64", policy: delivery.Policy{Denied: prefixes("10.0.0.0/8")}, addr: netip.MustParseAddr("64:ff9b::a01:203"), denied: true},
		{name: "denied private range, 6to4", policy: delivery.Policy{Denied: prefixes("10.0.0.0/8")}, addr: netip.MustParseAddr("2002:a01:203::"), denied: true},
		{name: "denied private range, Teredo", policy: delivery.Policy{Denied: prefixes("10.0.0.0/8")}, addr: teredo("10.1.2.3"), denied: true},
		{name: "self", policy: delivery.Policy{Self: []netip.Addr{netip.MustParseAddr("10.0.0.5")}}, addr: netip.MustParseAddr("10.0.0.5"), denied: true},
		{name: "self, mapped", policy: delivery.Policy{Self: []netip.Addr{netip.MustParseAddr("10.0.0.5")}}, addr: netip.MustParseAddr("::ffff:10.0.0.5"), denied: true},
		{name: "self given mapped", policy: delivery.Policy{Self: []netip.Addr{netip.MustParseAddr("::ffff:10.0.0.5")}}, addr: netip.MustParseAddr("10.0.0.5"), denied: true},
		{name: "self v6", policy: delivery.Policy{Self: []netip.Addr{netip.MustParseAddr("fd00::5")}}, addr: netip.MustParseAddr("fd00::5"), denied: true},
		{name: "neighbour of self", policy: delivery.Policy{Self: []netip.Addr{netip.MustParseAddr("10.0.0.5")}}, addr: netip.MustParseAddr("10.0.0.6")},
		{name: "allowed overrides self", policy: delivery.Policy{Allowed: prefixes("10.0.0.0/24"), Self: []netip.Addr{netip.MustParseAddr("10.0.0.5")}}, addr: netip.MustParseAddr("10.0.0.5")},
		{name: "Kubernetes API", policy: delivery.Policy{API: netip.MustParseAddr("10.96.0.1")}, addr: netip.MustParseAddr("10.96.0.1"), denied: true},
		{name: "Kubernetes API, mapped", policy: delivery.Policy{API: netip.MustParseAddr("10.96.0.1")}, addr: netip.MustParseAddr("::ffff:10.96.0.1"), denied: true},
		{name: "Kubernetes API, NAT64", policy: delivery.Policy{API: netip.MustParseAddr("10.96.0.1")}, addr: netip.MustParseAddr("64:ff9b::a60:1"), denied: true},
		{name: "Kubernetes API v6", policy: delivery.Policy{API: netip.MustParseAddr("fd00:10:96::1")}, addr: netip.MustParseAddr("fd00:10:96::1"), denied: true},
		{name: "Kubernetes API, an allowed service range does not open it", policy: delivery.Policy{Allowed: prefixes("10.96.0.0/12"), API: netip.MustParseAddr("10.96.0.1")}, addr: netip.MustParseAddr("10.96.0.1"), denied: true},
		{name: "next to the Kubernetes API", policy: delivery.Policy{API: netip.MustParseAddr("10.96.0.1")}, addr: netip.MustParseAddr("10.96.0.2")},
		{name: "no Kubernetes API known", addr: netip.MustParseAddr("10.96.0.1")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.policy.CheckAddr(tt.addr)
			if !tt.denied {
				if err != nil {
					t.Fatalf("CheckAddr(%v) = %v, want allowed", tt.addr, err)
				}
				return
			}
			if err == nil {
				t.Fatalf("CheckAddr(%v) = nil, want denied", tt.addr)
			}
			if !errors.Is(err, delivery.ErrDestinationDenied) {
				t.Errorf("CheckAddr(%v) = %v, does not wrap ErrDestinationDenied", tt.addr, err)
			}
		})
	}
}

func TestPolicyControl(t *testing.T) {
	tests := []struct {
		name    string
		address string
		denied  bool
	}{
		{name: "loopback v4", address: "127.0.0.1:80", denied: true},
		{name: "loopback v6", address: "[::1]:80", denied: true},
		{name: "link-local with zone", address: "[fe80::1%lo]:80", denied: true},
		{name: "mapped loopback", address: "[::ffff:127.0.0.1]:8080", denied: true},
		{name: "public", address: "8.8.8.8:53"},
		{name: "private v6", address: "[fd00::1]:443"},
		{name: "host name", address: "example.com:80", denied: true},
		{name: "no port", address: "8.8.8.8", denied: true},
		{name: "garbage", address: "not an address", denied: true},
	}
	p := &delivery.Policy{}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := p.Control("tcp", tt.address, nil)
			if got := errors.Is(err, delivery.ErrDestinationDenied); got != tt.denied {
				t.Errorf("Control(%q) = %v, denied = %v, want %v", tt.address, err, got, tt.denied)
			}
		})
	}
}

func TestPolicyAllowsLiteral(t *testing.T) {
	allow := &delivery.Policy{Allowed: prefixes("127.0.0.0/8", "fd00::/8")}
	tests := []struct {
		name   string
		policy *delivery.Policy
		addr   string
		want   bool
	}{
		{name: "inside", policy: allow, addr: "127.0.0.1", want: true},
		{name: "inside, mapped", policy: allow, addr: "::ffff:127.0.0.1", want: true},
		{name: "inside v6", policy: allow, addr: "fd00::1", want: true},
		{name: "outside", policy: allow, addr: "8.8.8.8"},
		{name: "zero policy", policy: &delivery.Policy{}, addr: "10.1.2.3"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.policy.AllowsLiteral(netip.MustParseAddr(tt.addr)); got != tt.want {
				t.Errorf("AllowsLiteral(%s) = %v, want %v", tt.addr, got, tt.want)
			}
		})
	}
}

func TestHostAllowed(t *testing.T) {
	cluster := []string{"*.svc.cluster.local", "*.svc"}
	tests := []struct {
		name     string
		host     string
		patterns []string
		want     bool
	}{
		{name: "cluster-local service", host: "broker-ingress.knative-eventing.svc.cluster.local", patterns: cluster, want: true},
		{name: "short service name", host: "sink.ns.svc", patterns: cluster, want: true},
		{name: "svc alone", host: "svc", patterns: cluster},
		{name: "dot svc alone", host: ".svc", patterns: cluster},
		{name: "evil-svc", host: "evil-svc", patterns: cluster},
		{name: "svc.cluster.local alone", host: "svc.cluster.local", patterns: cluster},
		{name: "cluster suffix then more", host: "sink.ns.svc.cluster.local.evil.com", patterns: cluster},
		{name: "outside host", host: "example.com", patterns: cluster},
		{name: "kubernetes API, long form", host: "kubernetes.default.svc.cluster.local", patterns: cluster},
		{name: "kubernetes API, svc form", host: "kubernetes.default.svc", patterns: cluster},
		{name: "kubernetes API, with a star", host: "kubernetes.default.svc.cluster.local", patterns: []string{"*"}},
		{name: "kubernetes API, short form exactly listed", host: "kubernetes.default", patterns: []string{"kubernetes.default"}},
		{name: "kubernetes API, bare service name under a star", host: "kubernetes", patterns: []string{"*"}},
		{name: "kubernetes-like name in another namespace", host: "kubernetes.defaults.svc", patterns: cluster, want: true},
		{name: "star", host: "anything.example", patterns: []string{"*"}, want: true},
		{name: "exact", host: "example.com", patterns: []string{"example.com"}, want: true},
		{name: "exact does not cover subdomains", host: "www.example.com", patterns: []string{"example.com"}},
		{name: "exact is not a prefix", host: "example.com.evil", patterns: []string{"example.com"}},
		{name: "bare svc pattern matches only svc", host: "svc", patterns: []string{"svc"}, want: true},
		{name: "bare svc pattern is not a suffix", host: "a.svc", patterns: []string{"svc"}},
		{name: "suffix pattern spans levels", host: "a.b.example.com", patterns: []string{"*.example.com"}, want: true},
		{name: "suffix pattern needs a label", host: "example.com", patterns: []string{"*.example.com"}},
		{name: "no patterns", host: "sink.ns.svc"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := delivery.HostAllowed(tt.host, tt.patterns); got != tt.want {
				t.Errorf("HostAllowed(%q, %q) = %v, want %v", tt.host, tt.patterns, got, tt.want)
			}
		})
	}
}

// TestH2CTo: h2c with prior knowledge goes to plain-http destinations
// whose host matches FORWARD_H2C_HOSTS' patterns, matched as
// FORWARD_ALLOWED_HOSTS' are, and to nothing else.
func TestH2CTo(t *testing.T) {
	cluster := []string{"*.svc.cluster.local", "sink.ns.svc"}
	tests := []struct {
		name, url string
		patterns  []string
		want      bool
	}{
		{name: "suffix pattern", url: "http://sink.ns.svc.cluster.local/", patterns: cluster, want: true},
		{name: "exact pattern, any port", url: "http://sink.ns.svc:8080/x", patterns: cluster, want: true},
		{name: "host in capitals, trailing dot", url: "http://SINK.ns.svc./", patterns: cluster, want: true},
		{name: "IP literal named exactly", url: "http://127.0.0.2:9/", patterns: []string{"127.0.0.2"}, want: true},
		{name: "star", url: "http://anything.example/", patterns: []string{"*"}, want: true},
		{name: "not listed", url: "http://other.ns.svc/", patterns: cluster},
		{name: "exact does not cover subdomains", url: "http://a.sink.ns.svc/", patterns: cluster},
		{name: "no patterns", url: "http://sink.ns.svc/"},
		{name: "https negotiates with ALPN", url: "https://sink.ns.svc/", patterns: []string{"*"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u, err := url.Parse(tt.url)
			if err != nil {
				t.Fatal(err)
			}
			if got := delivery.H2CTo(u, tt.patterns); got != tt.want {
				t.Errorf("H2CTo(%s, %q) = %v, want %v", tt.url, tt.patterns, got, tt.want)
			}
		})
	}
}

// countingListener counts the connections it accepts.
type countingListener struct {
	net.Listener
	accepted atomic.Int64
}

func (l *countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.accepted.Add(1)
	}
	return c, err
}

// TestPolicyControlRefusesDial dials a real loopback server through the
// transports: the policy must refuse before any connection is made, and the
// refusal must stay recognisable through the transport's error wrapping.
func TestPolicyControlRefusesDial(t *testing.T) {
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "reached")
	}))
	srv.Config.Protocols = new(http.Protocols)
	srv.Config.Protocols.SetHTTP1(true)
	srv.Config.Protocols.SetUnencryptedHTTP2(true)
	ln := &countingListener{Listener: srv.Listener}
	srv.Listener = ln
	srv.Start()
	t.Cleanup(srv.Close)

	tests := []struct {
		name       string
		policy     *delivery.Policy
		wantDenied bool
	}{
		{name: "zero policy denies loopback", policy: &delivery.Policy{}, wantDenied: true},
		{name: "denied on top of allowed", policy: &delivery.Policy{Allowed: prefixes("127.0.0.0/8"), Denied: prefixes("127.0.0.1/32")}, wantDenied: true},
		{name: "allowed loopback", policy: &delivery.Policy{Allowed: prefixes("127.0.0.0/8")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			trs := delivery.NewTransports(delivery.TransportParams{Control: tt.policy.Control})
			t.Cleanup(trs.CloseIdleConnections)
			for _, tr := range []struct {
				name string
				rt   http.RoundTripper
			}{{"http1", trs.HTTP1}, {"h2c", trs.H2C}} {
				before := ln.accepted.Load()
				req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, srv.URL, nil)
				if err != nil {
					t.Fatal(err)
				}
				resp, err := (&http.Client{Transport: tr.rt}).Do(req)
				accepted := ln.accepted.Load() - before
				if tt.wantDenied {
					if err == nil {
						resp.Body.Close()
						t.Fatalf("%s: request succeeded with %s, want a denied dial", tr.name, resp.Status)
					}
					if !errors.Is(err, delivery.ErrDestinationDenied) {
						t.Errorf("%s: error %v (%T) does not wrap ErrDestinationDenied", tr.name, err, err)
					}
					var opErr *net.OpError
					if !errors.As(err, &opErr) || opErr.Op != "dial" {
						t.Errorf("%s: error %v carries no dial *net.OpError", tr.name, err)
					}
					if accepted != 0 {
						t.Errorf("%s: server accepted %d connections, want 0", tr.name, accepted)
					}
					continue
				}
				if err != nil {
					t.Fatalf("%s: request error: %v", tr.name, err)
				}
				body, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				if err != nil || string(body) != "reached" {
					t.Errorf("%s: body %q, %v; want %q", tr.name, body, err, "reached")
				}
				if accepted != 1 {
					t.Errorf("%s: server accepted %d connections, want 1", tr.name, accepted)
				}
			}
		})
	}
}

// TestPolicyTranslatedForms: IPv4-translated (SIIT) and local-use NAT64
// addresses are judged by the IPv4 address they carry.
func TestPolicyTranslatedForms(t *testing.T) {
	p := &delivery.Policy{}
	for _, a := range []string{"::ffff:0:127.0.0.1", "::ffff:0:169.254.169.254", "64:ff9b:1::7f00:1", "64:ff9b:1:ffff::a9fe:a9fe"} {
		if err := p.CheckAddr(netip.MustParseAddr(a)); !errors.Is(err, delivery.ErrDestinationDenied) {
			t.Errorf("CheckAddr(%s) = %v, want denied", a, err)
		}
	}
	if err := p.CheckAddr(netip.MustParseAddr("::ffff:0:8.8.8.8")); err != nil {
		t.Errorf("a translated public address is denied: %v", err)
	}
}
