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
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"knative.dev/event-forwarding-proxy/proxy/proxytest"
)

// sendEach sends n events to dest through tp from each kind of caller
// (HTTP/1.1 and h2c), synchronously and with Prefer: respond-async, and
// checks that each was forwarded (200) or accepted (202). It returns how
// many it sent.
func sendEach(t *testing.T, tp *testProxy, dest string, n int) int {
	t.Helper()
	sent := 0
	for _, caller := range []struct {
		name   string
		client *http.Client
	}{{"http1", h1Client(t)}, {"h2c", h2cClient(t)}} {
		for _, async := range []bool{false, true} {
			for i := range n {
				req := tp.newRequest(t, dest, strings.NewReader(`{"n":1}`))
				req.Header.Set("Ce-Id", fmt.Sprintf("%s-%t-%d", caller.name, async, i))
				want := http.StatusOK
				if async {
					req.Header.Set("Prefer", "respond-async")
					want = http.StatusAccepted
				}
				resp, body := do(t, caller.client, req)
				if resp.StatusCode != want {
					t.Fatalf("%s caller, async %t: status %d, want %d; body %q", caller.name, async, resp.StatusCode, want, body)
				}
				sent++
			}
			if async {
				// An event handed off holds its admission slot until it is
				// delivered, which a loaded machine may not have done yet:
				// the next callers' events would then find the pod's slots
				// (FORWARD_MAX_INFLIGHT) taken and get 503 overloaded.
				proxytest.Eventually(t, 10*time.Second, func() bool { return tp.Limiter.Inflight() == 0 },
					"the events handed off were not delivered")
			}
		}
	}
	return sent
}

// posts counts the POSTs d received: the events, whatever else came.
func posts(d *proxytest.Destination) int {
	n := 0
	for _, r := range d.Requests() {
		if r.Method == http.MethodPost {
			n++
		}
	}
	return n
}

// TestHTTP1DestinationSeesOnlyTheEventsSent is the regression test of the
// h2c probe: to learn whether a destination spoke h2c, the proxy sent it
// the HTTP/2 connection preface, which a plain net/http HTTP/1.1 server
// takes for a "PRI *" request and hands to its handler. A destination must
// see the requests its callers sent and nothing else, whatever protocol
// the callers speak and in either mode.
func TestHTTP1DestinationSeesOnlyTheEventsSent(t *testing.T) {
	const n = 5
	dest := proxytest.NewDestination(t, nil) // net/http, HTTP/1.1 only: records every request, PRI too
	tp := newTestProxy(t, nil)               // FORWARD_DESTINATION_PROTOCOL unset: auto
	sent := sendEach(t, tp, dest.URL+"/", n)
	proxytest.Eventually(t, 5*time.Second, func() bool { return posts(dest) == sent },
		"the async events did not all arrive")
	reqs := dest.Requests()
	if len(reqs) != sent {
		t.Errorf("the destination saw %d requests for %d events", len(reqs), sent)
	}
	for _, r := range reqs {
		if r.Method != http.MethodPost || r.Proto != "HTTP/1.1" {
			t.Errorf("the destination saw %s %s %s", r.Method, r.RequestURI, r.Proto)
		}
	}
}

// TestDestinationProtocol: which protocol each setting speaks to
// plain-http destinations, from either kind of caller and in either mode.
// Both destinations speak HTTP/1.1 and h2c on their port, one on
// 127.0.0.1, the other on 127.0.0.2; what a request came as is read on
// the destination's side.
func TestDestinationProtocol(t *testing.T) {
	const h1, h2 = "HTTP/1.1", "HTTP/2.0"
	tests := []struct {
		name string
		env  map[string]string
		// want is the protocol 127.0.0.1 and 127.0.0.2 get.
		want [2]string
	}{
		{name: "auto without FORWARD_H2C_HOSTS", want: [2]string{h1, h1}},
		{name: "auto with the second host listed", env: map[string]string{"FORWARD_H2C_HOSTS": "127.0.0.2"}, want: [2]string{h1, h2}},
		{name: "auto with every host", env: map[string]string{"FORWARD_H2C_HOSTS": "*"}, want: [2]string{h2, h2}},
		{name: "h2c", env: map[string]string{"FORWARD_DESTINATION_PROTOCOL": "h2c"}, want: [2]string{h2, h2}},
		{name: "http1 ignores FORWARD_H2C_HOSTS", env: map[string]string{"FORWARD_DESTINATION_PROTOCOL": "http1", "FORWARD_H2C_HOSTS": "127.0.0.2"}, want: [2]string{h1, h1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dests := [2]*proxytest.Destination{
				proxytest.NewH2CDestination(t, nil),
				proxytest.NewH2CDestinationAt(t, "127.0.0.2", nil),
			}
			tp := newTestProxy(t, tt.env)
			for i, d := range dests {
				sent := sendEach(t, tp, d.URL+"/", 2)
				proxytest.Eventually(t, 5*time.Second, func() bool { return posts(d) == sent },
					"the async events did not all arrive")
				for _, r := range d.Requests() {
					if r.Method != http.MethodPost || r.Proto != tt.want[i] {
						t.Errorf("%s saw %s %s %s, want POST over %s", d.URL, r.Method, r.RequestURI, r.Proto, tt.want[i])
					}
				}
			}
		})
	}
}
