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

// Package naive is the bench's reference peer: the proxy anyone would write
// first, a plain httputil.ReverseProxy that reads Kn-Forward-To, with h2c
// on both sides and no other tuning than the streams per connection.
package naive

import (
	"context"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"time"
)

// Outbound protocols.
const (
	// H2C speaks HTTP/2 with prior knowledge to destinations.
	H2C = "h2c"
	// HTTP1 speaks HTTP/1.1 with a keep-alive pool to destinations.
	HTTP1 = "http1"
	// DefaultTransport is a clone of http.DefaultTransport (HTTP/1.1, two
	// idle connections per host): what a proxy gets with no tuning at all.
	DefaultTransport = "default"
)

// Params configure the naive peer.
type Params struct {
	// Outbound is H2C, HTTP1 or DefaultTransport. If empty, H2C.
	Outbound string
	// MaxConcurrentStreams is advertised to HTTP/2 callers. If zero,
	// 100000 (Go's default, 250, would only add connections).
	MaxConcurrentStreams int
	// MaxIdleConnsPerHost bounds the HTTP1 idle pool. If zero, 1024.
	MaxIdleConnsPerHost int
}

const headerForwardTo = "Kn-Forward-To"

// Handler returns the reverse proxy.
func Handler(p Params) http.Handler {
	var t http.RoundTripper
	switch p.Outbound {
	case DefaultTransport:
		dt := http.DefaultTransport.(*http.Transport).Clone()
		dt.Proxy = nil
		t = dt
	case HTTP1:
		t = &http.Transport{
			Proxy:               nil,
			MaxIdleConnsPerHost: orInt(p.MaxIdleConnsPerHost, 1024),
			IdleConnTimeout:     5 * time.Minute,
		}
	default:
		h2 := &http.Transport{Proxy: nil, Protocols: new(http.Protocols)}
		h2.Protocols.SetUnencryptedHTTP2(true)
		t = h2
	}
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			u, err := url.Parse(pr.In.Header.Get(headerForwardTo))
			if err != nil {
				u = &url.URL{}
			}
			pr.Out.URL = u
			pr.Out.Host = ""
			pr.Out.Header.Del(headerForwardTo)
		},
		Transport: t,
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get(headerForwardTo) == "" {
			http.Error(w, "missing "+headerForwardTo, http.StatusBadRequest)
			return
		}
		rp.ServeHTTP(w, r)
	})
}

// Serve serves the naive peer, HTTP/1.1 and h2c, on ln until ctx ends.
func Serve(ctx context.Context, ln net.Listener, p Params) error {
	srv := &http.Server{
		Handler:           Handler(p),
		ReadHeaderTimeout: 30 * time.Second,
		HTTP2:             &http.HTTP2Config{MaxConcurrentStreams: orInt(p.MaxConcurrentStreams, 100000)},
		Protocols:         new(http.Protocols),
	}
	srv.Protocols.SetHTTP1(true)
	srv.Protocols.SetUnencryptedHTTP2(true)
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	err := srv.Serve(ln)
	select {
	case <-ctx.Done():
		return nil // stopped: the error is the listener's closing
	default:
		return err
	}
}

func orInt(v, def int) int {
	if v <= 0 {
		return def
	}
	return v
}
