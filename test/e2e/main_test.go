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
	"os"
	"path/filepath"
	"strings"
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

// newHeldSink is a destination that holds every call until Release (or
// the end of the call's context), then answers "released".
func newHeldSink(t *testing.T) *testproc.Sink {
	return testproc.NewSink(t, &testproc.SinkOptions{Hold: testproc.HoldAll, Respond: func(w http.ResponseWriter, _ *http.Request, _ int) {
		_, _ = io.WriteString(w, "released")
	}})
}

// ctx returns a context that ends with the test or after d.
func ctxFor(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}
