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
	"context"
	"errors"
	"sync"
	"time"
)

// ServiceAccount names a Kubernetes service account.
type ServiceAccount struct {
	Namespace string
	Name      string
}

// IsZero reports whether sa names nothing.
func (sa ServiceAccount) IsZero() bool { return sa.Name == "" }

func (sa ServiceAccount) String() string { return sa.Namespace + "/" + sa.Name }

// Token is a bearer token and the time it stops being valid.
type Token struct {
	Value   string
	Expires time.Time
}

// TokenSource issues OIDC tokens for a service account and an audience.
// The real one asks the Kubernetes TokenRequest API (package
// adapter/kube); tests fake it.
type TokenSource interface {
	Token(ctx context.Context, sa ServiceAccount, audience string) (Token, error)
}

// ErrNoToken is wrapped by CachedTokens' errors.
var ErrNoToken = errors.New("no token")

// CachedTokens keeps the tokens of Source until shortly before they expire
// (at 80 % of their lifetime, as the kubelet renews projected tokens; a
// minute for a token without an expiry), so that a tick of thousands of
// events asks for each token once. A failed request is not cached. Concurrent
// callers of a missing token wait for one request. It is safe for
// concurrent use.
type CachedTokens struct {
	// Source issues the tokens. Required.
	Source TokenSource
	// MaxEntries bounds the cache; past it, expired tokens are forgotten,
	// then all of them. If zero, 10000.
	MaxEntries int
	// Now is the clock. If nil, time.Now.
	Now func() time.Time

	mu      sync.Mutex
	entries map[tokenKey]*tokenEntry
}

var _ TokenSource = (*CachedTokens)(nil)

type tokenKey struct {
	sa       ServiceAccount
	audience string
}

// tokenEntry is a token, or a request for one under way (ready open).
type tokenEntry struct {
	ready   chan struct{}
	tok     Token
	refresh time.Time // after this, a new token is requested
	err     error
}

// Token returns a cached token for sa and audience, or requests one.
func (c *CachedTokens) Token(ctx context.Context, sa ServiceAccount, audience string) (Token, error) {
	key := tokenKey{sa, audience}
	for {
		now := c.now()
		c.mu.Lock()
		e, ok := c.entries[key]
		if ok {
			select {
			case <-e.ready:
				if e.err == nil && now.Before(e.refresh) {
					c.mu.Unlock()
					return e.tok, nil
				}
				ok = false // failed or due: request a new one
			default:
			}
		}
		if !ok {
			e = &tokenEntry{ready: make(chan struct{})}
			c.put(key, e, now)
			c.mu.Unlock()
			return c.fetch(ctx, key, e)
		}
		c.mu.Unlock()
		select {
		case <-e.ready:
			if e.err == nil {
				return e.tok, nil
			}
			// The request this caller waited for failed (perhaps because
			// its own caller went away): try again under this context.
			if ctx.Err() != nil {
				return Token{}, ctx.Err()
			}
		case <-ctx.Done():
			return Token{}, ctx.Err()
		}
	}
}

// fetch requests the token for e and publishes the answer.
func (c *CachedTokens) fetch(ctx context.Context, key tokenKey, e *tokenEntry) (Token, error) {
	start := c.now()
	tok, err := c.Source.Token(ctx, key.sa, key.audience)
	if err == nil && tok.Value == "" {
		err = errors.New("empty token")
	}
	if err != nil {
		e.err = errors.Join(ErrNoToken, err)
		c.mu.Lock()
		if c.entries[key] == e {
			delete(c.entries, key)
		}
		c.mu.Unlock()
		close(e.ready)
		return Token{}, e.err
	}
	e.tok = tok
	if tok.Expires.IsZero() {
		e.refresh = start.Add(time.Minute)
	} else {
		e.refresh = start.Add(tok.Expires.Sub(start) * 4 / 5)
	}
	close(e.ready)
	return tok, nil
}

// put stores e under key, making room if needed; called with c.mu held.
func (c *CachedTokens) put(key tokenKey, e *tokenEntry, now time.Time) {
	if c.entries == nil {
		c.entries = map[tokenKey]*tokenEntry{}
	}
	limit := c.MaxEntries
	if limit <= 0 {
		limit = 10000
	}
	if len(c.entries) >= limit {
		for k, old := range c.entries {
			select {
			case <-old.ready:
				if !now.Before(old.refresh) {
					delete(c.entries, k)
				}
			default:
			}
		}
		if len(c.entries) >= limit {
			clear(c.entries) // waiters hold their entries: they still get answers
		}
	}
	c.entries[key] = e
}

func (c *CachedTokens) now() time.Time {
	if c.Now != nil {
		return c.Now()
	}
	return time.Now()
}
