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
	"crypto/tls"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"go.uber.org/zap"

	"knative.dev/event-forwarding-proxy/delivery"
	"knative.dev/event-forwarding-proxy/internal/certtest"
)

// An https destination signed by a CA in the trust bundles is reached;
// once the CA leaves the bundles it is not, pooled connections included.
func TestTrustRootsForHTTPSDestinations(t *testing.T) {
	ca := certtest.NewCA(t, "bundle-ca")
	dest := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusAccepted)
	}))
	dest.EnableHTTP2 = true
	dest.TLS = &tls.Config{Certificates: []tls.Certificate{ca.Server(t, "127.0.0.1")}, MinVersion: tls.VersionTLS12}
	dest.Config.ErrorLog = log.New(io.Discard, "", 0) // the refused handshakes
	dest.StartTLS()
	t.Cleanup(dest.Close)
	roots := delivery.NewTrustRoots()
	tp := newTestProxyLogger(t, nil, zap.NewNop().Sugar(), WithTrustRoots(roots))
	c := h1Client(t)
	call := func() (*http.Response, []byte) {
		t.Helper()
		return do(t, c, tp.newRequest(t, dest.URL, strings.NewReader("{}")))
	}

	resp, body := call()
	wantProxyError(t, resp, body, ReasonUnreachable)
	roots.SetBundles([][]byte{[]byte(ca.PEM)})
	for range 2 { // the second on the pooled connection
		if resp, body := call(); resp.StatusCode != http.StatusAccepted {
			t.Fatalf("with the bundle: %d %s, want the destination's 202", resp.StatusCode, body)
		}
	}
	roots.SetBundles(nil)
	resp, body = call()
	wantProxyError(t, resp, body, ReasonUnreachable)
}
