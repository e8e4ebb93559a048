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
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/zap"

	"knative.dev/event-forwarding-proxy/delivery"
)

// fuzzPolicyEnv: names by exact entry and by suffix, an allowed carve-out of
// loopback and a denied private range, so that every branch of the policy
// is in play. No retries: an async call makes one attempt.
var fuzzPolicyEnv = map[string]string{
	"FORWARD_ALLOWED_HOSTS": "localhost,example.com,*.svc.cluster.local,*.svc",
	"FORWARD_ALLOWED_CIDRS": "127.0.0.2/32",
	"FORWARD_DENIED_CIDRS":  "10.0.0.0/8",
	"FORWARD_ASYNC_RETRY":   "0",
}

var errNotDialed = errors.New("fuzz: recorded, not dialed")

// dialRecorder stands in for the transports' dialer: it records every
// address it is asked to dial and dials none.
type dialRecorder struct {
	mu    sync.Mutex
	addrs []string
}

func (d *dialRecorder) dial(_ context.Context, _, addr string) (net.Conn, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.addrs = append(d.addrs, addr)
	return nil, errNotDialed
}

func (d *dialRecorder) take() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := d.addrs
	d.addrs = nil
	return out
}

// FuzzDestinationPolicy sends random Kn-Forward-To values through the whole
// handler chain, sync and async. Nothing may panic, and every address the
// proxy asks its dialer for must pass the host allow-list and the address
// policy (judged both by delivery's own functions and by a plain re-reading
// of the configuration): nothing else ever reaches a dialer.
func FuzzDestinationPolicy(f *testing.F) {
	for _, s := range []string{
		"http://sink.ns.svc.cluster.local/x", "https://sink.ns.svc:8443/", "http://localhost:8080/",
		"http://LOCALHOST./", "http://example.com/", "http://www.example.com/", "http://127.0.0.2:9/",
		"http://2130706434/", "http://127.0.0.1/", "http://127.1/", "http://0x7f000001/", "http://0177.0.0.1/",
		"http://2130706433/", "http://0/", "http://0.0.0.0/", "http://[::]/", "http://[::1]/", "http://[::ffff:127.0.0.1]/",
		"http://[::ffff:127.0.0.2]/", "http://[64:ff9b::7f00:1]/", "http://[2002:7f00:1::]/",
		"http://[2001:0:4136:e378:8000:63bf:80ff:fffe]/", "http://[fe80::1%25lo]/", "http://169.254.169.254/",
		"http://169.254.43518/", "http://[fd00:ec2::254]/", "http://10.0.0.1/", "http://10.1/", "http://167772161/",
		"http://[::ffff:10.0.0.1]/", "http://8.8.8.8/", "http://kubernetes.default.svc/", "http://kubernetes.default.svc.cluster.local./",
		"http://sink.ns.svc.cluster.local@127.0.0.1/", "http://127.0.0.1#.svc", "http:/\\127.0.0.1/", "//127.0.0.1/",
		"http://127.0.0.%31/", "http://svc/", "http://.svc/", "http://a..svc/", "http://a.svc./", "http://a.svc.:0/",
		"http://[::ffff:0:127.0.0.1]/", "http://[::127.0.0.1]/", "http://xn--80ak6aa92e.svc/", "http://a.svc:65535/",
	} {
		f.Add(s, false)
		f.Add(s, true)
	}
	cfg := testConfig(f, fuzzPolicyEnv)
	policy := &delivery.Policy{Allowed: cfg.AllowedCIDRs, Denied: cfg.DeniedCIDRs}
	rec := &dialRecorder{}
	trs := delivery.NewTransports(TransportParams(cfg, policy))
	trs.Plain.Dial, trs.TLS.Transport().DialContext, trs.H2C.Dial = rec.dial, rec.dial, rec.dial
	p := New(cfg, zap.NewNop().Sugar(), WithTransports(trs))

	f.Fuzz(func(t *testing.T, raw string, async bool) {
		req := httptest.NewRequestWithContext(t.Context(), http.MethodPost, "/", strings.NewReader("e"))
		req.Header[delivery.HeaderForwardTo] = []string{raw}
		if async {
			req.Header.Set(delivery.HeaderPrefer, delivery.PreferRespondAsync)
		}
		w := httptest.NewRecorder()
		p.Handler().ServeHTTP(w, req)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := p.Shutdown(ctx); err != nil { // waits for the async attempt
			t.Fatalf("%q: the call did not end: %v", raw, err)
		}
		dialed := rec.take()
		for _, addr := range dialed {
			checkDialed(t, raw, addr, policy, cfg.AllowedHosts)
		}
		status := w.Code
		switch {
		case len(dialed) > 0 && status != http.StatusBadGateway && status != http.StatusAccepted:
			t.Errorf("%q: dialed %q and answered %d, want 502 (the dial fails) or 202", raw, dialed, status)
		case status == http.StatusOK:
			t.Errorf("%q: answered 200 without a destination", raw)
		}
	})
}

// checkDialed fails t unless addr is an address the configuration allows.
func checkDialed(t *testing.T, raw, addr string, policy *delivery.Policy, patterns []string) {
	t.Helper()
	host, port, err := net.SplitHostPort(addr)
	if err != nil || port == "" || port == "0" {
		t.Errorf("%q: dialed %q, not host:port", raw, addr)
		return
	}
	if ip, err := netip.ParseAddr(host); err == nil {
		if err := policy.CheckAddr(ip); err != nil {
			t.Errorf("%q: dialed %q, which the policy denies: %v", raw, addr, err)
		}
		if !policy.AllowsLiteral(ip) && !delivery.HostAllowed(host, hostPatternsOnly(patterns)) {
			t.Errorf("%q: dialed the address %q, outside FORWARD_ALLOWED_CIDRS", raw, addr)
		}
		// Read plainly: the only address these settings allow is 127.0.0.2.
		if ip.WithZone("").Unmap() != netip.MustParseAddr("127.0.0.2") {
			t.Errorf("%q: dialed %q; only 127.0.0.2 is an allowed address", raw, addr)
		}
		return
	}
	if !delivery.HostAllowed(host, patterns) {
		t.Errorf("%q: dialed %q, whose host FORWARD_ALLOWED_HOSTS does not allow", raw, addr)
	}
	// Read plainly: lower-case, no trailing dot, one of the patterns, never
	// the API server, never a spelling of an IPv4 address.
	allowed := host == "localhost" || host == "example.com" ||
		strings.HasSuffix(host, ".svc.cluster.local") && len(host) > len(".svc.cluster.local") ||
		strings.HasSuffix(host, ".svc") && len(host) > len(".svc")
	if !allowed || host != strings.ToLower(host) || strings.HasSuffix(host, ".") ||
		host == "kubernetes" || strings.HasPrefix(host, "kubernetes.default.") {
		t.Errorf("%q: dialed the name %q", raw, host)
	}
	if _, isIP := parseLegacyIPv4(host); isIP {
		t.Errorf("%q: dialed %q, an IPv4 address spelt as a name", raw, host)
	}
}

// FuzzSanitiseHeaders: whatever header names, values and Connection list a
// caller sends (as a server would accept them: names are tokens), what the
// proxy keeps for the destination holds no Kn-Forward-* header, no
// hop-by-hop header and no header the Connection header lists, and every
// other header unchanged.
func FuzzSanitiseHeaders(f *testing.F) {
	f.Add("X-Keep", "1", "Kn-Forward-Anything", "x", "X-Keep, close")
	f.Add("x-keep", "1", "kn-forward-error", "spoofed", " X-KEEP ,,keep-alive")
	f.Add("Cdn-Loop", "other", "Kn-Namespace", "team-a", "CDN-Loop, Kn-Namespace")
	f.Add("Te", "trailers", "Upgrade", "websocket", "Upgrade")
	f.Add("Content-Length", "5", "Transfer-Encoding", "chunked", "Content-Length, Transfer-Encoding")
	f.Add("Kn-Forward-", "bare", "Kn-Forwarded-For", "kept", "\tx-a\t,x-b")
	f.Add("X-A", "v", "X-B", "w", "x-a\u00a0, x-b")
	f.Fuzz(func(t *testing.T, n1, v1, n2, v2, conn string) {
		h := http.Header{}
		for _, kv := range [][2]string{{n1, v1}, {n2, v2}, {"Connection", conn}} {
			if isToken(kv[0]) {
				h.Add(kv[0], kv[1])
			}
		}
		h.Add("Kn-Forward-Authorization", "Bearer for-the-proxy")
		h.Add("Keep-Alive", "timeout=5")
		h.Add("Ce-Id", "e-1")
		in := h.Clone()

		removeHopByHop(h)
		removeForwardHeaders(h)

		// Listed strictly (RFC 9110 OWS: spaces and tabs) must go; listed
		// leniently (any space) may go; anything else must stay.
		strict, lenient := map[string]bool{}, map[string]bool{}
		for _, v := range in.Values("Connection") {
			for tok := range strings.SplitSeq(v, ",") {
				strict[strings.ToLower(strings.Trim(tok, " \t"))] = true
				lenient[strings.ToLower(strings.TrimSpace(tok))] = true
			}
		}
		hop := func(k string) bool {
			return slices.ContainsFunc(hopByHop, func(h string) bool { return strings.EqualFold(h, k) })
		}
		for k := range h {
			lk := strings.ToLower(k)
			switch {
			case strings.HasPrefix(lk, "kn-forward-"):
				t.Errorf("%s survived", k)
			case hop(k):
				t.Errorf("hop-by-hop %s survived", k)
			case strict[lk]:
				t.Errorf("%s survived although Connection lists it (%q)", k, in.Values("Connection"))
			}
		}
		for k, v := range in {
			lk := strings.ToLower(k)
			if strings.HasPrefix(lk, "kn-forward-") || hop(k) || lenient[lk] {
				continue
			}
			if diff := cmp.Diff(v, h[k]); diff != "" {
				t.Errorf("end-to-end %s changed (-in +out):\n%s", k, diff)
			}
		}
	})
}

// isToken reports whether s is an HTTP token (RFC 9110), the only header
// names a server accepts.
func isToken(s string) bool {
	if s == "" {
		return false
	}
	for i := range len(s) {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0) {
			return false
		}
	}
	return true
}
