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

package monitoring

import (
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"

	"knative.dev/event-forwarding-proxy/test/testproc"
)

// proxyProc is a running proxy binary.
type proxyProc struct {
	*testproc.Proc
	MetricsAddr string // host:port of /metrics
}

// startProxy runs the proxy with loopback destinations allowed and env
// added, and waits until it answers /healthz.
func startProxy(t *testing.T, env ...string) *proxyProc {
	t.Helper()
	p := testproc.StartProxy(t, proxyBinary(t), freePort(t), freePort(t), env...)
	return &proxyProc{Proc: p, MetricsAddr: "127.0.0.1:" + strconv.Itoa(p.MetricsPort)}
}

// post sends body through the proxy to dest with header pairs added, and
// returns the status after reading the answer.
func (p *proxyProc) post(t *testing.T, dest string, headers ...string) int {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, p.URL, strings.NewReader(`{"hello":"world"}`))
	if err != nil {
		t.Error(err)
		return 0
	}
	req.Header.Set("Kn-Forward-To", dest)
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Errorf("POST through the proxy: %v", err)
		return 0
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode
}

// scrape reads the proxy's /metrics.
func (p *proxyProc) scrape(t *testing.T) map[string]*dto.MetricFamily {
	t.Helper()
	return scrapeMetrics(t, p.MetricsAddr)
}

// scrapeMetrics reads the /metrics of a process at addr (host:port).
func scrapeMetrics(t *testing.T, addr string) map[string]*dto.MetricFamily {
	t.Helper()
	fams, err := testproc.Scrape("http://" + addr + "/metrics")
	if err != nil {
		t.Fatalf("scrape: %v", err)
	}
	return fams
}

// newSink is a destination on loopback: the first failures calls get
// 503; with hold, every later one waits for Release (or the end of its
// context), then gets 200.
func newSink(t *testing.T, hold bool, failures int) *testproc.Sink {
	opts := &testproc.SinkOptions{Respond: func(w http.ResponseWriter, _ *http.Request, n int) {
		if n <= failures {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}}
	if hold {
		opts.Hold = func(_ *http.Request, n int) bool { return n > failures }
	}
	return testproc.NewSink(t, opts)
}

// freePort is a port for processes that take a port number rather than a
// listener.
var freePort = testproc.FreePort
