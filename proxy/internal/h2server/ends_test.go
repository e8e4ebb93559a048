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

package h2server_test

import (
	"net/http"
	"testing"

	"knative.dev/event-forwarding-proxy/internal/h2conn/h2conntest"
	"knative.dev/event-forwarding-proxy/internal/h2raw"
)

// TestBothEndsAlikeServer runs the cases both ends of an h2c connection
// share (h2conntest.Cases) against the server, with a raw client as the
// peer; delivery/h2c runs them against the client.
func TestBothEndsAlikeServer(t *testing.T) {
	h2conntest.Run(t, func(t *testing.T, tc h2conntest.Case) {
		g := newGate(t)
		reached := make(chan struct{})
		f := startServer(t, nil, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			close(reached) // the handler reads no body: stream Open's window only fills
			g.hold(r)
		}))
		c := h2raw.Connect(t, f.addr)
		c.Request(h2conntest.Open, http.MethodPost, "/held", false)
		recv(t, reached, "the request reaches the handler")
		acks, pings := c.SettingsAcks, len(c.PingAcks)
		c.Check(tc.Send(c.Framer, c.InitialWindow()))
		switch tc.Answer {
		case h2conntest.GoAway:
			c.WantGoAway(tc.Code)
		case h2conntest.Reset:
			c.Until("stream Open's reset", func() bool { return c.Stream(h2conntest.Open).RST != nil })
			c.WantReset(h2conntest.Open, tc.Code)
			c.Alive()
		case h2conntest.SettingsAck:
			c.Until("the SETTINGS ack", func() bool { return c.SettingsAcks > acks })
			c.Alive()
		case h2conntest.PingAck:
			c.Until("the PING ack", func() bool { return len(c.PingAcks) > pings })
			if c.PingAcks[pings] != h2conntest.Ping {
				t.Errorf("PING ack carries %q, want %q", c.PingAcks[pings], h2conntest.Ping)
			}
		}
	})
}
