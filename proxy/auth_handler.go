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
	"net/http"
	"slices"
	"strings"

	"knative.dev/event-forwarding-proxy/delivery"
)

// AuthParams configure caller authentication.
type AuthParams struct {
	// Authenticator verifies the token in Kn-Forward-Authorization.
	// Required.
	Authenticator Authenticator
	// TrustedNamespaces are the namespaces whose service accounts serve
	// many tenants (multi-tenant adapters, in knative-eventing): they name
	// the tenant in Kn-Namespace and may reach any namespace. Any other
	// caller is its own tenant and reaches only its own namespace.
	TrustedNamespaces []string
}

// NewAuthHandler refuses a call without a valid token in
// Kn-Forward-Authorization (Bearer, audience = the proxy) with 401
// unauthenticated, and fixes the call's tenant from the verified identity.
// The caller's own Authorization header is never looked at: it is the
// caller's token for the destination and passes through.
func NewAuthHandler(p AuthParams, next http.Handler) http.Handler {
	return &authHandler{p: p, next: next}
}

type authHandler struct {
	p    AuthParams
	next http.Handler
}

func (h *authHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if h.authenticate(w, r) {
		h.next.ServeHTTP(w, r)
	}
}

// authenticate fixes r's caller and tenant from its token, or refuses r.
func (h *authHandler) authenticate(w http.ResponseWriter, r *http.Request) bool {
	c := callOf(w, r)
	token, ok := bearerToken(r.Header.Values(delivery.HeaderForwardAuthorization))
	if !ok {
		w.Header().Set("WWW-Authenticate", `Bearer realm="event-forwarding-proxy"`)
		writeError(w, ReasonUnauthenticated, "a bearer token for the proxy is required in "+delivery.HeaderForwardAuthorization)
		return false
	}
	id, err := h.p.Authenticator.Authenticate(r.Context(), token)
	if err != nil {
		w.Header().Set("WWW-Authenticate", `Bearer realm="event-forwarding-proxy", error="invalid_token"`)
		writeError(w, ReasonUnauthenticated, err.Error())
		return false
	}
	c.caller = id
	if slices.Contains(h.p.TrustedNamespaces, id.Namespace) {
		c.tenant = tenantOf(r.Header, id.Namespace)
	} else {
		c.tenant = id.Namespace
		c.onlyNamespace = id.Namespace
	}
	c.authenticated = true
	return true
}

// bearerToken reads the one "Bearer <token>" value of a header.
func bearerToken(values []string) (string, bool) {
	if len(values) != 1 {
		return "", false
	}
	scheme, token, ok := strings.Cut(strings.TrimSpace(values[0]), " ")
	token = strings.TrimSpace(token)
	if !ok || !strings.EqualFold(scheme, "Bearer") || token == "" {
		return "", false
	}
	return token, true
}
