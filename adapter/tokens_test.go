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
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"knative.dev/event-forwarding-proxy/delivery"
	"knative.dev/event-forwarding-proxy/test/testproc"
)

// countingTokens is a fake TokenSource: token "<ns>/<name>@<audience>#<n>"
// valid for lifetime, counting calls; fail makes it fail; gate, when set,
// holds every call until closed.
type countingTokens struct {
	clock    *fakeClock
	lifetime time.Duration
	calls    atomic.Int64
	fail     atomic.Bool
	gate     chan struct{}
}

func (c *countingTokens) Token(ctx context.Context, sa ServiceAccount, audience string) (Token, error) {
	n := c.calls.Add(1)
	if c.gate != nil {
		select {
		case <-c.gate:
		case <-ctx.Done():
			return Token{}, ctx.Err()
		}
	}
	if c.fail.Load() {
		return Token{}, errors.New("token request refused")
	}
	var exp time.Time
	if c.lifetime > 0 {
		exp = c.clock.Now().Add(c.lifetime)
	}
	return Token{Value: fmt.Sprintf("%s@%s#%d", sa, audience, n), Expires: exp}, nil
}

// tokenStep advances the clock, then asks for a token and wants the one
// with serial want.
type tokenStep struct {
	advance time.Duration
	want    int
}

func TestCachedTokens(t *testing.T) {
	sa := ServiceAccount{Namespace: "knative-eventing", Name: "adapter"}
	tests := []struct {
		name     string
		lifetime time.Duration
		steps    []tokenStep
	}{
		{name: "reused until 80 % of its lifetime", lifetime: time.Hour, steps: []tokenStep{
			{0, 1}, {30 * time.Minute, 1}, {17 * time.Minute, 1}, {2 * time.Minute, 2}, {47 * time.Minute, 2}, {time.Minute, 3}}},
		{name: "no expiry: a minute", lifetime: 0, steps: []tokenStep{{0, 1}, {59 * time.Second, 1}, {time.Second, 2}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			clock := newFakeClock()
			src := &countingTokens{clock: clock, lifetime: tc.lifetime}
			c := &CachedTokens{Source: src, Now: clock.Now}
			for i, s := range tc.steps {
				clock.Advance(s.advance)
				tok, err := c.Token(context.Background(), sa, "aud")
				if err != nil {
					t.Fatal(err)
				}
				if want := "knative-eventing/adapter@aud#" + strconv.Itoa(s.want); tok.Value != want {
					t.Fatalf("step %d: token %q, want %q", i, tok.Value, want)
				}
			}
		})
	}
}

func TestCachedTokensKeys(t *testing.T) {
	clock := newFakeClock()
	src := &countingTokens{clock: clock, lifetime: time.Hour}
	c := &CachedTokens{Source: src, Now: clock.Now}
	keys := []struct {
		sa  ServiceAccount
		aud string
	}{
		{ServiceAccount{"a", "x"}, "p"}, {ServiceAccount{"a", "x"}, "q"}, {ServiceAccount{"b", "x"}, "p"}, {ServiceAccount{"a", "y"}, "p"},
	}
	for round := range 3 {
		for _, k := range keys {
			if _, err := c.Token(context.Background(), k.sa, k.aud); err != nil {
				t.Fatalf("round %d: %v", round, err)
			}
		}
	}
	if n := src.calls.Load(); n != int64(len(keys)) {
		t.Errorf("%d token requests, want one per service account and audience (%d)", n, len(keys))
	}
}

func TestCachedTokensErrorsAreNotCached(t *testing.T) {
	clock := newFakeClock()
	src := &countingTokens{clock: clock, lifetime: time.Hour}
	src.fail.Store(true)
	c := &CachedTokens{Source: src, Now: clock.Now}
	sa := ServiceAccount{"ns", "sa"}
	if _, err := c.Token(context.Background(), sa, "aud"); !errors.Is(err, ErrNoToken) {
		t.Fatalf("error %v, want ErrNoToken", err)
	}
	src.fail.Store(false)
	if _, err := c.Token(context.Background(), sa, "aud"); err != nil {
		t.Fatalf("after the failure: %v", err)
	}
	if n := src.calls.Load(); n != 2 {
		t.Errorf("%d requests, want 2", n)
	}
}

func TestCachedTokensConcurrentCallersShareOneRequest(t *testing.T) {
	clock := newFakeClock()
	src := &countingTokens{clock: clock, lifetime: time.Hour, gate: make(chan struct{})}
	c := &CachedTokens{Source: src, Now: clock.Now}
	const callers = 200
	var wg sync.WaitGroup
	errs := make(chan error, callers)
	for range callers {
		wg.Go(func() {
			_, err := c.Token(ctxFor(t, 10*time.Second), ServiceAccount{"ns", "sa"}, "aud")
			errs <- err
		})
	}
	testproc.Eventually(t, 10*time.Second, "a token request started", func() bool { return src.calls.Load() > 0 })
	close(src.gate)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if n := src.calls.Load(); n != 1 {
		t.Errorf("%d token requests for %d concurrent callers, want 1", n, callers)
	}
}

func TestCachedTokensBounded(t *testing.T) {
	clock := newFakeClock()
	src := &countingTokens{clock: clock, lifetime: time.Hour}
	c := &CachedTokens{Source: src, Now: clock.Now, MaxEntries: 10}
	for i := range 25 {
		if _, err := c.Token(context.Background(), ServiceAccount{"ns", strconv.Itoa(i)}, "aud"); err != nil {
			t.Fatal(err)
		}
	}
	c.mu.Lock()
	n := len(c.entries)
	c.mu.Unlock()
	if n > 10 {
		t.Errorf("%d cached tokens, bound 10", n)
	}
}

// TestSenderTokens: the proxy's token (the adapter's identity) goes in
// Kn-Forward-Authorization and the source's token for the sink in
// Authorization; a tick of many sends asks for each token once.
func TestSenderTokens(t *testing.T) {
	clock := newFakeClock()
	proxy := newServer(t, statuses([]int{202}, nil))
	sink := newServer(t, nil)
	src := &countingTokens{clock: clock, lifetime: time.Hour}
	s := testSender(SenderParams{Tokens: src, ProxyIdentity: ServiceAccount{"knative-eventing", "adapter"}}, clock)
	target := Target{URL: sink.url(t), Namespace: "tenant", ServiceAccount: "oidc-ping", Audience: "sink-aud"}

	const events = 50
	var wg sync.WaitGroup
	for _, forward := range []bool{false, true} {
		if forward {
			s.SetForwarding(forwardingTo(t, proxy))
		}
		for range events {
			wg.Go(func() {
				if _, err := s.Send(ctxFor(t, 10*time.Second), target, testEvent("e")); err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
	}
	if n := src.calls.Load(); n != 2 {
		t.Errorf("%d token requests for %d sends, want 2 (the sink's and the proxy's)", n, 2*events)
	}
	direct, forwarded := sink.requests()[0].Header, proxy.requests()[0].Header
	got := map[string]string{
		"direct Authorization":               direct.Get("Authorization"),
		"direct Kn-Forward-Authorization":    direct.Get(delivery.HeaderForwardAuthorization),
		"forwarded Authorization":            forwarded.Get("Authorization"),
		"forwarded Kn-Forward-Authorization": forwarded.Get(delivery.HeaderForwardAuthorization),
	}
	want := map[string]string{
		"direct Authorization":               "Bearer tenant/oidc-ping@sink-aud#1",
		"direct Kn-Forward-Authorization":    "",
		"forwarded Authorization":            "Bearer tenant/oidc-ping@sink-aud#1",
		"forwarded Kn-Forward-Authorization": "Bearer knative-eventing/adapter@event-forwarding-proxy#2",
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("tokens (-want +got):\n%s", d)
	}

	// Past 80 % of the lifetime, each is asked for once more.
	clock.Advance(49 * time.Minute)
	for range 10 {
		if _, err := s.Send(ctxFor(t, 10*time.Second), target, testEvent("e")); err != nil {
			t.Fatal(err)
		}
	}
	if n := src.calls.Load(); n != 4 {
		t.Errorf("%d token requests after expiry, want 4", n)
	}
}

func TestSenderTokenFailures(t *testing.T) {
	tests := []struct {
		name       string
		proxyIdent ServiceAccount
		target     Target
		wantErr    bool
		fallback   bool
	}{
		{name: "no proxy token: falls back, sink token fails too", proxyIdent: ServiceAccount{"ke", "a"},
			target: Target{Namespace: "t", ServiceAccount: "s", Audience: "aud"}, wantErr: true, fallback: true},
		{name: "no proxy token, sink without audience: delivered direct", proxyIdent: ServiceAccount{"ke", "a"},
			target: Target{Namespace: "t"}, fallback: true},
		{name: "no identity for the proxy at all: delivered direct", target: Target{Namespace: "t"}, fallback: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			clock := newFakeClock()
			proxy := newServer(t, statuses([]int{202}, nil))
			sink := newServer(t, nil)
			src := &countingTokens{clock: clock, lifetime: time.Hour}
			src.fail.Store(true)
			s := testSender(SenderParams{Tokens: src, ProxyIdentity: tc.proxyIdent}, clock)
			s.SetForwarding(forwardingTo(t, proxy))
			tc.target.URL = sink.url(t)
			res, err := s.Send(ctxFor(t, 10*time.Second), tc.target, testEvent("e"))
			if (err != nil) != tc.wantErr || res.Fallback != tc.fallback {
				t.Fatalf("error %v fallback %v; want error %v fallback %v", err, res.Fallback, tc.wantErr, tc.fallback)
			}
			if proxy.count() != 0 {
				t.Errorf("the proxy got %d calls without a token", proxy.count())
			}
			wantSink := 1
			if tc.wantErr {
				wantSink = 0
			}
			if sink.count() != wantSink {
				t.Errorf("the sink got %d calls, want %d", sink.count(), wantSink)
			}
			for _, r := range sink.requests() {
				if r.Header.Get("Authorization") != "" {
					t.Errorf("Authorization %q", r.Header.Get("Authorization"))
				}
			}
		})
	}
}
