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
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"knative.dev/event-forwarding-proxy/test/testproc"
)

// proxyProc is a running proxy binary.
type proxyProc struct {
	*process
	URL         string
	MetricsAddr string // host:port of /metrics
}

// startProxy runs the proxy with loopback destinations allowed and env
// added, and waits until it answers /healthz.
func startProxy(t *testing.T, env ...string) *proxyProc {
	t.Helper()
	port, metricsPort := freePort(t), freePort(t)
	cmd := exec.Command(proxyBinary(t))
	cmd.Env = append(os.Environ(),
		"PORT="+strconv.Itoa(port),
		"METRICS_PORT="+strconv.Itoa(metricsPort),
		"FORWARD_ALLOWED_CIDRS=127.0.0.0/8",
		"GORACE=halt_on_error=1",
	)
	cmd.Env = append(cmd.Env, env...)
	p := &proxyProc{
		process:     start(t, "proxy", cmd),
		URL:         "http://127.0.0.1:" + strconv.Itoa(port),
		MetricsAddr: "127.0.0.1:" + strconv.Itoa(metricsPort),
	}
	t.Cleanup(func() {
		if strings.Contains(p.logs.String(), "DATA RACE") {
			t.Error("the proxy process hit a data race")
		}
	})
	testproc.EventuallyState(t, 30*time.Second, "the proxy answers /healthz", func() (bool, string) {
		if done, how := p.exited(); done {
			t.Fatalf("proxy %s at start:\n%s", how, p.logs.String())
		}
		resp, err := http.Get(p.URL + "/healthz")
		if err != nil {
			return false, err.Error()
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, resp.Status
	})
	return p
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
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatalf("scrape: %v", err)
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parse metrics: %v", err)
	}
	return fams
}

// counterValue sums a counter family's samples that carry label=value.
func counterValue(fams map[string]*dto.MetricFamily, name, label, value string) float64 {
	var sum float64
	if f := fams[name]; f != nil {
		for _, m := range f.Metric {
			for _, l := range m.Label {
				if l.GetName() == label && l.GetValue() == value {
					sum += m.GetCounter().GetValue()
				}
			}
		}
	}
	return sum
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
