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
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"

	"go.uber.org/zap"

	"knative.dev/event-forwarding-proxy/delivery"
	"knative.dev/event-forwarding-proxy/proxy/proxytest"
)

// rebindTarget is a name that a fake DNS answers first with an allowed
// loopback address (127.0.0.2, where a real server runs) and then with a
// denied one (127.0.0.1 and friends, where a canary runs on the same port).
type rebindTarget struct {
	canary *proxytest.Canary
	port   string
}

// newRebindTarget starts the allowed server on 127.0.0.2 and the canary on
// 127.0.0.1 (and ::1 where there is one), all on one port.
func newRebindTarget(t *testing.T) *rebindTarget {
	t.Helper()
	hosts := []string{"127.0.0.2", "127.0.0.1"}
	if proxytest.HasIPv6Loopback() {
		hosts = append(hosts, "::1")
	}
	lns := proxytest.ListenSamePort(t, hosts...)
	good := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		_, _ = io.WriteString(w, "allowed server")
	}))
	good.Listener.Close()
	good.Listener = lns[0]
	good.Config.Protocols = new(http.Protocols)
	good.Config.Protocols.SetHTTP1(true)
	good.Config.Protocols.SetUnencryptedHTTP2(true)
	good.Start()
	t.Cleanup(good.Close)
	c := proxytest.ServeCanary(t, lns[1:]...)
	return &rebindTarget{canary: c, port: c.Port}
}

var (
	allowedLoopback = netip.MustParseAddr("127.0.0.2")
	rebindPolicy    = func() *delivery.Policy {
		return &delivery.Policy{Allowed: []netip.Prefix{netip.MustParsePrefix("127.0.0.2/32")}}
	}
)

// TestDNSRebindingRefusedAtDial: the transports resolve a name once per
// dial and the policy judges every address they connect to, so a name that
// first resolves to an allowed address and then to a denied one is refused
// at the second dial, recognisably (ErrDestinationDenied), and the denied
// address never gets a connection.
func TestDNSRebindingRefusedAtDial(t *testing.T) {
	target := newRebindTarget(t)
	const name = "rebind.example.test"
	loop4, loop6 := netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("::1")
	tests := []struct {
		name    string
		answers [][]netip.Addr // one set per lookup
		want    []bool         // per call: reaches the allowed server (else denied)
	}{
		{name: "rebinds to 127.0.0.1", answers: [][]netip.Addr{{allowedLoopback}, {loop4}}, want: []bool{true, false}},
		{name: "rebinds to ::1", answers: [][]netip.Addr{{allowedLoopback}, {loop6}}, want: []bool{true, false}},
		{name: "rebinds to ::ffff:127.0.0.1", answers: [][]netip.Addr{{allowedLoopback}, {netip.MustParseAddr("::ffff:127.0.0.1")}}, want: []bool{true, false}},
		{name: "rebinds to 0.0.0.0", answers: [][]netip.Addr{{allowedLoopback}, {netip.MustParseAddr("0.0.0.0")}}, want: []bool{true, false}},
		{name: "rebinds back and forth", answers: [][]netip.Addr{{allowedLoopback}, {loop4}, {allowedLoopback}, {loop4}}, want: []bool{true, false, true, false}},
		{name: "denied first, allowed next", answers: [][]netip.Addr{{loop4}, {allowedLoopback}}, want: []bool{false, true}},
		{name: "denied addresses only", answers: [][]netip.Addr{{loop4, loop6}}, want: []bool{false}},
		// Every address of an answer is judged on its own: whichever the
		// dialer tries first, the denied one gets no connection.
		{name: "one answer, denied and allowed", answers: [][]netip.Addr{{loop4, allowedLoopback}}, want: []bool{true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, proto := range []string{"http1", "h2c"} {
				t.Run(proto, func(t *testing.T) {
					dns := proxytest.NewDNS(t, map[string][][]netip.Addr{name: tt.answers})
					trs := delivery.NewTransports(delivery.TransportParams{Resolver: dns.Resolver(), Control: rebindPolicy().Control})
					t.Cleanup(trs.CloseIdleConnections)
					rt := trs.HTTP1
					if proto == "h2c" {
						rt = trs.H2C
					}
					before := target.canary.Accepted()
					for i, reach := range tt.want {
						body, err := getBody(t, rt, "http://"+net.JoinHostPort(name, target.port)+"/")
						switch {
						case reach && err != nil:
							t.Errorf("call %d: %v, want the allowed server", i+1, err)
						case reach && body != "allowed server":
							t.Errorf("call %d: body %q, want the allowed server's", i+1, body)
						case !reach && !errors.Is(err, delivery.ErrDestinationDenied):
							t.Errorf("call %d: body %q, error %v; want one wrapping ErrDestinationDenied", i+1, body, err)
						}
						// A new connection, so a new lookup, for the next call.
						trs.CloseIdleConnections()
					}
					target.canary.Settle(t)
					if n := target.canary.Accepted() - before; n != 0 {
						t.Errorf("the denied addresses accepted %d connections, want 0", n)
					}
					if n := dns.Lookups(name); n != len(tt.want) {
						t.Errorf("%d lookups of %s, want one per call (%d)", n, name, len(tt.want))
					}
				})
			}
		})
	}
}

// getBody GETs url through rt and returns the body.
func getBody(t *testing.T, rt http.RoundTripper, url string) (string, error) {
	t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := rt.RoundTrip(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

// TestDNSRebindingThroughTheProxy: the same through the proxy's handler
// chain and the transports its configuration yields: a cluster name allowed
// by FORWARD_ALLOWED_HOSTS is forwarded while it resolves to an allowed
// address and refused with 403 destination_denied once it resolves to
// loopback.
func TestDNSRebindingThroughTheProxy(t *testing.T) {
	target := newRebindTarget(t)
	const name = "sink.tenant.svc.cluster.local"
	dns := proxytest.NewDNS(t, map[string][][]netip.Addr{name: {
		{allowedLoopback}, {netip.MustParseAddr("127.0.0.1")}, {allowedLoopback}, {netip.MustParseAddr("::1")},
	}})
	env := map[string]string{"FORWARD_ALLOWED_CIDRS": "127.0.0.2/32", "FORWARD_ALLOWED_HOSTS": "*.svc.cluster.local"}
	trs := resolvingTransports(t, env, dns.Resolver())
	tp := newTestProxyLogger(t, env, zap.NewNop().Sugar(), WithTransports(trs))
	client := h1Client(t)
	dest := "http://" + net.JoinHostPort(name, target.port) + "/"
	tests := []struct {
		name   string
		prefer string
		want   int
	}{
		{name: "resolves to the allowed address", want: http.StatusOK},
		{name: "rebound to 127.0.0.1", want: http.StatusForbidden},
		{name: "back to the allowed address", want: http.StatusOK},
		{name: "rebound to ::1", want: http.StatusForbidden},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, body := do(t, client, tp.newRequest(t, dest, strings.NewReader("e")))
			if tt.want == http.StatusOK {
				if resp.StatusCode != http.StatusOK || string(body) != "allowed server" {
					t.Errorf("got %d %q, want 200 from the allowed server", resp.StatusCode, body)
				}
			} else {
				wantProxyError(t, resp, body, ReasonDestinationDenied)
			}
			trs.CloseIdleConnections()
		})
	}
	target.canary.Settle(t)
	if n := target.canary.Accepted(); n != 0 {
		t.Errorf("loopback accepted %d connections, want 0", n)
	}
	if n := dns.Lookups(name); n != len(tests) {
		t.Errorf("%d lookups of %s, want %d", n, name, len(tests))
	}
}
