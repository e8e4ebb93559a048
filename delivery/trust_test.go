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
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"knative.dev/event-forwarding-proxy/delivery"
	"knative.dev/event-forwarding-proxy/internal/certtest"
)

// newTLSBackend serves h over TLS, h2 and HTTP/1.1, with cert.
func newTLSBackend(t *testing.T, cert tls.Certificate) *httptest.Server {
	t.Helper()
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Proto", r.Proto)
	}))
	srv.EnableHTTP2 = true
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv
}

// tryGet GETs url and returns the error, if any. Pooled connections are
// reused: a change of the roots must keep them from new calls itself.
func tryGet(t *testing.T, tr *delivery.Transports, url string) (*http.Response, error) {
	t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := tr.HTTP1.RoundTrip(req)
	if err == nil {
		_ = resp.Body.Close()
	}
	return resp, err
}

func TestTrustRootsFollowTheBundles(t *testing.T) {
	ca := certtest.NewCA(t, "bundle-ca")
	srv := newTLSBackend(t, ca.Server(t, "127.0.0.1"))
	roots := delivery.NewTrustRoots()
	tr := delivery.NewTransports(delivery.TransportParams{Roots: roots})
	changes := 0
	roots.OnChange(func() { changes++ })

	var unknown x509.UnknownAuthorityError
	if _, err := tryGet(t, tr, srv.URL); !errors.As(err, &unknown) {
		t.Fatalf("before the bundle: got %v, want a %T", err, unknown)
	}
	if n := roots.SetBundles([][]byte{[]byte("not PEM"), []byte(ca.PEM)}); n != 1 {
		t.Fatalf("SetBundles loaded %d certificates, want 1", n)
	}
	resp, err := tryGet(t, tr, srv.URL)
	if err != nil {
		t.Fatalf("with the bundle: %v", err)
	}
	if resp.ProtoMajor != 2 {
		t.Errorf("negotiated %s, want HTTP/2 over TLS (ALPN h2)", resp.Proto)
	}
	roots.SetBundles(nil)
	if _, err := tryGet(t, tr, srv.URL); err == nil {
		t.Fatal("after the bundle was removed: a new connection still trusted its CA")
	}
	if changes != 2 {
		t.Errorf("OnChange callback ran %d times for 2 changes", changes)
	}
}

// An IP destination sends no SNI: its address must still be checked
// against the certificate, not skipped.
func TestTrustRootsCheckTheAddressOfIPDestinations(t *testing.T) {
	ca := certtest.NewCA(t, "bundle-ca")
	srv := newTLSBackend(t, ca.Server(t, "127.0.0.2", "sink.example.svc"))
	roots := delivery.NewTrustRoots()
	roots.SetBundles([][]byte{[]byte(ca.PEM)})
	tr := delivery.NewTransports(delivery.TransportParams{Roots: roots})
	_, err := tryGet(t, tr, srv.URL)
	var hostErr x509.HostnameError
	if !errors.As(err, &hostErr) || hostErr.Host != "127.0.0.1" {
		t.Fatalf("certificate for 127.0.0.2 served on 127.0.0.1: got %v, want a %T", err, hostErr)
	}
}

func TestTrustRootsCovers(t *testing.T) {
	bundled, other := certtest.NewCA(t, "bundled"), certtest.NewCA(t, "other")
	roots := delivery.NewTrustRoots()
	roots.SetBundles([][]byte{[]byte(bundled.PEM)})
	tests := []struct {
		name    string
		caCerts string
		want    bool
	}{
		{name: "the bundled CA", caCerts: bundled.PEM, want: true},
		{name: "another CA", caCerts: other.PEM, want: false},
		{name: "the bundled CA and another", caCerts: bundled.PEM + other.PEM, want: false},
		{name: "no certificate", caCerts: "garbage", want: false},
		{name: "empty", caCerts: "", want: false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := roots.Covers(tc.caCerts); got != tc.want {
				t.Errorf("Covers = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestTrustRootsWithTheSinksCA(t *testing.T) {
	bundled, sinks := certtest.NewCA(t, "bundled"), certtest.NewCA(t, "sinks")
	bundledSrv := newTLSBackend(t, bundled.Server(t, "127.0.0.1"))
	sinkSrv := newTLSBackend(t, sinks.Server(t, "127.0.0.1"))
	roots := delivery.NewTrustRoots()
	pool, err := roots.With(sinks.PEM)
	if err != nil {
		t.Fatal(err)
	}
	tr := delivery.NewTransports(delivery.TransportParams{Roots: pool})
	if _, err := tryGet(t, tr, sinkSrv.URL); err != nil {
		t.Errorf("sink signed by its own CA: %v", err)
	}
	if _, err := tryGet(t, tr, bundledSrv.URL); err == nil {
		t.Error("a CA not yet bundled was trusted")
	}
	roots.SetBundles([][]byte{[]byte(bundled.PEM)})
	if _, err := tryGet(t, tr, bundledSrv.URL); err != nil {
		t.Errorf("after the bundle came: %v", err)
	}
	if _, err := tryGet(t, tr, sinkSrv.URL); err != nil {
		t.Errorf("after the bundle came, the sink's own CA: %v", err)
	}
	if _, err := roots.With("no certificate"); err == nil {
		t.Error("With accepted CA certificates without a certificate")
	}
}
