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
	"crypto/tls"
	"net"
	"net/http"
	"net/url"
	"strings"
	"syscall"
	"time"

	"knative.dev/event-forwarding-proxy/delivery/h2c"
	"knative.dev/event-forwarding-proxy/delivery/http1"
)

// TransportParams configures the transports that reach destinations.
type TransportParams struct {
	// DialTimeout bounds DNS plus TCP connect. If zero, 5 s.
	DialTimeout time.Duration
	// KeepAlive is the TCP keep-alive period. If zero, 30 s.
	KeepAlive time.Duration
	// IdleConnTimeout is how long an idle connection stays pooled. It must
	// outlive the gap between two PingSource ticks. If zero, 5 minutes.
	IdleConnTimeout time.Duration
	// MaxIdleConnsPerHost bounds the idle pool of one destination.
	// If zero, 1024.
	MaxIdleConnsPerHost int
	// MaxResponseHeaderBytes bounds a destination's response headers.
	// If zero, 64 KiB.
	MaxResponseHeaderBytes int64
	// TLSHandshakeTimeout bounds the TLS handshake. If zero, 10 s.
	TLSHandshakeTimeout time.Duration
	// TLSConfig is used for https destinations. If nil, the system roots.
	TLSConfig *tls.Config
	// Roots, when set, are the roots each new TLS connection verifies
	// against (a *TrustRoots, or TrustRoots.With), in place of TLSConfig's
	// RootCAs: trust that changes without a restart. After a change, no
	// new call uses a connection verified before it.
	Roots Roots
	// HTTP2 tunes HTTP/2: h2 over TLS, and for h2c the receive windows
	// and the ping health check (MaxReceiveBufferPerStream and
	// PerConnection, SendPingTimeout, PingTimeout). If nil, Go's defaults
	// over TLS and h2c's own (256 KiB, 4 MiB, 30 s, 15 s).
	HTTP2 *http.HTTP2Config
	// Resolver resolves destination names. If nil, Go's default resolver.
	Resolver *net.Resolver
	// Control, when set, is called on every socket before it connects, with
	// the resolved address: the place to refuse denied destinations.
	Control func(network, address string, c syscall.RawConn) error
	// Breaker refuses dials to a destination that keeps failing to
	// connect. If its Failures is zero, there is no breaker.
	Breaker BreakerParams
	// MaxH2CConnsPerHost bounds the h2c connections to one destination. A
	// call dials only when every connection carries as many streams as the
	// destination allows; past the bound it waits for a stream. (net/http's
	// transport, used before h2c.Transport, dialed about one connection per
	// call of a burst without such a bound: 2,000 calls at once dialed
	// 1,351.) Size it so that it times the destination's streams per
	// connection (RFC 9113 recommends at least 100) covers the calls one
	// destination may have at once. If zero, 64.
	MaxH2CConnsPerHost int
}

// Transports holds the shared pools that reach destinations: HTTP/1.1 to
// plain http:// ones (http1.Transport: no goroutine per connection, no
// buffer while a call waits), net/http's transport for https:// ones (h2 or
// HTTP/1.1, by ALPN), and h2c with prior knowledge (h2c.Transport: no
// goroutine per stream). All dial through the
// same dialer. They never use the environment's HTTP proxy settings, which
// would hide the real destination from the dial-time check, and, as
// RoundTrippers, never follow redirects.
type Transports struct {
	// HTTP1 sends a request by its scheme: http:// through Plain,
	// https:// through TLS.
	HTTP1 http.RoundTripper
	// Plain speaks HTTP/1.1 to http:// destinations.
	Plain *http1.Transport
	// TLS negotiates h2 or HTTP/1.1 with https:// destinations.
	TLS *TLSPool
	// H2C speaks HTTP/2 with prior knowledge to http:// destinations.
	H2C *h2c.Transport
}

// NewTransports builds the transports from p.
func NewTransports(p TransportParams) *Transports {
	dialer := &net.Dialer{
		Timeout:   orDefault(p.DialTimeout, 5*time.Second),
		KeepAlive: orDefault(p.KeepAlive, 30*time.Second),
		Control:   p.Control,
		Resolver:  p.Resolver,
	}
	dial := NewBreakers(p.Breaker).Dial(dialer.DialContext)
	base := func() *http.Transport {
		return &http.Transport{
			Proxy:                  nil,
			DialContext:            dial,
			MaxIdleConns:           0, // no global cap: per-host caps bound it
			MaxIdleConnsPerHost:    orDefault(p.MaxIdleConnsPerHost, 1024),
			IdleConnTimeout:        orDefault(p.IdleConnTimeout, 5*time.Minute),
			TLSHandshakeTimeout:    orDefault(p.TLSHandshakeTimeout, 10*time.Second),
			TLSClientConfig:        p.TLSConfig,
			MaxResponseHeaderBytes: orDefault(p.MaxResponseHeaderBytes, 64<<10),
			ExpectContinueTimeout:  time.Second,
			DisableCompression:     true, // bodies pass through byte for byte
			HTTP2:                  p.HTTP2,
		}
	}
	plain := &http1.Transport{
		Dial:                   dial,
		MaxIdleConnsPerHost:    orDefault(p.MaxIdleConnsPerHost, 1024),
		IdleConnTimeout:        orDefault(p.IdleConnTimeout, 5*time.Minute),
		MaxResponseHeaderBytes: orDefault(p.MaxResponseHeaderBytes, 64<<10),
	}
	tls := newTLSPool(func() *http.Transport {
		t := base()
		t.Protocols = new(http.Protocols)
		t.Protocols.SetHTTP1(true)
		t.Protocols.SetHTTP2(true)
		if p.Roots != nil {
			t.DialTLSContext = dialTLSWithRoots(dial, p.TLSConfig, p.Roots.Pool, t.TLSHandshakeTimeout)
		}
		return t
	})
	if p.Roots != nil {
		tls.stopRenewing = p.Roots.OnChange(tls.renew)
	}

	h2 := &h2c.Transport{
		Dial:                   dial,
		MaxConnsPerHost:        orDefault(p.MaxH2CConnsPerHost, 64),
		MaxResponseHeaderBytes: orDefault(p.MaxResponseHeaderBytes, 64<<10),
		IdleConnTimeout:        orDefault(p.IdleConnTimeout, 5*time.Minute),
	}
	if c := p.HTTP2; c != nil {
		h2.MaxReceiveBufferPerStream = c.MaxReceiveBufferPerStream
		h2.MaxReceiveBufferPerConnection = c.MaxReceiveBufferPerConnection
		h2.SendPingTimeout = c.SendPingTimeout
		h2.PingTimeout = c.PingTimeout
		h2.WriteTimeout = c.WriteByteTimeout
	}
	return &Transports{
		HTTP1: bySchemeTransport{plain: plain, tls: tls},
		Plain: plain, TLS: tls, H2C: h2,
	}
}

// For returns the transport for a destination with the given scheme: h2c
// only when asked for and the destination is plain http.
func (t *Transports) For(scheme string, h2c bool) http.RoundTripper {
	switch {
	case scheme != "http":
		return t.TLS
	case h2c:
		return t.H2C
	default:
		return t.Plain
	}
}

// H2CTo reports whether a request to u may go out as h2c with prior
// knowledge: u is plain http and its host matches one of h2cHosts
// (MatchHost). Whether a destination speaks h2c is never asked on the
// wire: any bytes sent to find out (the HTTP/2 preface) would reach an
// HTTP/1.1 server as a request its caller never sent, and Go's runs its
// handler for it. The configuration says so instead.
func H2CTo(u *url.URL, h2cHosts []string) bool {
	if u.Scheme != "http" || len(h2cHosts) == 0 {
		return false
	}
	return MatchHost(strings.TrimSuffix(strings.ToLower(u.Hostname()), "."), h2cHosts)
}

// CloseIdleConnections closes the idle connections of every pool.
func (t *Transports) CloseIdleConnections() {
	t.Plain.CloseIdleConnections()
	t.TLS.CloseIdleConnections()
	t.H2C.CloseIdleConnections()
}

// bySchemeTransport sends http:// requests through plain, others through tls.
type bySchemeTransport struct {
	plain *http1.Transport
	tls   *TLSPool
}

func (t bySchemeTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL != nil && req.URL.Scheme == "http" {
		return t.plain.RoundTrip(req)
	}
	return t.tls.RoundTrip(req)
}

// orDefault returns v, or def when v is not positive: how zero settings
// take their defaults.
func orDefault[T int | int64 | time.Duration](v, def T) T {
	if v <= 0 {
		return def
	}
	return v
}
