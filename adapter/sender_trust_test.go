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

package adapter

import (
	"crypto/tls"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"knative.dev/event-forwarding-proxy/delivery"
	"knative.dev/event-forwarding-proxy/internal/certtest"
)

// newTLSSink serves 200 over TLS with a certificate for 127.0.0.1 that ca
// signed, and counts the requests.
func newTLSSink(t *testing.T, ca *certtest.CA) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	n := new(atomic.Int64)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { n.Add(1) }))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{ca.Server(t, "127.0.0.1")}, MinVersion: tls.VersionTLS12}
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the refused handshakes
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv, n
}

// A sink whose CA certificates are all in the trust bundles goes through
// the proxy, which loads the same bundles; others keep going direct.
func TestSendCACertsSinkForwardsWhenBundled(t *testing.T) {
	bundled, own := certtest.NewCA(t, "bundled"), certtest.NewCA(t, "own")
	roots := delivery.NewTrustRoots()
	roots.SetBundles([][]byte{[]byte(bundled.PEM)})
	proxy := newServer(t, statuses([]int{202}, nil))
	tests := []struct {
		name    string
		ca      *certtest.CA
		caCerts string
		want    Route
	}{
		{name: "CA in the bundles", ca: bundled, caCerts: bundled.PEM, want: RouteProxy},
		{name: "CA of its own", ca: own, caCerts: own.PEM, want: RouteDirect},
		{name: "CA in the bundles and one of its own", ca: own, caCerts: bundled.PEM + own.PEM, want: RouteDirect},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			sink, _ := newTLSSink(t, tc.ca)
			s := testSender(SenderParams{TrustRoots: roots, Retries: -1}, newFakeClock())
			s.SetForwarding(forwardingTo(t, proxy))
			res, err := s.Send(ctxFor(t, 10*time.Second), Target{URL: mustParse(t, sink.URL), CACerts: tc.caCerts}, testEvent("e"))
			if err != nil {
				t.Fatal(err)
			}
			if res.Route != tc.want || res.Fallback {
				t.Errorf("route %s (fallback %v), want %s", res.Route, res.Fallback, tc.want)
			}
		})
	}
}

// Direct sends trust the bundles without the Target naming a CA, and a
// Target's own CA on top of them; a change of the bundles applies at once,
// pooled connections included.
func TestSendDirectTrustsTheBundles(t *testing.T) {
	bundled, own := certtest.NewCA(t, "bundled"), certtest.NewCA(t, "own")
	bundledSink, bundledN := newTLSSink(t, bundled)
	ownSink, ownN := newTLSSink(t, own)
	roots := delivery.NewTrustRoots()
	s := NewSender(SenderParams{TrustRoots: roots, Retries: -1})
	// No CloseIdleConnections between sends: a change of the bundles
	// closes the pooled ones itself.
	send := func(sink *httptest.Server, caCerts string) error {
		_, err := s.Send(ctxFor(t, 10*time.Second), Target{URL: mustParse(t, sink.URL), CACerts: caCerts}, testEvent("e"))
		return err
	}
	if err := send(bundledSink, ""); err == nil {
		t.Fatal("a sink signed by a CA not yet bundled was trusted")
	}
	if err := send(ownSink, own.PEM); err != nil {
		t.Fatalf("the target's own CA: %v", err)
	}
	roots.SetBundles([][]byte{[]byte(bundled.PEM)})
	if err := send(bundledSink, ""); err != nil {
		t.Fatalf("after the bundle came: %v", err)
	}
	if err := send(bundledSink, own.PEM); err != nil {
		t.Fatalf("the bundles, with a target's CA on top: %v", err)
	}
	if err := send(ownSink, own.PEM); err != nil {
		t.Fatalf("the target's own CA, after the bundle came: %v", err)
	}
	roots.SetBundles(nil)
	if err := send(bundledSink, ""); err == nil {
		t.Fatal("after the bundle went, a new connection still trusted its CA")
	}
	if bundledN.Load() != 2 || ownN.Load() != 2 {
		t.Errorf("the sinks got %d and %d events, want 2 and 2", bundledN.Load(), ownN.Load())
	}
}
