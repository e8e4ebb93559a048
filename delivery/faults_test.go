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
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"knative.dev/event-forwarding-proxy/delivery"
	"knative.dev/event-forwarding-proxy/proxy/proxytest"
	"knative.dev/event-forwarding-proxy/test/testproc"
)

// silentResolver asks a DNS server that never answers; its sockets give up
// when the lookup is cancelled.
func silentResolver(t *testing.T) *net.Resolver {
	t.Helper()
	conn, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		c, err := d.DialContext(ctx, "udp", conn.LocalAddr().String())
		if err == nil {
			context.AfterFunc(ctx, func() { _ = c.SetDeadline(time.Unix(1, 0)) })
		}
		return c, err
	}}
}

// TestConnectTimeoutsAreUnreachable: a dial that times out (SYN
// black-holed, DNS silent) is Unreachable, every time, although Go's net
// package reports such a timeout as context.DeadlineExceeded only some of
// the time; a timeout of the call's own deadline stays TimedOut.
func TestConnectTimeoutsAreUnreachable(t *testing.T) {
	tests := []struct {
		name     string
		url      string
		resolver *net.Resolver
		deadline time.Duration // the call's; 0 for none
		want     delivery.Failure
	}{
		{name: "SYN black-holed", url: "http://" + proxytest.NewBlackHole(t) + "/", want: delivery.Unreachable},
		{name: "DNS silent", url: "http://sink.ns.svc.cluster.local/", resolver: silentResolver(t), want: delivery.Unreachable},
		{name: "SYN black-holed past the call's deadline", url: "http://" + proxytest.NewBlackHole(t) + "/", deadline: 20 * time.Millisecond, want: delivery.TimedOut},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			trs := delivery.NewTransports(delivery.TransportParams{DialTimeout: 50 * time.Millisecond, Resolver: tt.resolver})
			t.Cleanup(trs.CloseIdleConnections)
			for i := range 8 {
				ctx, cancel := context.WithCancel(context.Background())
				if tt.deadline > 0 {
					ctx, cancel = context.WithTimeout(context.Background(), tt.deadline)
				}
				req, _ := http.NewRequestWithContext(ctx, http.MethodPost, tt.url, nil)
				resp, err := trs.HTTP1.RoundTrip(req)
				if err == nil {
					resp.Body.Close()
					cancel()
					t.Fatalf("attempt %d reached the destination", i)
				}
				if got := delivery.Classify(ctx, err); got != tt.want {
					t.Errorf("attempt %d: Classify(%v) = %v, want %v", i, err, got, tt.want)
				}
				cancel()
			}
		})
	}
}

// TestBreakerThroughTransports: a destination that refuses connections
// opens its circuit after FORWARD_BREAKER_FAILURES calls; while open,
// calls fail at once with ErrBreakerOpen and nothing is dialed; once the
// destination is back and the cool-down has passed, calls flow again.
func TestBreakerThroughTransports(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close() // down
	var dials atomic.Int64
	trs := delivery.NewTransports(delivery.TransportParams{
		Breaker: delivery.BreakerParams{Failures: 3, Cooldown: 200 * time.Millisecond},
		Control: func(string, string, syscall.RawConn) error { dials.Add(1); return nil },
	})
	t.Cleanup(trs.CloseIdleConnections)
	call := func() error {
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, "http://"+addr+"/", nil)
		resp, err := trs.HTTP1.RoundTrip(req)
		if err == nil {
			resp.Body.Close()
		}
		return err
	}
	for i := range 3 {
		if err := call(); err == nil || errors.Is(err, delivery.ErrBreakerOpen) {
			t.Fatalf("call %d: %v, want a refused connection", i, err)
		}
	}
	before := dials.Load()
	for i := range 5 {
		if err := call(); !errors.Is(err, delivery.ErrBreakerOpen) {
			t.Fatalf("call %d while open: %v, want ErrBreakerOpen", i, err)
		}
	}
	if n := dials.Load() - before; n != 0 {
		t.Errorf("%d dials while the circuit was open, want 0", n)
	}

	// Back up on the same port.
	ln, err = net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	srv.Listener = ln
	srv.Start()
	t.Cleanup(srv.Close)
	testproc.Eventually(t, 10*time.Second, "calls flow again after the destination came back", func() bool { return call() == nil })
}
