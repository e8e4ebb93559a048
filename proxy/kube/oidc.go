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

// Package kube is the proxy's side of the Kubernetes API: the service
// account token issuer's discovery for OIDC, and the trust bundles https
// destinations verify against. It is apart from proxy so that the handler
// chain, and every test that links only it, needs no Kubernetes client.
package kube

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"knative.dev/event-forwarding-proxy/config"
	"knative.dev/event-forwarding-proxy/proxy"
)

// NewAuthenticator discovers the service-account token issuer
// cfg names (the Kubernetes API server) and returns an authenticator for
// tokens whose audience is cfg.OIDCAudience. Discovery and keys are fetched
// with the process's Kubernetes credentials: KUBECONFIG when set, the pod's
// service account in a cluster, so that the API server's discovery
// endpoints need not be open to anonymous callers. It retries discovery
// until ctx ends.
func NewAuthenticator(ctx context.Context, cfg *config.Proxy) (*proxy.OIDCAuthenticator, error) {
	client, err := httpClient()
	if err != nil {
		return nil, err
	}
	// The provider keeps this context for fetching keys later: it carries
	// the client, never a deadline.
	octx := oidc.ClientContext(context.Background(), client)
	for {
		provider, err := oidc.NewProvider(octx, cfg.OIDCIssuer)
		if err == nil {
			return proxy.NewOIDCAuthenticator(provider.Verifier(&oidc.Config{ClientID: cfg.OIDCAudience})), nil
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("OIDC discovery of %s: %w", cfg.OIDCIssuer, err)
		case <-time.After(time.Second):
		}
	}
}

// httpClient returns an HTTP client that trusts the API server
// and presents this process's credentials to it.
func httpClient() (*http.Client, error) {
	rc, err := restConfig()
	if err != nil {
		return nil, err
	}
	if rc == nil {
		return &http.Client{Timeout: 10 * time.Second}, nil
	}
	c, err := rest.HTTPClientFor(rc)
	if err != nil {
		return nil, err
	}
	c.Timeout = 10 * time.Second
	return c, nil
}

// restConfig is KUBECONFIG when set, the pod's service account
// in a cluster, and nil elsewhere.
func restConfig() (*rest.Config, error) {
	switch {
	case os.Getenv("KUBECONFIG") != "":
		return clientcmd.BuildConfigFromFlags("", os.Getenv("KUBECONFIG"))
	case os.Getenv("KUBERNETES_SERVICE_HOST") != "":
		return rest.InClusterConfig()
	default:
		return nil, nil
	}
}
