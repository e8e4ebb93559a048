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

// Package kube connects the sender to a Kubernetes cluster: OIDC tokens
// from the TokenRequest API, the live config-event-forwarding ConfigMap, and
// the route shown on the adapter's own Pod.
// It is kept apart from package delivery so that the proxy, which shares
// delivery's transports, does not link the Kubernetes clientset.
package kube

import (
	"context"
	"fmt"
	"time"

	authv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"knative.dev/event-forwarding-proxy/adapter"
)

// TokenRequester issues service-account tokens through the TokenRequest API
// (POST .../serviceaccounts/<name>/token), as Knative's OIDC token provider
// does. The sender caches them (adapter.CachedTokens); the caller needs
// RBAC "create" on serviceaccounts/token in the namespaces it serves.
type TokenRequester struct {
	// Client reaches the API server. Required.
	Client kubernetes.Interface
	// Expiration is the lifetime asked for. If zero, 1 hour; the API
	// server refuses less than 10 minutes.
	Expiration time.Duration
}

var _ adapter.TokenSource = (*TokenRequester)(nil)

// NewTokenRequester returns a TokenRequester asking for one-hour tokens.
func NewTokenRequester(kc kubernetes.Interface) *TokenRequester {
	return &TokenRequester{Client: kc}
}

// Token requests a token for sa with the given audience.
func (r *TokenRequester) Token(ctx context.Context, sa adapter.ServiceAccount, audience string) (adapter.Token, error) {
	exp := r.Expiration
	if exp <= 0 {
		exp = time.Hour
	}
	secs := int64(exp / time.Second)
	tr, err := r.Client.CoreV1().ServiceAccounts(sa.Namespace).CreateToken(ctx, sa.Name, &authv1.TokenRequest{
		Spec: authv1.TokenRequestSpec{Audiences: []string{audience}, ExpirationSeconds: &secs},
	}, metav1.CreateOptions{})
	if err != nil {
		return adapter.Token{}, fmt.Errorf("TokenRequest for %s, audience %q: %w", sa, audience, err)
	}
	return adapter.Token{Value: tr.Status.Token, Expires: tr.Status.ExpirationTimestamp.Time}, nil
}
