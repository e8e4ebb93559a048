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

package delivery

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// TrustRoots is the live set of CA certificates an https destination may
// be signed by: the system roots plus the trust bundles eventing
// distributes (package trustbundles keeps them current). Every new TLS
// connection verifies against the set of that moment, so a bundle added
// or rotated takes effect without a restart, and transports built on it
// (TransportParams.Roots) stop using connections verified before a change.
type TrustRoots struct {
	mu       sync.Mutex // serialises SetBundles and OnChange
	state    atomic.Pointer[trustState]
	onChange map[*func()]struct{}
}

// Roots are the CA certificates TLS connections verify against, and
// tell when they change: *TrustRoots, or TrustRoots.With.
type Roots interface {
	// Pool returns the roots of the moment. Callers must not change it.
	Pool() *x509.CertPool
	// OnChange makes every change call f after the new roots apply,
	// until the returned stop is called.
	OnChange(f func()) (stop func())
}

type trustState struct {
	// gen changes with every SetBundles, so pools derived from a state
	// know when they are stale.
	gen  uint64
	pool *x509.CertPool
	// bundled holds the SHA-256 of each bundle certificate's DER form.
	bundled map[[sha256.Size]byte]struct{}
}

// NewTrustRoots returns the system roots and no bundle yet.
func NewTrustRoots() *TrustRoots {
	r := &TrustRoots{}
	r.state.Store(&trustState{pool: systemRoots(), bundled: map[[sha256.Size]byte]struct{}{}})
	return r
}

// SetBundles replaces the bundles with the PEM certificates in bundles
// and returns how many certificates they held. Blocks that are not
// certificates, or do not parse, are skipped: one bad ConfigMap key must
// not take the good ones with it.
func (r *TrustRoots) SetBundles(bundles [][]byte) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	pool := systemRoots()
	bundled := map[[sha256.Size]byte]struct{}{}
	for _, b := range bundles {
		for _, der := range pemCertificates(b) {
			c, err := x509.ParseCertificate(der)
			if err != nil {
				continue
			}
			pool.AddCert(c)
			bundled[sha256.Sum256(der)] = struct{}{}
		}
	}
	r.state.Store(&trustState{gen: r.state.Load().gen + 1, pool: pool, bundled: bundled})
	for f := range r.onChange {
		(*f)()
	}
	return len(bundled)
}

// OnChange makes every SetBundles call f after the new roots apply, until
// stop is called.
func (r *TrustRoots) OnChange(f func()) (stop func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.onChange == nil {
		r.onChange = map[*func()]struct{}{}
	}
	key := &f
	r.onChange[key] = struct{}{}
	return func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		delete(r.onChange, key)
	}
}

// Pool returns the roots of the moment. Callers must not change it.
func (r *TrustRoots) Pool() *x509.CertPool { return r.state.Load().pool }

// Covers reports whether every certificate in caCerts (PEM) is in the
// bundles: then anyone who loads the same bundles, the proxy included,
// trusts what caCerts trusts. PEM with no certificate is not covered.
func (r *TrustRoots) Covers(caCerts string) bool {
	ders := pemCertificates([]byte(caCerts))
	if len(ders) == 0 {
		return false
	}
	bundled := r.state.Load().bundled
	for _, der := range ders {
		if _, ok := bundled[sha256.Sum256(der)]; !ok {
			return false
		}
	}
	return true
}

// With returns the roots of the moment plus the certificates in caCerts
// (PEM), rebuilt only when the bundles change. It fails when caCerts holds
// no certificate.
func (r *TrustRoots) With(caCerts string) (Roots, error) {
	var extra []*x509.Certificate
	for _, der := range pemCertificates([]byte(caCerts)) {
		if c, err := x509.ParseCertificate(der); err == nil {
			extra = append(extra, c)
		}
	}
	if len(extra) == 0 {
		return nil, errors.New("no PEM certificate among the CA certificates")
	}
	return &rootsWith{base: r, extra: extra}, nil
}

// rootsWith are a TrustRoots' roots plus certificates of their own.
type rootsWith struct {
	base  *TrustRoots
	extra []*x509.Certificate
	cur   atomic.Pointer[derivedPool]
}

type derivedPool struct {
	gen  uint64 // of the base's state it was built from
	pool *x509.CertPool
}

func (r *rootsWith) Pool() *x509.CertPool {
	s := r.base.state.Load()
	if d := r.cur.Load(); d != nil && d.gen == s.gen {
		return d.pool
	}
	pool := s.pool.Clone()
	for _, c := range r.extra {
		pool.AddCert(c)
	}
	r.cur.Store(&derivedPool{gen: s.gen, pool: pool})
	return pool
}

func (r *rootsWith) OnChange(f func()) (stop func()) { return r.base.OnChange(f) }

// pemCertificates returns the DER bytes of each CERTIFICATE block in b.
func pemCertificates(b []byte) [][]byte {
	var ders [][]byte
	for {
		var block *pem.Block
		block, b = pem.Decode(b)
		if block == nil {
			return ders
		}
		if block.Type == "CERTIFICATE" && len(block.Headers) == 0 {
			ders = append(ders, block.Bytes)
		}
	}
}

func systemRoots() *x509.CertPool {
	if p, err := x509.SystemCertPool(); err == nil && p != nil {
		return p
	}
	return x509.NewCertPool()
}

// dialTLSWithRoots returns a DialTLSContext that dials with dial and
// verifies the destination against roots() of the moment. net/http's own
// TLS dial takes RootCAs from a config fixed when the transport is built;
// verifying in a VerifyConnection hook instead would lose the host name
// for IP destinations, which send no SNI.
func dialTLSWithRoots(dial func(ctx context.Context, network, addr string) (net.Conn, error),
	base *tls.Config, roots func() *x509.CertPool, handshakeTimeout time.Duration,
) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		host, _, err := net.SplitHostPort(addr)
		if err != nil {
			return nil, err
		}
		conn, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		cfg := &tls.Config{MinVersion: tls.VersionTLS12}
		if base != nil {
			cfg = base.Clone()
		}
		if cfg.ServerName == "" {
			cfg.ServerName = host
		}
		cfg.RootCAs = roots()
		if len(cfg.NextProtos) == 0 {
			cfg.NextProtos = []string{"h2", "http/1.1"}
		}
		hctx, cancel := context.WithTimeout(ctx, handshakeTimeout)
		defer cancel()
		tc := tls.Client(conn, cfg)
		if err := tc.HandshakeContext(hctx); err != nil {
			_ = conn.Close()
			return nil, err
		}
		return tc, nil
	}
}
