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
	"bufio"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"

	"knative.dev/event-forwarding-proxy/delivery"
	"knative.dev/event-forwarding-proxy/proxy/proxytest"
)

// hostileEnv is the proxy of TestHostileDestinations: a host pattern that
// names loopback (localhost) and the cluster's, and no FORWARD_ALLOWED_CIDRS,
// so that every loopback address is denied as in production.
var hostileEnv = map[string]string{
	"FORWARD_ALLOWED_CIDRS": "",
	"FORWARD_ALLOWED_HOSTS": "localhost,*.svc.cluster.local",
}

// How a hostile request is sent.
const (
	viaHTTP1   = ""        // Go's HTTP/1.1 client
	viaH2C     = "h2c"     // Go's HTTP/2 client, prior knowledge
	viaRaw     = "raw"     // bytes written on a TCP connection: what Go's client refuses to send
	viaHandler = "handler" // straight into the handler chain: what no server lets through
)

// fakeClusterDNS are names under *.svc.cluster.local (allowed by the host
// patterns) that the fake cluster DNS resolves to denied addresses.
var fakeClusterDNS = map[string][][]netip.Addr{
	"loopback.ns.svc.cluster.local":  {{netip.MustParseAddr("127.0.0.1")}},
	"loopback6.ns.svc.cluster.local": {{netip.MustParseAddr("::1")}},
	"mapped.ns.svc.cluster.local":    {{netip.MustParseAddr("::ffff:127.0.0.1")}},
	"zero.ns.svc.cluster.local":      {{netip.MustParseAddr("0.0.0.0")}},
	"zero6.ns.svc.cluster.local":     {{netip.MustParseAddr("::")}},
	"metadata.ns.svc.cluster.local":  {{netip.MustParseAddr("169.254.169.254")}},
	"nat64.ns.svc.cluster.local":     {{netip.MustParseAddr("64:ff9b::7f00:1")}},
	"all.ns.svc.cluster.local":       {{netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("::1"), netip.MustParseAddr("169.254.169.254")}},
	// A tenant's ExternalName Service pointing at kubernetes.default: the
	// API's ClusterIP is the canary's 127.0.0.2 in these tests.
	"apiserver.ns.svc.cluster.local": {{netip.MustParseAddr("127.0.0.2")}},
}

// apiAtCanary makes the canary's address the Kubernetes API's ClusterIP,
// inside an allowed range that otherwise reaches it (see the control case).
var apiAtCanary = map[string]string{"KUBERNETES_SERVICE_HOST": "127.0.0.2", "FORWARD_ALLOWED_CIDRS": "127.0.0.0/8"}

// loopbackSpellings are the ways of writing an address of this host into a
// URL: each is refused whether or not a host pattern would let an address
// through (FORWARD_ALLOWED_HOSTS=*), so each is judged as the address it is.
var loopbackSpellings = []struct{ name, host string }{
	{"127.0.0.1", "127.0.0.1"},
	{"elsewhere in 127/8", "127.0.0.2"},
	{"::1", "::1"},
	{"IPv4-mapped", "::ffff:127.0.0.1"},
	{"IPv4-mapped in hex", "::ffff:7f00:1"},
	{"IPv4-mapped written out", "0:0:0:0:0:ffff:127.0.0.1"},
	{"IPv4-compatible", "::127.0.0.1"},
	{"IPv4-translated (SIIT)", "::ffff:0:127.0.0.1"},
	{"NAT64", "64:ff9b::7f00:1"},
	{"local-use NAT64", "64:ff9b:1::7f00:1"},
	{"6to4", "2002:7f00:1::"},
	{"Teredo", "2001:0:4136:e378:8000:63bf:80ff:fffe"},
	{"decimal", "2130706433"},
	{"hexadecimal", "0x7f000001"},
	{"upper-case hexadecimal", "0X7F000001"},
	{"two parts in hex", "0x7f.1"},
	{"short form", "127.1"},
	{"three parts", "127.0.1"},
	{"octal", "0177.0.0.1"},
	{"zero-padded", "127.000.000.001"},
	{"one octal number", "017700000001"},
	{"dotted hex", "0x7f.0x0.0x0.0x1"},
	{"0.0.0.0 (connects to this host)", "0.0.0.0"},
	{"0", "0"},
	{":: (connects to this host)", "::"},
}

type hostileCase struct {
	name   string
	dest   string            // Kn-Forward-To (viaHTTP1, viaH2C, viaHandler)
	raw    string            // the request head after the request line (viaRaw)
	via    string            // how it is sent
	env    map[string]string // on top of hostileEnv
	dns    bool              // names resolve through the fake cluster DNS
	async  bool              // Prefer: respond-async
	status int               // expected status
	reason Reason            // expected Kn-Forward-Error; "" when the HTTP server itself refuses
}

// TestHostileDestinations: every way of naming loopback, the cloud metadata
// service or the Kubernetes API is refused (403 destination_denied) or
// rejected as malformed (400), and a canary listening on every loopback
// address with the port the requests name sees no TCP connection at all.
func TestHostileDestinations(t *testing.T) {
	canary := proxytest.NewCanary(t, "127.0.0.2")
	dns := proxytest.NewDNS(t, fakeClusterDNS)
	at := canary.URL
	in := func(host string) string { return at(host + ".ns.svc.cluster.local") }
	headOf := func(lines ...string) string { return strings.Join(lines, "\r\n") + "\r\n" }

	tests := []hostileCase{
		// Loopback as an address: see loopbackSpellings, and below.
		{name: "127.0.0.1 over https", dest: "https://" + canary.HostPort("127.0.0.1") + "/", status: 403, reason: ReasonDestinationDenied},
		{name: "::1 with a zone", dest: "http://[::1%25lo]:" + canary.Port + "/", status: 403, reason: ReasonDestinationDenied},
		{name: "h2c caller, 127.0.0.1", via: viaH2C, dest: at("127.0.0.1"), status: 403, reason: ReasonDestinationDenied},
		{name: "async, 127.0.0.1", async: true, dest: at("127.0.0.1"), status: 403, reason: ReasonDestinationDenied},

		// Loopback through a name: allowed by a host pattern, refused when
		// the resolved address is dialed.
		{name: "localhost", dest: at("localhost"), status: 403, reason: ReasonDestinationDenied},
		{name: "LOCALHOST. (case and trailing dot)", dest: at("LOCALHOST."), status: 403, reason: ReasonDestinationDenied},
		{name: "h2c caller, localhost", via: viaH2C, dest: at("localhost"), status: 403, reason: ReasonDestinationDenied},
		{name: "async, localhost: accepted, never dialed", async: true, dest: at("localhost"), status: 202},
		{name: "cluster name resolving to 127.0.0.1", dns: true, dest: in("loopback"), status: 403, reason: ReasonDestinationDenied},
		{name: "cluster name resolving to ::1", dns: true, dest: in("loopback6"), status: 403, reason: ReasonDestinationDenied},
		{name: "cluster name resolving to ::ffff:127.0.0.1", dns: true, dest: in("mapped"), status: 403, reason: ReasonDestinationDenied},
		{name: "cluster name resolving to 0.0.0.0", dns: true, dest: in("zero"), status: 403, reason: ReasonDestinationDenied},
		{name: "cluster name resolving to ::", dns: true, dest: in("zero6"), status: 403, reason: ReasonDestinationDenied},
		{name: "cluster name resolving to NAT64 loopback", dns: true, dest: in("nat64"), status: 403, reason: ReasonDestinationDenied},
		{name: "cluster name resolving to metadata", dns: true, dest: in("metadata"), status: 403, reason: ReasonDestinationDenied},
		{name: "cluster name resolving to several denied addresses", dns: true, dest: in("all"), status: 403, reason: ReasonDestinationDenied},
		{name: "async, cluster name resolving to loopback", dns: true, async: true, dest: in("loopback"), status: 202},
		{name: "host pattern * still refuses localhost", env: map[string]string{"FORWARD_ALLOWED_HOSTS": "*"}, dest: at("localhost"), status: 403, reason: ReasonDestinationDenied},
		{name: "host pattern * still refuses 127.0.0.1", env: map[string]string{"FORWARD_ALLOWED_HOSTS": "*"}, dest: at("127.0.0.1"), status: 403, reason: ReasonDestinationDenied},

		// FORWARD_DENIED_CIDRS wins over FORWARD_ALLOWED_CIDRS, in every form.
		{name: "denied inside allowed", env: map[string]string{"FORWARD_ALLOWED_CIDRS": "127.0.0.0/8", "FORWARD_DENIED_CIDRS": "127.0.0.1/32"}, dest: at("127.0.0.1"), status: 403, reason: ReasonDestinationDenied},
		{name: "denied inside allowed, mapped", env: map[string]string{"FORWARD_ALLOWED_CIDRS": "127.0.0.0/8", "FORWARD_DENIED_CIDRS": "127.0.0.1/32"}, dest: at("::ffff:127.0.0.1"), status: 403, reason: ReasonDestinationDenied},
		{name: "denied inside allowed, decimal", env: map[string]string{"FORWARD_ALLOWED_CIDRS": "127.0.0.0/8", "FORWARD_DENIED_CIDRS": "127.0.0.1/32"}, dest: at("2130706433"), status: 403, reason: ReasonDestinationDenied},
		{name: "denied inside allowed, by name", env: map[string]string{"FORWARD_ALLOWED_CIDRS": "127.0.0.0/8", "FORWARD_DENIED_CIDRS": "127.0.0.1/32"}, dest: at("localhost"), status: 403, reason: ReasonDestinationDenied},
		{name: "IPv4 carve-out leaves ::1 denied", env: map[string]string{"FORWARD_ALLOWED_CIDRS": "127.0.0.0/8"}, dest: at("::1"), status: 403, reason: ReasonDestinationDenied},

		// Cloud metadata and the Kubernetes API.
		{name: "metadata", dest: "http://169.254.169.254/latest/meta-data/", status: 403, reason: ReasonDestinationDenied},
		{name: "metadata, short form", dest: "http://169.254.43518/", status: 403, reason: ReasonDestinationDenied},
		{name: "metadata, decimal", dest: "http://2852039166/", status: 403, reason: ReasonDestinationDenied},
		{name: "metadata, mapped", dest: "http://[::ffff:169.254.169.254]/", status: 403, reason: ReasonDestinationDenied},
		{name: "metadata, AWS IPv6", dest: "http://[fd00:ec2::254]/", status: 403, reason: ReasonDestinationDenied},
		{name: "metadata, by name", dest: "http://metadata.google.internal/", status: 403, reason: ReasonDestinationDenied},
		{name: "metadata under pattern *", env: map[string]string{"FORWARD_ALLOWED_HOSTS": "*"}, dest: "http://169.254.169.254/latest/meta-data/", status: 403, reason: ReasonDestinationDenied},
		{name: "metadata, mapped, under pattern *", env: map[string]string{"FORWARD_ALLOWED_HOSTS": "*"}, dest: "http://[::ffff:a9fe:a9fe]/", status: 403, reason: ReasonDestinationDenied},
		{name: "metadata, AWS IPv6, under pattern *", env: map[string]string{"FORWARD_ALLOWED_HOSTS": "*"}, dest: "http://[fd00:ec2::254]/", status: 403, reason: ReasonDestinationDenied},
		{name: "link-local IPv6", dest: "http://[fe80::1%25eth0]/", status: 403, reason: ReasonDestinationDenied},
		{name: "Kubernetes API, cluster form", dest: at("kubernetes.default.svc.cluster.local"), status: 403, reason: ReasonDestinationDenied},
		{name: "Kubernetes API, odd spelling", dest: "https://KUBERNETES.Default.SVC.cluster.local./api", status: 403, reason: ReasonDestinationDenied},
		{name: "Kubernetes API under pattern *", env: map[string]string{"FORWARD_ALLOWED_HOSTS": "*"}, dest: at("kubernetes.default.svc"), status: 403, reason: ReasonDestinationDenied},
		{name: "Kubernetes API, bare name under pattern *", env: map[string]string{"FORWARD_ALLOWED_HOSTS": "*"}, dest: at("kubernetes"), status: 403, reason: ReasonDestinationDenied},
		{name: "Kubernetes API, kubernetes.default under pattern *", env: map[string]string{"FORWARD_ALLOWED_HOSTS": "*"}, dest: at("kubernetes.default"), status: 403, reason: ReasonDestinationDenied},
		{name: "Kubernetes API's ClusterIP, by address", env: apiAtCanary, dest: at("127.0.0.2"), status: 403, reason: ReasonDestinationDenied},
		{name: "Kubernetes API's ClusterIP, by address, async", env: apiAtCanary, async: true, dest: at("127.0.0.2"), status: 403, reason: ReasonDestinationDenied},
		{name: "Kubernetes API's ClusterIP, mapped", env: apiAtCanary, dest: "http://[::ffff:127.0.0.2]:" + canary.Port + "/", status: 403, reason: ReasonDestinationDenied},
		{name: "Kubernetes API's ClusterIP, through a name that resolves to it", env: apiAtCanary, dns: true, dest: in("apiserver"), status: 403, reason: ReasonDestinationDenied},

		// Parser tricks: refused as malformed before any name is looked at.
		{name: "userinfo naming an allowed host", dest: "http://sink.ns.svc.cluster.local@" + canary.HostPort("127.0.0.1") + "/", status: 400, reason: ReasonBadDestination},
		{name: "userinfo with a port-like password", dest: "http://sink.ns.svc.cluster.local:80@" + canary.HostPort("127.0.0.1") + "/", status: 400, reason: ReasonBadDestination},
		{name: "userinfo naming loopback", dest: "http://" + canary.HostPort("127.0.0.1") + "@sink.ns.svc.cluster.local/", status: 400, reason: ReasonBadDestination},
		{name: "backslash before @", dest: "http://sink.ns.svc.cluster.local\\@" + canary.HostPort("127.0.0.1") + "/", status: 400, reason: ReasonBadDestination},
		{name: "backslash authority", dest: "http:/\\" + canary.HostPort("127.0.0.1") + "/", status: 400, reason: ReasonBadDestination},
		{name: "scheme-relative", dest: "//" + canary.HostPort("127.0.0.1") + "/", status: 400, reason: ReasonBadDestination},
		{name: "opaque", dest: "http:" + canary.HostPort("127.0.0.1"), status: 400, reason: ReasonBadDestination},
		{name: "fragment hiding the host", dest: at("127.0.0.1") + "#.ns.svc.cluster.local", status: 400, reason: ReasonBadDestination},
		{name: "percent-encoded digit in the host", dest: "http://127.0.0.%31:" + canary.Port + "/", status: 400, reason: ReasonBadDestination},
		{name: "NUL in the host", dest: "http://127.0.0.1%00.ns.svc.cluster.local:" + canary.Port + "/", status: 400, reason: ReasonBadDestination},
		{name: "non-ASCII host", dest: "http://loc%C3%A1lhost:" + canary.Port + "/", status: 400, reason: ReasonBadDestination},
		{name: "CR LF and a Host header", via: viaHandler, dest: in("sink") + "\r\nHost: " + canary.HostPort("127.0.0.1"), status: 400, reason: ReasonBadDestination},
		{name: "LF before the path", via: viaHandler, dest: "http://" + canary.HostPort("localhost") + "\n/", status: 400, reason: ReasonBadDestination},
		{name: "CR LF at the end", via: viaHandler, dest: at("127.0.0.1") + "\r\n", status: 400, reason: ReasonBadDestination},
		{name: "bare CR on the wire (the server refuses it)", via: viaRaw, raw: headOf("Kn-Forward-To: " + in("sink") + "\rHost: " + canary.HostPort("127.0.0.1")), status: 400},
		{name: "folded line on the wire", via: viaRaw, raw: headOf("Kn-Forward-To: "+in("sink"), " "+at("127.0.0.1")), status: 400, reason: ReasonBadDestination},
		{name: "two Kn-Forward-To spelt differently", via: viaRaw, raw: headOf("kn-forward-to: "+at("localhost"), "KN-FORWARD-TO: "+in("sink")), status: 400, reason: ReasonBadDestination},
	}
	for _, l := range loopbackSpellings {
		tests = append(tests,
			hostileCase{name: l.name, dest: at(l.host), status: 403, reason: ReasonDestinationDenied},
			hostileCase{name: l.name + " under pattern *", env: map[string]string{"FORWARD_ALLOWED_HOSTS": "*"}, dest: at(l.host), status: 403, reason: ReasonDestinationDenied},
		)
	}
	// One of the proxy's own addresses that only the "own addresses" rule
	// denies (not loopback or link-local), where the host has one.
	for _, self := range delivery.LocalAddrs() {
		if self.IsGlobalUnicast() {
			tests = append(tests, hostileCase{
				name: "the proxy's own address", env: map[string]string{"FORWARD_ALLOWED_HOSTS": "*"},
				dest: at(self.String()), status: 403, reason: ReasonDestinationDenied,
			})
			break
		}
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tp := newHostileProxy(t, tt.env, tt.dns, dns)
			before := canary.Accepted()
			resp, body := sendHostile(t, tp, tt)
			if resp.StatusCode != tt.status {
				t.Errorf("status = %d, want %d; body %q", resp.StatusCode, tt.status, body)
			}
			if tt.reason != "" {
				wantProxyError(t, resp, body, tt.reason)
			} else if got := resp.Header.Get(delivery.HeaderForwardError); tt.status >= 400 && got != "" {
				t.Errorf("%s = %q, want the HTTP server's own refusal", delivery.HeaderForwardError, got)
			}
			// An async call ends in the background: wait until it gave its
			// slot back, so that anything it would dial has been dialed.
			proxytest.Eventually(t, 5*time.Second, func() bool { return tp.Limiter.Inflight() == 0 }, "the call did not end")
			canary.Settle(t)
			if n := canary.Accepted() - before; n != 0 {
				t.Errorf("the canary accepted %d connections, want 0", n)
			}
		})
	}

	// The canary does count: an allowed address reaches it.
	t.Run("control: an allowed loopback address reaches the canary", func(t *testing.T) {
		tp := newHostileProxy(t, map[string]string{"FORWARD_ALLOWED_CIDRS": "127.0.0.2/32"}, false, nil)
		before := canary.Accepted()
		resp, body := do(t, h1Client(t), tp.newRequest(t, at("127.0.0.2"), strings.NewReader("e")))
		canary.Settle(t)
		if resp.StatusCode != http.StatusOK || string(body) != "canary reached" || canary.Accepted()-before != 1 {
			t.Errorf("got %d %q and %d connections, want 200 from the canary over 1", resp.StatusCode, body, canary.Accepted()-before)
		}
	})
}

// newHostileProxy starts a proxy of hostileEnv plus env; with clusterDNS its
// transports resolve names through dns (with the proxy's own dial-time
// policy, as New builds it).
func newHostileProxy(t *testing.T, env map[string]string, clusterDNS bool, dns *proxytest.DNS) *testProxy {
	t.Helper()
	all := map[string]string{}
	for k, v := range hostileEnv {
		all[k] = v
	}
	for k, v := range env {
		all[k] = v
	}
	var opts []Option
	if clusterDNS {
		opts = append(opts, WithTransports(resolvingTransports(t, all, dns.Resolver())))
	}
	return newTestProxyLogger(t, all, zap.NewNop().Sugar(), opts...)
}

// resolvingTransports are the transports New would build for env, except
// that names resolve through r.
func resolvingTransports(t *testing.T, env map[string]string, r *net.Resolver) *delivery.Transports {
	t.Helper()
	cfg := testConfig(t, env)
	params := TransportParams(cfg, DestinationPolicy(cfg))
	params.Resolver = r
	trs := delivery.NewTransports(params)
	t.Cleanup(trs.CloseIdleConnections)
	return trs
}

// sendHostile sends one hostile request the way tt says and returns the
// answer with its body.
func sendHostile(t *testing.T, tp *testProxy, tt hostileCase) (*http.Response, []byte) {
	t.Helper()
	switch tt.via {
	case viaRaw:
		return rawExchange(t, tp.URL, "POST / HTTP/1.1\r\nHost: proxy\r\n"+tt.raw+"Content-Length: 1\r\n\r\ne")
	case viaHandler:
		req := httptest.NewRequestWithContext(t.Context(), http.MethodPost, "/", strings.NewReader("e"))
		req.Header[delivery.HeaderForwardTo] = []string{tt.dest}
		if tt.async {
			req.Header.Set(delivery.HeaderPrefer, delivery.PreferRespondAsync)
		}
		rec := httptest.NewRecorder()
		tp.Handler().ServeHTTP(rec, req)
		return rec.Result(), rec.Body.Bytes()
	}
	client := h1Client(t)
	if tt.via == viaH2C {
		client = h2cClient(t)
	}
	client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	req := tp.newRequest(t, "", strings.NewReader("e"))
	req.Header[delivery.HeaderForwardTo] = []string{tt.dest}
	if tt.async {
		req.Header.Set(delivery.HeaderPrefer, delivery.PreferRespondAsync)
	}
	return do(t, client, req)
}

// rawExchange writes raw on a new connection to the server at baseURL and
// reads one response, failing the test after 5 s.
func rawExchange(t *testing.T, baseURL, raw string) (*http.Response, []byte) {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(baseURL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(conn, raw); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("no answer to %q: %v", raw, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("reading the answer to %q: %v", raw, err)
	}
	return resp, body
}

// TestRedirectToHostileNotFollowed: an allowed destination that answers
// with a redirect to loopback, or to another allowed address, gets its
// redirect passed back (sync) or taken as final (async); the target, a
// canary, sees no connection.
func TestRedirectToHostileNotFollowed(t *testing.T) {
	canary := proxytest.NewCanary(t, "127.0.0.2")
	var hits atomic.Int64
	redirector := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		_, _ = io.Copy(io.Discard, r.Body)
		code, _ := strconv.Atoi(strings.TrimPrefix(r.URL.Path, "/"))
		w.Header().Set("Location", r.URL.Query().Get("to"))
		w.WriteHeader(code)
	}))
	redirector.Listener.Close()
	redirector.Listener = proxytest.ListenSamePort(t, "127.0.0.2")[0]
	redirector.Start()
	t.Cleanup(redirector.Close)

	// 127.0.0.2/32 allowed: the redirector, and the canary's 127.0.0.2
	// listener, which a followed redirect would therefore reach.
	tp := newHostileProxy(t, map[string]string{"FORWARD_ALLOWED_CIDRS": "127.0.0.2/32"}, false, nil)
	client := h1Client(t)
	client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	tests := []struct {
		name   string
		status int
		to     string
		async  bool
	}{
		{name: "307 to 127.0.0.1", status: 307, to: canary.URL("127.0.0.1")},
		{name: "307 to localhost", status: 307, to: canary.URL("localhost")},
		{name: "307 to an allowed address", status: 307, to: canary.URL("127.0.0.2")},
		{name: "308 to an allowed address", status: 308, to: canary.URL("127.0.0.2")},
		{name: "303 to an allowed address", status: 303, to: canary.URL("127.0.0.2")},
		{name: "302 to metadata", status: 302, to: "http://169.254.169.254/latest/meta-data/"},
		{name: "async: 307 to 127.0.0.1", status: 307, to: canary.URL("127.0.0.1"), async: true},
		{name: "async: 307 to an allowed address", status: 307, to: canary.URL("127.0.0.2"), async: true},
		{name: "async: 301 to an allowed address", status: 301, to: canary.URL("127.0.0.2"), async: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before, called := canary.Accepted(), hits.Load()
			dest := redirector.URL + "/" + strconv.Itoa(tt.status) + "?to=" + url.QueryEscape(tt.to)
			req := tp.newRequest(t, dest, strings.NewReader("e"))
			req.Header.Set(delivery.HeaderForwardRetry, "3")
			want := tt.status
			if tt.async {
				req.Header.Set(delivery.HeaderPrefer, delivery.PreferRespondAsync)
				want = http.StatusAccepted
			}
			resp, body := do(t, client, req)
			if resp.StatusCode != want {
				t.Fatalf("status = %d, want %d; body %q", resp.StatusCode, want, body)
			}
			if !tt.async && resp.Header.Get("Location") != tt.to {
				t.Errorf("Location = %q, want the destination's %q", resp.Header.Get("Location"), tt.to)
			}
			proxytest.Eventually(t, 5*time.Second, func() bool { return tp.Limiter.Inflight() == 0 }, "the call did not end")
			if n := hits.Load() - called; n != 1 {
				t.Errorf("the redirecting destination was called %d times, want 1 (a 3xx is final)", n)
			}
			canary.Settle(t)
			if n := canary.Accepted() - before; n != 0 {
				t.Errorf("the redirect target accepted %d connections, want 0", n)
			}
		})
	}
}
