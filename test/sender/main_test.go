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

// Package sender tests adapter.Sender as a source author meets it: against
// the real proxy binary, run as a process, a real Kubernetes API server
// (test/apiserver) for the live ConfigMap and the TokenRequest API, and
// recording sinks on loopback.
//
// Every test here carries the integration build tag: `make integration`
// runs them, or `go test -tags integration ./test/sender/`.
package sender

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"knative.dev/event-forwarding-proxy/test/testproc"
)

// Shared with the other process tests (test/testproc).
var (
	freePort   = testproc.FreePort
	eventually = testproc.Eventually
)

// proxyBin is the proxy binary, built once by TestMain before any test runs
// and never written again; with the race detector when this test binary
// has it, so that a race in the real process fails the test that saw it.
var proxyBin string

func TestMain(m *testing.M) {
	if os.Getenv(sinkChildEnv) != "" {
		os.Exit(runSinkChild())
	}
	dir, err := os.MkdirTemp("", "sender-proxy")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	proxyBin = filepath.Join(dir, "proxy")
	if err := testproc.GoBuild(proxyBin, "cmd/proxy", raceEnabled); err != nil {
		fmt.Fprintln(os.Stderr, "building the proxy:", err)
		os.Exit(1)
	}
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// proc is a running proxy process.
type proc struct{ *testproc.Proc }

// startProxy runs the proxy binary on new ports with loopback destinations
// allowed and env added, and waits until it answers /healthz.
func startProxy(tb testing.TB, env ...string) *proc {
	tb.Helper()
	return startProxyOn(tb, freePort(tb), freePort(tb), env...)
}

// startProxyOn runs the proxy binary on the given ports.
func startProxyOn(tb testing.TB, port, metricsPort int, env ...string) *proc {
	tb.Helper()
	return &proc{testproc.StartProxy(tb, proxyBin, port, metricsPort, env...)}
}

// stop sends sig and waits until the process exits.
func (p *proc) stop(sig syscall.Signal) {
	p.TB.Helper()
	p.Signal(sig)
	_ = p.Wait(30 * time.Second)
}

// metric returns the sum of the samples of a metric whose line contains
// every one of labels, from the proxy's /metrics.
func (p *proc) metric(name string, labels ...string) float64 {
	p.TB.Helper()
	resp, err := http.Get(p.MetricsURL)
	if err != nil {
		p.TB.Fatalf("scraping the proxy: %v", err)
	}
	defer resp.Body.Close()
	var buf bytes.Buffer
	_, _ = buf.ReadFrom(resp.Body)
	sum := 0.0
lines:
	for line := range strings.SplitSeq(buf.String(), "\n") {
		if !strings.HasPrefix(line, name+"{") && !strings.HasPrefix(line, name+" ") {
			continue
		}
		for _, l := range labels {
			if !strings.Contains(line, l) {
				continue lines
			}
		}
		f := strings.Fields(line)
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		if err == nil {
			sum += v
		}
	}
	return sum
}

func mustURL(tb testing.TB, raw string) *url.URL {
	tb.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		tb.Fatal(err)
	}
	return u
}

// ctxFor returns a context that ends with the test or after d.
func ctxFor(tb testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	tb.Cleanup(cancel)
	return ctx
}
