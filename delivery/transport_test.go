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

package delivery_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"knative.dev/event-forwarding-proxy/delivery"
	"knative.dev/event-forwarding-proxy/test/testproc"
)

// newBackend starts a loopback server speaking HTTP/1.1 and h2c that
// records the protocol of each request and counts new connections.
func newBackend(t *testing.T, h http.HandlerFunc) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	var conns atomic.Int64
	srv := httptest.NewUnstartedServer(h)
	srv.Config.Protocols = new(http.Protocols)
	srv.Config.Protocols.SetHTTP1(true)
	srv.Config.Protocols.SetUnencryptedHTTP2(true)
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	return srv, &conns
}

// roundTrip GETs url through rt and closes the answer; for calls made on
// goroutines of their own, which must not fail the test themselves.
func roundTrip(rt http.RoundTripper, url string) error {
	req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := rt.RoundTrip(req)
	if err != nil {
		return err
	}
	return resp.Body.Close()
}

func get(t *testing.T, rt http.RoundTripper, url string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := rt.RoundTrip(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("reading the body of GET %s: %v", url, err)
	}
	return resp, string(body)
}

func TestTransportsFor(t *testing.T) {
	trs := delivery.NewTransports(delivery.TransportParams{})
	tests := []struct {
		name   string
		scheme string
		h2c    bool
		want   http.RoundTripper
	}{
		{name: "http with h2c", scheme: "http", h2c: true, want: trs.H2C},
		{name: "http without h2c", scheme: "http", want: trs.Plain},
		{name: "https with h2c", scheme: "https", h2c: true, want: trs.TLS},
		{name: "https without h2c", scheme: "https", want: trs.TLS},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := trs.For(tt.scheme, tt.h2c); got != tt.want {
				t.Errorf("For(%q, %v) is the wrong transport", tt.scheme, tt.h2c)
			}
		})
	}
}

func TestNewTransportsSettings(t *testing.T) {
	type settings struct {
		MaxIdleConnsPerHost    int
		IdleConnTimeout        time.Duration
		TLSHandshakeTimeout    time.Duration
		MaxResponseHeaderBytes int64
		DisableCompression     bool
		HasProxy               bool
	}
	tests := []struct {
		name   string
		params delivery.TransportParams
		want   settings
	}{{
		name: "defaults",
		want: settings{
			MaxIdleConnsPerHost: 1024, IdleConnTimeout: 5 * time.Minute, TLSHandshakeTimeout: 10 * time.Second,
			MaxResponseHeaderBytes: 64 << 10, DisableCompression: true,
		},
	}, {
		name: "overrides",
		params: delivery.TransportParams{
			MaxIdleConnsPerHost: 7, IdleConnTimeout: time.Minute, TLSHandshakeTimeout: 3 * time.Second,
			MaxResponseHeaderBytes: 1 << 10,
		},
		want: settings{
			MaxIdleConnsPerHost: 7, IdleConnTimeout: time.Minute, TLSHandshakeTimeout: 3 * time.Second,
			MaxResponseHeaderBytes: 1 << 10, DisableCompression: true,
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			trs := delivery.NewTransports(tt.params)
			plain := settings{
				MaxIdleConnsPerHost:    trs.Plain.MaxIdleConnsPerHost,
				IdleConnTimeout:        trs.Plain.IdleConnTimeout,
				TLSHandshakeTimeout:    tt.want.TLSHandshakeTimeout, // no TLS
				MaxResponseHeaderBytes: trs.Plain.MaxResponseHeaderBytes,
				DisableCompression:     true, // never asks for compression
			}
			if diff := cmp.Diff(tt.want, plain); diff != "" {
				t.Errorf("Plain settings (-want +got):\n%s", diff)
			}
			tls := settings{
				MaxIdleConnsPerHost:    trs.TLS.Transport().MaxIdleConnsPerHost,
				IdleConnTimeout:        trs.TLS.Transport().IdleConnTimeout,
				TLSHandshakeTimeout:    trs.TLS.Transport().TLSHandshakeTimeout,
				MaxResponseHeaderBytes: trs.TLS.Transport().MaxResponseHeaderBytes,
				DisableCompression:     trs.TLS.Transport().DisableCompression,
				HasProxy:               trs.TLS.Transport().Proxy != nil,
			}
			if diff := cmp.Diff(tt.want, tls); diff != "" {
				t.Errorf("TLS settings (-want +got):\n%s", diff)
			}
			h2 := settings{
				MaxIdleConnsPerHost:    tt.want.MaxIdleConnsPerHost, // h2c pools streams, not idle connections
				IdleConnTimeout:        trs.H2C.IdleConnTimeout,
				TLSHandshakeTimeout:    tt.want.TLSHandshakeTimeout, // no TLS
				MaxResponseHeaderBytes: trs.H2C.MaxResponseHeaderBytes,
				DisableCompression:     true, // never asks for compression
			}
			if diff := cmp.Diff(tt.want, h2); diff != "" {
				t.Errorf("H2C settings (-want +got):\n%s", diff)
			}
		})
	}
}

func TestTransportsProtocol(t *testing.T) {
	srv, _ := newBackend(t, func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, r.Proto)
	})
	trs := delivery.NewTransports(delivery.TransportParams{})
	t.Cleanup(trs.CloseIdleConnections)
	tests := []struct {
		name      string
		h2c       bool
		wantMajor int
	}{
		{name: "h2c", h2c: true, wantMajor: 2},
		{name: "http1", h2c: false, wantMajor: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, serverProto := get(t, trs.For("http", tt.h2c), srv.URL)
			if resp.ProtoMajor != tt.wantMajor {
				t.Errorf("client saw %s, want HTTP/%d", resp.Proto, tt.wantMajor)
			}
			if want := map[int]string{1: "HTTP/1.1", 2: "HTTP/2.0"}[tt.wantMajor]; serverProto != want {
				t.Errorf("handler saw %s, want %s", serverProto, want)
			}
		})
	}
}

func TestTransportsReuseConnections(t *testing.T) {
	tests := []struct {
		name string
		h2c  bool
	}{
		{name: "http1", h2c: false},
		{name: "h2c", h2c: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv, _ := newBackend(t, func(w http.ResponseWriter, r *http.Request) {
				io.WriteString(w, "ok")
			})
			// Counted where the transport dials: the server's count would
			// also see a stray connection from an earlier test's goroutine
			// to a port the system has since given to this server.
			var dials atomic.Int64
			trs := delivery.NewTransports(delivery.TransportParams{Control: func(string, string, syscall.RawConn) error {
				dials.Add(1)
				return nil
			}})
			t.Cleanup(trs.CloseIdleConnections)
			for range 3 {
				get(t, trs.For("http", tt.h2c), srv.URL)
			}
			if got := dials.Load(); got != 1 {
				t.Errorf("3 sequential requests dialed %d connections, want 1", got)
			}
		})
	}
}

// TestTransportsConcurrentH2CShareOneConnection pins the point of h2c:
// held calls to one destination multiplex on one connection. The calls
// start one after another, as held calls pile up, and are all held at once
// at the end. (Calls that all start at the same instant on a busy machine
// may each dial before the first connection is up: Go's transport does not
// wait for a dial in progress.)
func TestTransportsConcurrentH2CShareOneConnection(t *testing.T) {
	const calls = 20
	var arrived atomic.Int64
	release := make(chan struct{})
	srv, conns := newBackend(t, func(w http.ResponseWriter, r *http.Request) {
		arrived.Add(1)
		<-release
	})
	trs := delivery.NewTransports(delivery.TransportParams{})
	t.Cleanup(trs.CloseIdleConnections)
	errs := make(chan error, calls)
	for i := range calls {
		go func() { errs <- roundTrip(trs.H2C, srv.URL+"/held") }()
		testproc.Eventually(t, 10*time.Second, fmt.Sprintf("call %d reaches the destination", i), func() bool { return arrived.Load() > int64(i) })
	}
	close(release)
	for range calls {
		if err := <-errs; err != nil {
			t.Errorf("RoundTrip: %v", err)
		}
	}
	if got := conns.Load(); got != 1 {
		t.Errorf("%d held h2c calls opened %d connections, want 1", calls, got)
	}
}

// TestTransportsH2CBurstSharesConnections: calls that all start at the same
// instant towards a destination with no connection yet mostly wait for the
// first dials and share them instead of dialing one connection each (2,000
// such calls dialed 1,351 connections without MaxH2CConnsPerHost). The
// bound is not strict: Go's HTTP/2 layer dials past it when a connection
// fills up while the burst is being placed (6-12 connections for a bound of
// 4, 8-134 for 64 here). As long as connections times the destination's
// streams per connection cover them, all calls are held at once: none waits
// for another to end.
func TestTransportsH2CBurstSharesConnections(t *testing.T) {
	tests := []struct {
		name             string
		maxConns         int
		serverMaxStreams uint32
		calls            int
	}{
		{name: "one connection carries the burst", maxConns: 4, serverMaxStreams: 1000, calls: 500},
		{name: "the destination's stream limit spreads it over the bound", maxConns: 4, serverMaxStreams: 100, calls: 400},
		{name: "the default bound", serverMaxStreams: 1000, calls: 500},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var arrived atomic.Int64
			release := make(chan struct{})
			srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				arrived.Add(1)
				<-release
			}))
			srv.Config.Protocols = new(http.Protocols)
			srv.Config.Protocols.SetUnencryptedHTTP2(true)
			srv.Config.HTTP2 = &http.HTTP2Config{MaxConcurrentStreams: int(tt.serverMaxStreams)}
			srv.Start()
			t.Cleanup(srv.Close)
			var dials atomic.Int64
			trs := delivery.NewTransports(delivery.TransportParams{MaxH2CConnsPerHost: tt.maxConns, Control: func(string, string, syscall.RawConn) error {
				dials.Add(1)
				return nil
			}})
			t.Cleanup(trs.CloseIdleConnections)
			start := make(chan struct{})
			errs := make(chan error, tt.calls)
			for range tt.calls {
				go func() {
					<-start
					errs <- roundTrip(trs.H2C, srv.URL+"/held")
				}()
			}
			close(start)
			t.Cleanup(func() {
				select {
				case <-release:
				default:
					close(release) // the calls still held, when the wait below failed
				}
			})
			testproc.Eventually(t, 20*time.Second, fmt.Sprintf("all %d calls reach the destination at once (none waits for a connection)", tt.calls),
				func() bool { return arrived.Load() == int64(tt.calls) })
			close(release)
			for range tt.calls {
				if err := <-errs; err != nil {
					t.Errorf("RoundTrip: %v", err)
				}
			}
			if got := dials.Load(); got >= int64(tt.calls)/2 {
				t.Errorf("%d calls at once dialed %d connections: about one per call, not shared", tt.calls, got)
			}
			t.Logf("%d calls at once: %d connections", tt.calls, dials.Load())
		})
	}
}

func TestTransportsIgnoreEnvironmentProxy(t *testing.T) {
	t.Setenv("HTTP_PROXY", "http://127.0.0.1:1")
	t.Setenv("http_proxy", "http://127.0.0.1:1")
	t.Setenv("NO_PROXY", "")
	t.Setenv("no_proxy", "")
	srv, _ := newBackend(t, func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "direct")
	})
	trs := delivery.NewTransports(delivery.TransportParams{})
	t.Cleanup(trs.CloseIdleConnections)
	// Go never proxies loopback destinations, so the check is on a name
	// that a proxy-aware transport would send to HTTP_PROXY: the dial
	// records what is dialed and goes to the backend instead.
	var (
		mu     sync.Mutex
		dialed []string
	)
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		mu.Lock()
		dialed = append(dialed, addr)
		mu.Unlock()
		return (&net.Dialer{}).DialContext(ctx, network, srv.Listener.Addr().String())
	}
	for _, tt := range []struct {
		name string
		rt   func() http.RoundTripper
	}{{"plain http1", func() http.RoundTripper {
		p := delivery.NewTransports(delivery.TransportParams{}).Plain
		p.Dial = dial
		return p
	}}, {"tls", func() http.RoundTripper {
		if trs.TLS.Transport().Proxy != nil {
			t.Error("TLS: Proxy is set, want nil")
		}
		tr := trs.TLS.Transport().Clone()
		tr.DialContext = dial
		return tr
	}}, {"h2c", func() http.RoundTripper {
		tr := delivery.NewTransports(delivery.TransportParams{}).H2C
		tr.Dial = dial
		return tr
	}}} {
		t.Run(tt.name, func(t *testing.T) {
			mu.Lock()
			dialed = nil
			mu.Unlock()
			rt := tt.rt()
			t.Cleanup(rt.(interface{ CloseIdleConnections() }).CloseIdleConnections)
			if _, body := get(t, rt, "http://sink.example.svc.cluster.local/"); body != "direct" {
				t.Errorf("body %q, want %q", body, "direct")
			}
			mu.Lock()
			defer mu.Unlock()
			if want := []string{"sink.example.svc.cluster.local:80"}; !cmp.Equal(dialed, want) {
				t.Errorf("dialed %q, want %q", dialed, want)
			}
		})
	}
}

func TestTransportsSendNoAcceptEncoding(t *testing.T) {
	srv, _ := newBackend(t, func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, r.Header.Get("Accept-Encoding"))
	})
	trs := delivery.NewTransports(delivery.TransportParams{})
	t.Cleanup(trs.CloseIdleConnections)
	for _, tt := range []struct {
		name string
		tr   http.RoundTripper
	}{{"http1", trs.HTTP1}, {"tls", trs.TLS}, {"h2c", trs.H2C}} {
		t.Run(tt.name, func(t *testing.T) {
			if _, got := get(t, tt.tr, srv.URL); got != "" {
				t.Errorf("destination saw Accept-Encoding %q, want none (bodies pass through untouched)", got)
			}
		})
	}
}

func TestTransportsLimitResponseHeaders(t *testing.T) {
	srv, _ := newBackend(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Big", strings.Repeat("a", 8<<10))
	})
	trs := delivery.NewTransports(delivery.TransportParams{MaxResponseHeaderBytes: 4 << 10})
	t.Cleanup(trs.CloseIdleConnections)
	for _, tt := range []struct {
		name string
		tr   http.RoundTripper
	}{{"http1", trs.HTTP1}, {"tls", trs.TLS}, {"h2c", trs.H2C}} {
		t.Run(tt.name, func(t *testing.T) {
			req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, srv.URL, nil)
			if err != nil {
				t.Fatal(err)
			}
			resp, err := tt.tr.RoundTrip(req)
			if err == nil {
				resp.Body.Close()
				t.Fatalf("RoundTrip succeeded with %d header bytes over a 4 KiB limit", 8<<10)
			}
		})
	}
}
