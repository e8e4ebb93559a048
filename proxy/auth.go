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
	"crypto/sha256"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
)

// ErrUnauthenticated is wrapped by every token refusal.
var ErrUnauthenticated = errors.New("unauthenticated")

// Identity is a verified caller: a Kubernetes service account.
type Identity struct {
	Namespace      string
	ServiceAccount string
}

// Authenticator verifies a caller's bearer token.
type Authenticator interface {
	Authenticate(ctx context.Context, token string) (Identity, error)
}

// TokenVerifier is what OIDCAuthenticator needs of go-oidc's verifier.
type TokenVerifier interface {
	Verify(ctx context.Context, rawIDToken string) (*oidc.IDToken, error)
}

// OIDCAuthenticator verifies Kubernetes service-account tokens (audience =
// the proxy) through the issuer's OIDC discovery and keys, and remembers
// tokens it verified until they expire, so that an adapter reusing its
// token does not pay a signature check per event.
type OIDCAuthenticator struct {
	verifier TokenVerifier
	// MaxCached bounds the remembered tokens. If zero, 10000.
	MaxCached int
	// Now is the clock. If nil, time.Now.
	Now func() time.Time

	mu    sync.Mutex
	cache map[[32]byte]cachedIdentity
}

type cachedIdentity struct {
	id      Identity
	expires time.Time
}

// NewOIDCAuthenticator returns an authenticator using v.
func NewOIDCAuthenticator(v TokenVerifier) *OIDCAuthenticator {
	return &OIDCAuthenticator{verifier: v}
}

// cacheFor is the longest a verified token is trusted without a new check,
// even when it expires later.
const cacheFor = 5 * time.Minute

// Authenticate verifies token and returns the service account it names.
func (a *OIDCAuthenticator) Authenticate(ctx context.Context, token string) (Identity, error) {
	now := time.Now
	if a.Now != nil {
		now = a.Now
	}
	key := sha256.Sum256([]byte(token))
	a.mu.Lock()
	c, ok := a.cache[key]
	a.mu.Unlock()
	if ok && now().Before(c.expires) {
		return c.id, nil
	}
	tok, err := a.verifier.Verify(ctx, token)
	if err != nil {
		return Identity{}, fmt.Errorf("%w: %w", ErrUnauthenticated, err)
	}
	id, err := parseServiceAccount(tok.Subject)
	if err != nil {
		return Identity{}, err
	}
	expires := now().Add(cacheFor)
	if tok.Expiry.Before(expires) {
		expires = tok.Expiry
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.cache == nil {
		a.cache = map[[32]byte]cachedIdentity{}
	}
	limit := a.MaxCached
	if limit <= 0 {
		limit = 10000
	}
	if len(a.cache) >= limit {
		for k, v := range a.cache {
			if !now().Before(v.expires) {
				delete(a.cache, k)
			}
		}
		if len(a.cache) >= limit {
			clear(a.cache)
		}
	}
	a.cache[key] = cachedIdentity{id: id, expires: expires}
	return id, nil
}

// parseServiceAccount reads a subject "system:serviceaccount:<ns>:<name>".
func parseServiceAccount(sub string) (Identity, error) {
	rest, ok := strings.CutPrefix(sub, "system:serviceaccount:")
	ns, name, ok2 := strings.Cut(rest, ":")
	if !ok || !ok2 || !isDNSLabel(ns) || name == "" {
		return Identity{}, fmt.Errorf("%w: subject %q is not a service account", ErrUnauthenticated, sub)
	}
	return Identity{Namespace: ns, ServiceAccount: name}, nil
}
