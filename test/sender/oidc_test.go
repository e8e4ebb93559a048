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

package sender

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	authv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"knative.dev/event-forwarding-proxy/adapter"
	"knative.dev/event-forwarding-proxy/adapter/kube"
	"knative.dev/event-forwarding-proxy/config"
	"knative.dev/event-forwarding-proxy/test/apiserver"
)

// countingTokens counts the requests that reach the real TokenRequester.
type countingTokens struct {
	next  adapter.TokenSource
	calls atomic.Int64
}

func (c *countingTokens) Token(ctx context.Context, sa adapter.ServiceAccount, audience string) (adapter.Token, error) {
	c.calls.Add(1)
	return c.next.Token(ctx, sa, audience)
}

func createServiceAccount(t *testing.T, kc kubernetes.Interface, ns, name string) {
	t.Helper()
	ctx := context.Background()
	_, err := kc.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	_, err = kc.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
}

// TestOIDCTokensFromTheAPIServer: tokens come from the real TokenRequest
// API, once per service account and audience, and are reused across ticks
// and routes; the real proxy verifies its own (audience
// event-forwarding-proxy, the adapter's identity) and the sink gets the
// source's, which the API server's TokenReview accepts for the sink's
// audience.
func TestOIDCTokensFromTheAPIServer(t *testing.T) {
	t.Parallel()
	srv := apiserver.Start(t)
	kc, err := kubernetes.NewForConfig(srv.Config)
	if err != nil {
		t.Fatal(err)
	}
	createServiceAccount(t, kc, "knative-eventing", "pingsource-mt-adapter")
	createServiceAccount(t, kc, "tenant-a", "oidc-ping")
	proxy := startProxy(t, "FORWARD_AUTH=oidc", "FORWARD_OIDC_ISSUER="+srv.Issuer, "KUBECONFIG="+srv.Kubeconfig)
	sink := newSink(t)
	adapterSA := adapter.ServiceAccount{Namespace: "knative-eventing", Name: "pingsource-mt-adapter"}
	target := adapter.Target{URL: sink.url(t), Namespace: "tenant-a", ServiceAccount: "oidc-ping", Audience: "sink-audience"}

	tests := []struct {
		name          string
		proxyAudience string
		ticks         int
		forward       bool
		wantRoute     adapter.Route
		wantFallback  bool
		wantRequests  int64 // token requests for the whole case
	}{
		{name: "through the proxy, two ticks of 50 sources", ticks: 2, forward: true, wantRoute: adapter.RouteProxy, wantRequests: 2},
		{name: "direct, two ticks of 50 sources", ticks: 2, wantRoute: adapter.RouteDirect, wantRequests: 1},
		{name: "a token for the wrong audience: the proxy refuses it, events go direct", proxyAudience: "not-the-proxy", ticks: 1,
			forward: true, wantRoute: adapter.RouteDirect, wantFallback: true, wantRequests: 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tokens := &countingTokens{next: &kube.TokenRequester{Client: kc, Expiration: 10 * time.Minute}}
			logger, _ := testLogger(t)
			s := adapter.NewSender(adapter.SenderParams{Logger: logger, Tokens: tokens, ProxyIdentity: adapterSA, ProxyAudience: tc.proxyAudience})
			if tc.forward {
				s.SetForwarding(config.Forwarding{ProxyURL: mustURL(t, proxy.URL), Threshold: 0})
			}
			d := newDriver(t, s, target, strings.ReplaceAll(tc.name, " ", "_"))
			for range tc.ticks {
				var wg sync.WaitGroup
				for range 50 {
					wg.Go(func() {
						id, res, err := d.trySend()
						switch {
						case err != nil:
							t.Errorf("event %s: %v", id, err)
						case res.Route != tc.wantRoute || res.Fallback != tc.wantFallback:
							t.Errorf("event %s: route %s fallback %v, want %s %v", id, res.Route, res.Fallback, tc.wantRoute, tc.wantFallback)
						}
					})
				}
				wg.Wait()
			}
			if n := tokens.calls.Load(); n != tc.wantRequests {
				t.Errorf("%d TokenRequests for %d events, want %d", n, 50*tc.ticks, tc.wantRequests)
			}
			d.checkArrivals(sink)
		})
	}

	// Every token the sink got is the source's, for the sink's audience.
	seen := map[string]bool{}
	for _, a := range sink.all() {
		seen[a.Authorization] = true
	}
	for auth := range seen {
		tok, ok := strings.CutPrefix(auth, "Bearer ")
		if !ok {
			t.Fatalf("the sink got Authorization %q", auth)
		}
		tr, err := kc.AuthenticationV1().TokenReviews().Create(context.Background(), &authv1.TokenReview{
			Spec: authv1.TokenReviewSpec{Token: tok, Audiences: []string{"sink-audience"}},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if !tr.Status.Authenticated || tr.Status.User.Username != "system:serviceaccount:tenant-a:oidc-ping" {
			t.Errorf("the sink's token reviews as %+v", tr.Status)
		}
	}
	if got := proxy.metric("kn_forward_rejected_total", `reason="unauthenticated"`); got != 50 {
		t.Errorf("the proxy refused %v calls as unauthenticated, want the 50 with the wrong audience", got)
	}
}
