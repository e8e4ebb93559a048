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
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"knative.dev/event-forwarding-proxy/proxy/proxytest"
)

// TestProbesAndDrain: liveness stays up while draining; readiness, kubelet
// and Knative probes fail; new calls get 503 draining and reach nothing.
func TestProbesAndDrain(t *testing.T) {
	dest := proxytest.NewDestination(t, nil)
	tp := newTestProxy(t, nil)
	client := h1Client(t)

	probe := func(t *testing.T, method, path string, header http.Header) int {
		t.Helper()
		req, err := http.NewRequestWithContext(t.Context(), method, tp.URL+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		for k, v := range header {
			req.Header[k] = v
		}
		resp, _ := do(t, client, req)
		return resp.StatusCode
	}
	tests := []struct {
		name                   string
		method, path           string
		header                 http.Header
		wantBefore, wantDuring int
	}{
		{name: "GET /healthz", method: http.MethodGet, path: "/healthz", wantBefore: 200, wantDuring: 200},
		{name: "HEAD /healthz", method: http.MethodHead, path: "/healthz", wantBefore: 200, wantDuring: 200},
		{name: "GET /readyz", method: http.MethodGet, path: "/readyz", wantBefore: 200, wantDuring: 503},
		{name: "kubelet probe", method: http.MethodGet, path: "/", header: http.Header{"User-Agent": {"kube-probe/1.30"}}, wantBefore: 200, wantDuring: 503},
		{name: "Knative network probe", method: http.MethodGet, path: "/", header: http.Header{"K-Network-Probe": {"queue"}}, wantBefore: 200, wantDuring: 503},
	}
	for _, tt := range tests {
		t.Run(tt.name+" before drain", func(t *testing.T) {
			if got := probe(t, tt.method, tt.path, tt.header); got != tt.wantBefore {
				t.Errorf("status = %d, want %d", got, tt.wantBefore)
			}
		})
	}
	if resp, _ := do(t, client, tp.newRequest(t, dest.URL, strings.NewReader("e"))); resp.StatusCode != http.StatusOK {
		t.Fatalf("call before drain: status %d, want 200", resp.StatusCode)
	}

	tp.Drain()
	if !tp.Drainer.Draining() {
		t.Fatal("Draining() = false after Drain")
	}
	for _, tt := range tests {
		t.Run(tt.name+" while draining", func(t *testing.T) {
			if got := probe(t, tt.method, tt.path, tt.header); got != tt.wantDuring {
				t.Errorf("status = %d, want %d", got, tt.wantDuring)
			}
		})
	}
	for _, prefer := range []string{"", "respond-async"} {
		t.Run("call while draining, Prefer "+prefer, func(t *testing.T) {
			req := tp.newRequest(t, dest.URL, strings.NewReader("e"))
			if prefer != "" {
				req.Header.Set("Prefer", prefer)
			}
			resp, body := do(t, client, req)
			wantProxyError(t, resp, body, ReasonDraining)
		})
	}
	t.Run("loop detection still comes first", func(t *testing.T) {
		req := tp.newRequest(t, dest.URL, strings.NewReader("e"))
		req.Header.Set("CDN-Loop", DefaultLoopID)
		resp, body := do(t, client, req)
		wantProxyError(t, resp, body, ReasonLoopDetected)
	})
	if n := dest.Count(); n != 1 {
		t.Errorf("the destination received %d requests, want only the one before drain", n)
	}
}

// TestShutdownWaitsForHeldCall: after Drain, a held synchronous call runs
// to completion and Shutdown returns nil only after it.
func TestShutdownWaitsForHeldCall(t *testing.T) {
	hold := proxytest.NewHold(t)
	dest := proxytest.NewDestination(t, hold.Reply)
	tp := newTestProxy(t, nil)
	call := goDo(h1Client(t), tp.newRequest(t, dest.URL, strings.NewReader("e")))
	dest.Next(t)

	tp.Drain()
	shut := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		shut <- tp.Shutdown(ctx)
	}()
	select {
	case err := <-shut:
		t.Fatalf("Shutdown returned %v while a call was held", err)
	case <-time.After(50 * time.Millisecond):
	}

	hold.Release()
	r := await(t, call)
	if r.err != nil || r.resp.StatusCode != http.StatusOK || string(r.body) != "released" {
		t.Fatalf("the held call ended with %v %v %q, want 200 released", r.err, r.resp, r.body)
	}
	select {
	case err := <-shut:
		if err != nil {
			t.Errorf("Shutdown = %v, want nil", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Shutdown did not return after the held call ended")
	}
}

// TestShutdownIdle: Shutdown of an idle proxy returns at once.
func TestShutdownIdle(t *testing.T) {
	tp := newTestProxy(t, nil)
	tp.Drain()
	ctx, cancel := context.WithTimeout(t.Context(), time.Second)
	defer cancel()
	if err := tp.Shutdown(ctx); err != nil {
		t.Errorf("Shutdown = %v, want nil", err)
	}
}

// TestShutdownWaitsForAsync: a background delivery keeps Shutdown waiting
// until it is delivered.
func TestShutdownWaitsForAsync(t *testing.T) {
	hold := proxytest.NewHold(t)
	dest := proxytest.NewDestination(t, hold.Reply)
	tp := newTestProxy(t, nil)
	req := tp.newRequest(t, dest.URL, strings.NewReader("e"))
	req.Header.Set("Prefer", "respond-async")
	if resp, _ := do(t, h1Client(t), req); resp.StatusCode != http.StatusAccepted {
		t.Fatalf("status = %d, want 202", resp.StatusCode)
	}
	dest.Next(t)
	tp.Drain()
	shut := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		shut <- tp.Shutdown(ctx)
	}()
	select {
	case err := <-shut:
		t.Fatalf("Shutdown returned %v during a background delivery", err)
	case <-time.After(50 * time.Millisecond):
	}
	hold.Release()
	select {
	case err := <-shut:
		if err != nil {
			t.Errorf("Shutdown = %v, want nil", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Shutdown did not return after the delivery ended")
	}
	if n := dest.Count(); n != 1 {
		t.Errorf("the destination received %d attempts, want 1", n)
	}
}

// TestShutdownAbortsAsync: when Shutdown's deadline passes with a
// background delivery still blocked, it returns an error, the delivery is
// cancelled at the destination and logged as abandoned.
func TestShutdownAbortsAsync(t *testing.T) {
	hold := proxytest.NewHold(t)
	dest := proxytest.NewDestination(t, hold.Reply)
	core, logs := observer.New(zapcore.DebugLevel)
	tp := newTestProxyLogger(t, nil, zap.New(core).Sugar())
	req := tp.newRequest(t, dest.URL, strings.NewReader(`{"id":"e-42","source":"/s"}`))
	req.Header.Set("Prefer", "respond-async")
	if resp, _ := do(t, h1Client(t), req); resp.StatusCode != http.StatusAccepted {
		t.Fatalf("status = %d, want 202", resp.StatusCode)
	}
	dest.Next(t)

	tp.Drain()
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	err := tp.Shutdown(ctx)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Shutdown = %v, want an error wrapping context.DeadlineExceeded", err)
	}
	hold.WaitCancelled(t)
	if n := tp.Limiter.Inflight(); n != 0 {
		t.Errorf("Inflight() = %d after Shutdown aborted, want 0", n)
	}
	abandoned := logs.FilterMessage("Abandoned async event at shutdown").All()
	if len(abandoned) != 1 {
		t.Fatalf("logged %d abandoned events, want 1; logs: %v", len(abandoned), logs.All())
	}
	if f := abandoned[0].ContextMap(); f["ceId"] != "e-42" || f["ceSource"] != "/s" {
		t.Errorf("abandoned log fields = %v, want ceId e-42 and ceSource /s", f)
	}
	if n := dest.Count(); n != 1 {
		t.Errorf("the destination received %d attempts, want 1 (no retry after abort)", n)
	}
}

// TestShutdownDeadlineCutsHeldCalls: calls still held when Shutdown's
// context ends get 503 draining, whether their server hands them the
// proxy's BaseContext (Proxy.Server: the shutdown context cuts them
// directly) or not (NewServer alone: the forwarder hooks each call to it).
func TestShutdownDeadlineCutsHeldCalls(t *testing.T) {
	for _, base := range []bool{true, false} {
		hold := proxytest.NewHold(t)
		dest := proxytest.NewDestination(t, hold.Reply)
		// Their own deadline far away: only the shutdown may cut them.
		cfg := testConfig(t, map[string]string{"FORWARD_MAX_TIMEOUT": "10m"})
		p := New(cfg, zap.NewNop().Sugar())
		ts := httptest.NewUnstartedServer(nil)
		ts.Config = NewServer(cfg, p.Handler(), zap.NewNop().Sugar())
		if base {
			ts.Config = p.Server(cfg, zap.NewNop().Sugar())
		}
		ts.Start()
		t.Cleanup(ts.Close)
		tp := &testProxy{Proxy: p, URL: ts.URL}
		var calls []<-chan result
		for _, c := range []*http.Client{h1Client(t), h2cClient(t)} {
			calls = append(calls, goDo(c, tp.newRequest(t, dest.URL, strings.NewReader("e"))))
			dest.Next(t)
		}

		p.Drain()
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		err := p.Shutdown(ctx)
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("base=%v: Shutdown = %v, want the deadline's error", base, err)
		}
		for _, ch := range calls {
			r := await(t, ch)
			if r.err != nil {
				t.Errorf("base=%v: a held call ended with %v, want 503 draining", base, r.err)
				continue
			}
			wantProxyError(t, r.resp, r.body, ReasonDraining)
		}
		hold.Release()
	}
}
