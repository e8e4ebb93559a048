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
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	jose "github.com/go-jose/go-jose/v4"
	"go.uber.org/zap"

	"knative.dev/event-forwarding-proxy/delivery"
	"knative.dev/event-forwarding-proxy/proxy/proxytest"
)

const testIssuer = "https://issuer.test"

// tokenMint signs service-account-like tokens with one RSA key and builds a
// go-oidc verifier that trusts it: real signature, audience and expiry
// checks, without a network.
type tokenMint struct {
	key      *rsa.PrivateKey
	signer   jose.Signer
	verifies atomic.Int64
}

func newTokenMint(t *testing.T) *tokenMint {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.RS256, Key: key}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return &tokenMint{key: key, signer: signer}
}

func (m *tokenMint) token(t *testing.T, sub, aud string, exp time.Time) string {
	t.Helper()
	claims, _ := json.Marshal(map[string]any{"iss": testIssuer, "sub": sub, "aud": []string{aud}, "exp": exp.Unix(), "iat": time.Now().Unix()})
	jws, err := m.signer.Sign(claims)
	if err != nil {
		t.Fatal(err)
	}
	s, err := jws.CompactSerialize()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func (m *tokenMint) Verify(ctx context.Context, raw string) (*oidc.IDToken, error) {
	m.verifies.Add(1)
	keys := &oidc.StaticKeySet{PublicKeys: []crypto.PublicKey{m.key.Public()}}
	return oidc.NewVerifier(testIssuer, keys, &oidc.Config{ClientID: "event-forwarding-proxy"}).Verify(ctx, raw)
}

// clusterDNS makes *.svc.cluster.local names dial addr, as cluster DNS
// would resolve them to a service; the address policy still applies.
func clusterDNS(t *testing.T, addr string) *delivery.Transports {
	cfg := testConfig(t, nil)
	policy := &delivery.Policy{Allowed: cfg.AllowedCIDRs}
	trs := delivery.NewTransports(TransportParams(cfg, policy))
	d := &net.Dialer{Control: policy.Control}
	dial := func(ctx context.Context, network, a string) (net.Conn, error) {
		if strings.Contains(a, ".svc.cluster.local") {
			a = addr
		}
		return d.DialContext(ctx, network, a)
	}
	trs.Plain.Dial, trs.TLS.Transport().DialContext, trs.H2C.Dial = dial, dial, dial
	t.Cleanup(trs.CloseIdleConnections)
	return trs
}

func TestAuth(t *testing.T) {
	mint := newTokenMint(t)
	dest := proxytest.NewDestination(t, nil)
	p := newTestProxyLogger(t, map[string]string{"FORWARD_AUTH": "oidc"}, zap.NewNop().Sugar(),
		WithAuthenticator(NewOIDCAuthenticator(mint)),
		WithTransports(clusterDNS(t, strings.TrimPrefix(dest.URL, "http://"))))
	hour := time.Now().Add(time.Hour)
	tenantA := mint.token(t, "system:serviceaccount:tenant-a:app", "event-forwarding-proxy", hour)
	adapter := mint.token(t, "system:serviceaccount:knative-eventing:pingsource-mt-adapter", "event-forwarding-proxy", hour)
	for _, tc := range []struct {
		name       string
		auth       []string
		dest       string
		kn         string
		wantStatus int
		wantReason Reason
	}{
		{name: "no token", dest: "http://sink.tenant-a.svc.cluster.local/", wantStatus: 401, wantReason: ReasonUnauthenticated},
		{name: "not bearer", auth: []string{"Basic " + tenantA}, dest: "http://sink.tenant-a.svc.cluster.local/", wantStatus: 401, wantReason: ReasonUnauthenticated},
		{name: "two tokens", auth: []string{"Bearer " + tenantA, "Bearer " + tenantA}, dest: "http://sink.tenant-a.svc.cluster.local/", wantStatus: 401, wantReason: ReasonUnauthenticated},
		{name: "garbage", auth: []string{"Bearer abc.def.ghi"}, dest: "http://sink.tenant-a.svc.cluster.local/", wantStatus: 401, wantReason: ReasonUnauthenticated},
		{name: "wrong audience", auth: []string{"Bearer " + mint.token(t, "system:serviceaccount:tenant-a:app", "kubernetes", hour)},
			dest: "http://sink.tenant-a.svc.cluster.local/", wantStatus: 401, wantReason: ReasonUnauthenticated},
		{name: "expired", auth: []string{"Bearer " + mint.token(t, "system:serviceaccount:tenant-a:app", "event-forwarding-proxy", time.Now().Add(-time.Minute))},
			dest: "http://sink.tenant-a.svc.cluster.local/", wantStatus: 401, wantReason: ReasonUnauthenticated},
		{name: "not a service account", auth: []string{"Bearer " + mint.token(t, "alice", "event-forwarding-proxy", hour)},
			dest: "http://sink.tenant-a.svc.cluster.local/", wantStatus: 401, wantReason: ReasonUnauthenticated},
		{name: "tenant reaches its namespace", auth: []string{"Bearer " + tenantA}, dest: "http://sink.tenant-a.svc.cluster.local/", wantStatus: 200},
		{name: "tenant refused another namespace", auth: []string{"Bearer " + tenantA}, dest: "http://sink.tenant-b.svc.cluster.local/", wantStatus: 403, wantReason: ReasonDestinationDenied},
		{name: "tenant cannot pose as another", auth: []string{"Bearer " + tenantA}, kn: "tenant-b", dest: "http://sink.tenant-b.svc.cluster.local/", wantStatus: 403, wantReason: ReasonDestinationDenied},
		{name: "adapter reaches any namespace", auth: []string{"Bearer " + adapter}, kn: "tenant-b", dest: "http://sink.tenant-b.svc.cluster.local/", wantStatus: 200},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := dest.Count()
			req := p.newRequest(t, tc.dest, strings.NewReader("x"))
			for _, a := range tc.auth {
				req.Header.Add(delivery.HeaderForwardAuthorization, a)
			}
			req.Header.Set("Authorization", "Bearer token-for-the-destination")
			if tc.kn != "" {
				req.Header.Set("Kn-Namespace", tc.kn)
			}
			resp, body := do(t, h1Client(t), req)
			if tc.wantReason != "" {
				wantProxyError(t, resp, body, tc.wantReason)
				if dest.Count() != before {
					t.Error("a refused call reached the destination")
				}
				return
			}
			if resp.StatusCode != tc.wantStatus {
				t.Fatalf("status %d (%s), want %d", resp.StatusCode, body, tc.wantStatus)
			}
			got := dest.Requests()[dest.Count()-1]
			if got.Header.Get("Authorization") != "Bearer token-for-the-destination" {
				t.Error("the caller's own Authorization did not reach the destination")
			}
			if got.Header.Get(delivery.HeaderForwardAuthorization) != "" {
				t.Error("the proxy's token reached the destination")
			}
		})
	}
}

// TestAuthCachesVerifiedTokens: an adapter that reuses its token pays one
// signature check, not one per event.
func TestAuthCachesVerifiedTokens(t *testing.T) {
	mint := newTokenMint(t)
	now := time.Now()
	a := NewOIDCAuthenticator(mint)
	a.Now = func() time.Time { return now }
	tok := mint.token(t, "system:serviceaccount:knative-eventing:adapter", "event-forwarding-proxy", now.Add(time.Hour))
	for range 5 {
		id, err := a.Authenticate(context.Background(), tok)
		if err != nil || id != (Identity{Namespace: "knative-eventing", ServiceAccount: "adapter"}) {
			t.Fatalf("Authenticate = %v, %v", id, err)
		}
	}
	if n := mint.verifies.Load(); n != 1 {
		t.Errorf("%d signature checks for one token, want 1", n)
	}
	now = now.Add(cacheFor)
	if _, err := a.Authenticate(context.Background(), tok); err != nil {
		t.Fatal(err)
	}
	if n := mint.verifies.Load(); n != 2 {
		t.Errorf("%d signature checks after the cache period, want 2", n)
	}
}
