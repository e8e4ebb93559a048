//go:build integration

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

// Package e2e runs the proxy binary as a process and drives it over real
// loopback sockets with CloudEvents clients and recording sinks.
//
// Every test here carries the integration build tag: `make integration`
// runs them, or `go test -tags integration ./test/e2e/`.
package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"knative.dev/event-forwarding-proxy/test/testproc"
)

// Shared with the other process tests (test/testproc).
var (
	freePort   = testproc.FreePort
	eventually = testproc.Eventually
)

// proxyBin is the proxy binary built once by TestMain, with the race
// detector so that a race in the real process fails the test that saw it.
var proxyBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "e2e-proxy")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	proxyBin = filepath.Join(dir, "proxy")
	if err := testproc.GoBuild(proxyBin, "cmd/proxy", true); err != nil {
		fmt.Fprintln(os.Stderr, "building the proxy:", err)
		os.Exit(1)
	}
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// proc is a running proxy process.
type proc struct{ *testproc.Proc }

// startProxy runs the proxy binary with loopback destinations allowed,
// debug logs and env added, and waits until it answers /healthz.
func startProxy(t *testing.T, env ...string) *proc {
	t.Helper()
	return &proc{testproc.StartProxy(t, proxyBin, freePort(t), freePort(t), append([]string{"FORWARD_LOG_LEVEL=debug"}, env...)...)}
}

// post sends body to the proxy with the given headers.
func (p *proc) post(t *testing.T, body string, headers ...string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, p.URL, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Add(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("POST through proxy: %v", err)
	}
	return resp
}

// recorded is one request as a sink saw it.
type recorded struct {
	Method string
	Path   string
	Proto  int
	Header http.Header
	Body   []byte
	At     time.Time
}

// sink is a destination on loopback that records every request and
// answers with respond (200 with no body if nil). n counts from 1.
type sink struct {
	*httptest.Server
	mu      sync.Mutex
	reqs    []recorded
	respond func(w http.ResponseWriter, r *http.Request, n int)
}

func newSink(t *testing.T, h2c bool, respond func(w http.ResponseWriter, r *http.Request, n int)) *sink {
	t.Helper()
	s := &sink{respond: respond}
	s.Server = httptest.NewUnstartedServer(http.HandlerFunc(s.serve))
	if h2c {
		s.Server.Config.Protocols = new(http.Protocols)
		s.Server.Config.Protocols.SetHTTP1(true)
		s.Server.Config.Protocols.SetUnencryptedHTTP2(true)
	}
	s.Start()
	t.Cleanup(s.Close)
	return s
}

func (s *sink) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	s.mu.Lock()
	s.reqs = append(s.reqs, recorded{r.Method, r.URL.RequestURI(), r.ProtoMajor, r.Header.Clone(), body, time.Now()})
	n := len(s.reqs)
	s.mu.Unlock()
	if s.respond != nil {
		s.respond(w, r, n)
	}
}

func (s *sink) requests() []recorded {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]recorded(nil), s.reqs...)
}

func (s *sink) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.reqs)
}

// blocker makes a sink hold every call until release is called (or the
// call's context ends), so tests can hold a known number of calls.
type blocker struct {
	release func()
	ch      chan struct{}
	once    sync.Once
}

func newBlocker(t *testing.T) *blocker {
	b := &blocker{ch: make(chan struct{})}
	b.release = func() { b.once.Do(func() { close(b.ch) }) }
	t.Cleanup(b.release)
	return b
}

func (b *blocker) hold(w http.ResponseWriter, r *http.Request, _ int) {
	select {
	case <-b.ch:
		_, _ = io.WriteString(w, "released")
	case <-r.Context().Done():
	}
}

// ctx returns a context that ends with the test or after d.
func ctxFor(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}
