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
	"bufio"
	"context"
	"crypto/tls"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"knative.dev/event-forwarding-proxy/delivery"
	"knative.dev/event-forwarding-proxy/proxy/proxytest"
)

// TestUnreachableDestinations: every way a destination cannot be reached
// is answered 502 unreachable (never 504, never a hang) well before the
// call's deadline: within the dial timeout, or at once.
func TestUnreachableDestinations(t *testing.T) {
	// A port a socket holds, not a closed listener's: another test's
	// server could be given that one, and answer.
	closedURL := "http://" + proxytest.NewRefusingAddr(t)

	var plaintext, handled atomic.Int64
	tlsServer := httptest.NewUnstartedServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { handled.Add(1) }))
	tlsServer.Config.ErrorLog = log.New(logWriter(func(p []byte) (int, error) {
		if strings.Contains(string(p), "HTTP request to an HTTPS server") {
			plaintext.Add(1)
		}
		return len(p), nil
	}), "", 0)
	tlsServer.StartTLS()
	t.Cleanup(tlsServer.Close)
	trusted := tlsServer.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs
	_, tlsPort, _ := strings.Cut(strings.TrimPrefix(tlsServer.URL, "https://"), ":")

	nxdomain := proxytest.NewDNS(t, map[string][][]netip.Addr{})
	silent := proxytest.NewSilentDNS(t)
	fast := map[string]string{"FORWARD_DIAL_TIMEOUT": "300ms", "FORWARD_BREAKER_FAILURES": "0"}
	tests := []struct {
		name string
		dest string
		env  map[string]string
		edit func(*delivery.TransportParams)
	}{
		{name: "unknown name", dest: "http://nowhere.ns.svc.cluster.local/", env: fast,
			edit: func(p *delivery.TransportParams) { p.Resolver = nxdomain.Resolver() }},
		{name: "DNS does not answer", dest: "http://sink.ns.svc.cluster.local/", env: fast,
			edit: func(p *delivery.TransportParams) { p.Resolver = silent }},
		{name: "connection refused", dest: closedURL, env: fast},
		{name: "SYN black-holed", dest: "http://" + proxytest.NewBlackHole(t) + "/", env: fast},
		{name: "TLS signed by an unknown authority", dest: tlsServer.URL + "/", env: fast},
		{name: "TLS certificate for another name", dest: "https://localhost:" + tlsPort + "/",
			env:  map[string]string{"FORWARD_DIAL_TIMEOUT": "300ms", "FORWARD_ALLOWED_HOSTS": "localhost"},
			edit: func(p *delivery.TransportParams) { p.TLSConfig = &tls.Config{RootCAs: trusted} }},
	}
	for _, tt := range tests {
		for _, client := range []string{"http1", "h2c"} {
			t.Run(tt.name+"/"+client, func(t *testing.T) {
				trs := faultTransports(t, tt.env, tt.edit)
				fp := newFaultProxy(t, tt.env, nil, WithTransports(trs))
				c := h1Client(t)
				if client == "h2c" {
					c = h2cClient(t)
				}
				req := fp.newRequest(t, tt.dest, strings.NewReader("event"))
				req.Header.Set("Kn-Forward-Timeout", "PT8S")
				start := time.Now()
				resp, body := do(t, c, req)
				wantProxyError(t, resp, body, ReasonUnreachable)
				if took := time.Since(start); took > 5*time.Second {
					t.Errorf("answered after %s: the dial timeout (300ms) should have ended it, not the call's deadline (8s)", took)
				}
				proxytest.Eventually(t, 5*time.Second, func() bool { return fp.Limiter.Inflight() == 0 }, "the slot was not released")
			})
		}
	}
	if n := handled.Load(); n != 0 {
		t.Errorf("the TLS destination handled %d requests, want 0", n)
	}
	if n := plaintext.Load(); n != 0 {
		t.Errorf("the proxy fell back to plaintext %d times", n)
	}

	t.Run("control: the same TLS destination, trusted and named right", func(t *testing.T) {
		trs := faultTransports(t, nil, func(p *delivery.TransportParams) { p.TLSConfig = &tls.Config{RootCAs: trusted} })
		fp := newFaultProxy(t, nil, nil, WithTransports(trs))
		if resp, body := do(t, h1Client(t), fp.newRequest(t, tlsServer.URL+"/", strings.NewReader("e"))); resp.StatusCode != http.StatusOK {
			t.Errorf("status = %d %q, want 200", resp.StatusCode, body)
		}
	})
}

// logWriter adapts a function to io.Writer.
type logWriter func([]byte) (int, error)

func (f logWriter) Write(p []byte) (int, error) { return f(p) }

// TestDestinationAnswersPassThrough: in sync mode the destination's own
// refusals come back unchanged, Retry-After included, after one attempt.
func TestDestinationAnswersPassThrough(t *testing.T) {
	tests := []struct {
		name       string
		status     int
		retryAfter string
	}{
		{name: "503 with Retry-After in seconds", status: 503, retryAfter: "7"},
		{name: "429 with Retry-After in seconds", status: 429, retryAfter: "120"},
		{name: "503 with Retry-After as a date", status: 503, retryAfter: "Wed, 21 Oct 2065 07:28:00 GMT"},
		{name: "429 without Retry-After", status: 429},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dest := proxytest.NewDestination(t, func(w http.ResponseWriter, _ *http.Request, _ int) {
				if tt.retryAfter != "" {
					w.Header().Set("Retry-After", tt.retryAfter)
				}
				w.WriteHeader(tt.status)
				_, _ = w.Write([]byte("busy"))
			})
			fp := newFaultProxy(t, nil, nil)
			resp, body := do(t, h1Client(t), fp.newRequest(t, dest.URL, strings.NewReader("e")))
			if resp.StatusCode != tt.status || resp.Header.Get("Retry-After") != tt.retryAfter || string(body) != "busy" {
				t.Errorf("got %d Retry-After %q body %q, want %d %q %q", resp.StatusCode, resp.Header.Get("Retry-After"), body, tt.status, tt.retryAfter, "busy")
			}
			if v := resp.Header.Get(delivery.HeaderForwardError); v != "" {
				t.Errorf("the destination's answer carries %s %q", delivery.HeaderForwardError, v)
			}
			if n := dest.Count(); n != 1 {
				t.Errorf("the destination saw %d attempts, want 1", n)
			}
		})
	}
}

// TestDestinationInvalidStatus: a destination answering with three digits
// that are no HTTP status (000, 099) gets the caller a 502 unreachable,
// over plain HTTP/1.1 (delivery/http1 refuses the answer) and over TLS
// (net/http's transport passes it on; the forwarder refuses it), instead of
// a status the server would panic writing back; so does an answer that is
// not HTTP at all.
func TestDestinationInvalidStatus(t *testing.T) {
	cert := httptest.NewUnstartedServer(nil)
	cert.StartTLS()
	t.Cleanup(cert.Close)
	trusted := cert.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs
	answers := map[string]string{
		"000":      "HTTP/1.1 000 Odd\r\nContent-Length: 2\r\n\r\nok",
		"099":      "HTTP/1.1 099 Odd\r\nContent-Length: 2\r\n\r\nok",
		"not HTTP": "SSH-2.0-OpenSSH_9.6\r\n\r\n",
	}
	for name, answer := range answers {
		for _, scheme := range []string{"http", "https"} {
			t.Run(name+"/"+scheme, func(t *testing.T) {
				ln, err := net.Listen("tcp", "127.0.0.1:0")
				if err != nil {
					t.Fatal(err)
				}
				if scheme == "https" {
					cfg := cert.TLS.Clone()
					cfg.NextProtos = []string{"http/1.1"}
					ln = tls.NewListener(ln, cfg)
				}
				t.Cleanup(func() { ln.Close() })
				go func() {
					for {
						c, err := ln.Accept()
						if err != nil {
							return
						}
						go func() {
							defer c.Close()
							if _, err := http.ReadRequest(bufio.NewReader(c)); err == nil {
								_, _ = io.WriteString(c, answer)
							}
						}()
					}
				}()
				trs := faultTransports(t, nil, func(p *delivery.TransportParams) { p.TLSConfig = &tls.Config{RootCAs: trusted} })
				fp := newFaultProxy(t, nil, nil, WithTransports(trs))
				resp, body := do(t, h1Client(t), fp.newRequest(t, scheme+"://"+ln.Addr().String()+"/", strings.NewReader("e")))
				wantProxyError(t, resp, body, ReasonUnreachable)
			})
		}
	}
}

// TestDestinationGoAwayLetsHeldCallsFinish: a destination that shuts down
// gracefully while the proxy holds calls to it over h2c (GOAWAY, as a
// Knative revision's queue-proxy sends when its pod drains): the proxy's
// connection to it takes no new calls from then on, and the held calls
// still get their answers.
func TestDestinationGoAwayLetsHeldCallsFinish(t *testing.T) {
	const calls = 20
	hold := proxytest.NewHold(t)
	dest, _ := proxytest.NewCountedDestination(t, true, hold.Reply)
	tp := newHeldTestProxy(t, h2cLoopback)
	client := h2cClient(t)
	results := make([]<-chan result, calls)
	for i := range calls {
		results[i] = goDo(client, tp.newRequest(t, dest.URL+"/held", strings.NewReader("event")))
	}
	proxytest.Eventually(t, 10*time.Second, func() bool { return dest.Count() == calls }, "the destination holds every call")
	if n := tp.trs.H2C.Conns(); n != 1 {
		t.Fatalf("the calls went over %d h2c connections, want 1", n)
	}
	shut := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		shut <- dest.Config.Shutdown(ctx)
	}()
	proxytest.Eventually(t, 10*time.Second, func() bool { return tp.trs.H2C.Conns() == 0 },
		"the proxy's connection leaves its pool once the destination's GOAWAY comes")
	releaseHeld(t, hold, results)
	select {
	case err := <-shut:
		if err != nil {
			t.Errorf("the destination's graceful shutdown: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the destination's graceful shutdown did not end after its calls were answered")
	}
}
