//go:build integration

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

package e2e

import (
	"context"
	"testing"

	authv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"knative.dev/event-forwarding-proxy/test/apiserver"
	"knative.dev/event-forwarding-proxy/test/testproc"
)

// serviceAccountToken creates namespace ns and service account sa in it and
// returns a token for sa from the TokenRequest API with the given audience.
func serviceAccountToken(t *testing.T, kc kubernetes.Interface, ns, sa, audience string) string {
	t.Helper()
	ctx := context.Background()
	if _, err := kc.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil && !isAlreadyExists(err) {
		t.Fatal(err)
	}
	if _, err := kc.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa}}, metav1.CreateOptions{}); err != nil && !isAlreadyExists(err) {
		t.Fatal(err)
	}
	expiry := int64(600)
	tr, err := kc.CoreV1().ServiceAccounts(ns).CreateToken(ctx, sa, &authv1.TokenRequest{
		Spec: authv1.TokenRequestSpec{Audiences: []string{audience}, ExpirationSeconds: &expiry},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("TokenRequest for %s/%s: %v", ns, sa, err)
	}
	return tr.Status.Token
}

// TestOIDCAgainstARealAPIServer: the proxy verifies service-account tokens
// through a real API server's OIDC discovery; a tenant reaches its own
// namespace and is refused another's; the multi-tenant adapter of
// knative-eventing reaches any; expired-audience and foreign tokens are
// refused.
func TestOIDCAgainstARealAPIServer(t *testing.T) {
	s := apiserver.Start(t)
	kc, err := kubernetes.NewForConfig(s.Config)
	if err != nil {
		t.Fatal(err)
	}
	tenantA := serviceAccountToken(t, kc, "tenant-a", "app", "event-forwarding-proxy")
	tenantB := serviceAccountToken(t, kc, "tenant-b", "app", "event-forwarding-proxy")
	adapter := serviceAccountToken(t, kc, "knative-eventing", "pingsource-mt-adapter", "event-forwarding-proxy")
	wrongAudience := serviceAccountToken(t, kc, "tenant-a", "app", "some-other-service")

	p := startProxy(t, "FORWARD_AUTH=oidc", "FORWARD_OIDC_ISSUER="+s.Issuer, "KUBECONFIG="+s.Kubeconfig, "FORWARD_DIAL_TIMEOUT=1s")
	sink := testproc.NewSink(t, nil)
	for _, tc := range []struct {
		name   string
		token  string
		dest   string
		kn     string
		status int
		reason string
	}{
		{name: "no token", dest: sink.URL, status: 401, reason: "unauthenticated"},
		{name: "wrong audience", token: wrongAudience, dest: sink.URL, status: 401, reason: "unauthenticated"},
		{name: "not a token of this issuer", token: "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJ4In0.c2ln", dest: sink.URL, status: 401, reason: "unauthenticated"},
		{name: "tenant A refused tenant B's namespace", token: tenantA, dest: "http://sink.tenant-b.svc.cluster.local/", status: 403, reason: "destination_denied"},
		{name: "tenant B refused tenant A's namespace even naming it as tenant", token: tenantB, kn: "tenant-a", dest: "http://sink.tenant-a.svc.cluster.local/", status: 403, reason: "destination_denied"},
		{name: "tenant A refused a destination outside the cluster", token: tenantA, dest: sink.URL, status: 403, reason: "destination_denied"},
		// Authenticated and allowed: it gets as far as resolving the
		// service's name, which does not exist on this machine.
		{name: "tenant A reaches its own namespace", token: tenantA, dest: "http://sink.tenant-a.svc.cluster.local/", status: 502, reason: "unreachable"},
		{name: "the adapter reaches any tenant", token: adapter, kn: "tenant-b", dest: sink.URL, status: 200},
	} {
		t.Run(tc.name, func(t *testing.T) {
			headers := []string{"Kn-Forward-To", tc.dest, "Authorization", "Bearer for-the-sink"}
			if tc.token != "" {
				headers = append(headers, "Kn-Forward-Authorization", "Bearer "+tc.token)
			}
			if tc.kn != "" {
				headers = append(headers, "Kn-Namespace", tc.kn)
			}
			resp := p.post(t, "event", headers...)
			if tc.reason != "" {
				checkAnswer(t, readAnswer(t, resp), tc.status, tc.reason)
				return
			}
			resp.Body.Close()
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d, want %d", resp.StatusCode, tc.status)
			}
		})
	}
	reqs := sink.Requests()
	if len(reqs) != 1 {
		t.Fatalf("the sink got %d calls, want only the adapter's", len(reqs))
	}
	if h := reqs[0].Header; h.Get("Authorization") != "Bearer for-the-sink" || h.Get("Kn-Forward-Authorization") != "" {
		t.Errorf("the sink got Authorization %q and Kn-Forward-Authorization %q", h.Get("Authorization"), h.Get("Kn-Forward-Authorization"))
	}
}

func isAlreadyExists(err error) bool { return apierrors.IsAlreadyExists(err) }
