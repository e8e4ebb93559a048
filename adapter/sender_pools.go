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
	"crypto/sha256"
	"fmt"
	"net/http"
	"net/url"
	"sync"

	"go.opentelemetry.io/otel/trace"

	"knative.dev/event-forwarding-proxy/delivery"
)

// maxCABundles bounds the pools kept for sinks with their own CA
// certificates; past it they are all dropped (and their idle connections
// closed) and rebuilt on demand.
const maxCABundles = 256

// pools are the Sender's connection pools, shared by every source and
// every tick: one pair of transports (HTTP/1.1 and h2c) for sinks the
// system roots (and trust bundles) verify and for the proxy, plus one per
// distinct CA bundle.
type pools struct {
	params   delivery.TransportParams
	trust    *delivery.TrustRoots
	h2cHosts []string // the sinks spoken to over h2c (SenderParams.SinkH2CHosts)
	tp       trace.TracerProvider
	base     *delivery.Transports
	rt1      http.RoundTripper // base.HTTP1, traced
	rt2c     http.RoundTripper // base.H2C, traced

	mu   sync.Mutex
	byCA map[[32]byte]http.RoundTripper
	caTr []*delivery.Transports
}

func newPools(p delivery.TransportParams, trust *delivery.TrustRoots, h2cHosts []string, tp trace.TracerProvider) *pools {
	if trust == nil {
		trust = delivery.NewTrustRoots()
	}
	p.Roots = trust
	base := delivery.NewTransports(p)
	return &pools{
		params: p, trust: trust, h2cHosts: h2cHosts, tp: tp, base: base,
		rt1:  delivery.TraceTransport(base.HTTP1, tp, nil),
		rt2c: delivery.TraceTransport(base.H2C, tp, nil),
		byCA: map[[32]byte]http.RoundTripper{},
	}
}

// forProxy returns the round tripper to the proxy: h2c for http (many
// streams, few connections), HTTP/1.1 or h2 over TLS for https.
func (p *pools) forProxy(u *url.URL) http.RoundTripper {
	if u.Scheme == "http" {
		return p.rt2c
	}
	return p.rt1
}

// forSink returns the round tripper to a sink: for https, one that trusts
// caCerts on top of the trust roots; for http, h2c when the sink's host
// is one of h2cHosts and HTTP/1.1 otherwise.
func (p *pools) forSink(u *url.URL, caCerts string) (http.RoundTripper, error) {
	switch {
	case u.Scheme == "https" && caCerts != "":
		return p.withCA(caCerts)
	case delivery.H2CTo(u, p.h2cHosts):
		return p.rt2c, nil
	}
	return p.rt1, nil
}

// withCA returns the transport trusting a PEM bundle, built once per
// bundle.
func (p *pools) withCA(caCerts string) (http.RoundTripper, error) {
	key := sha256.Sum256([]byte(caCerts))
	p.mu.Lock()
	defer p.mu.Unlock()
	if rt, ok := p.byCA[key]; ok {
		return rt, nil
	}
	roots, err := p.trust.With(caCerts)
	if err != nil {
		return nil, fmt.Errorf("the sink's CA certificates: %w", err)
	}
	params := p.params
	params.Roots = roots
	if len(p.byCA) >= maxCABundles {
		for _, t := range p.caTr {
			t.CloseIdleConnections()
			t.TLS.Close() // stops following the trust roots
		}
		clear(p.byCA)
		p.caTr = nil
	}
	t := delivery.NewTransports(params)
	rt := delivery.TraceTransport(t.HTTP1, p.tp, nil)
	p.byCA[key] = rt
	p.caTr = append(p.caTr, t)
	return rt, nil
}

// closeIdle closes the idle connections of every transport.
func (p *pools) closeIdle() {
	p.base.CloseIdleConnections()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, t := range p.caTr {
		t.CloseIdleConnections()
	}
}
