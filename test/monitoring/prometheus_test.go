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
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"knative.dev/event-forwarding-proxy/test/testproc"
)

// promProc is a Prometheus server on loopback, at its URL.
type promProc struct{ *testproc.Proc }

// scrapeTarget is one process Prometheus scrapes, with the job and the
// labels Kubernetes service discovery would give its pod.
type scrapeTarget struct {
	job, addr, namespace, pod string
}

// proxyTarget is the proxy at addr, as the kit's scrape job names it.
func proxyTarget(addr string) scrapeTarget {
	return scrapeTarget{job: scrapeJob, addr: addr, namespace: targetNamespace, pod: targetPod}
}

// startPrometheus runs Prometheus with temporary storage, scraping the
// targets every second and evaluating config/monitoring/rules.yaml every
// second, and waits until it is ready.
func startPrometheus(t *testing.T, targets ...scrapeTarget) *promProc {
	t.Helper()
	bin := requireTool(t, "prometheus")
	dir := t.TempDir()
	rules, err := filepath.Abs(repoFile(rulesFile))
	if err != nil {
		t.Fatal(err)
	}
	config := fmt.Sprintf(`global:
  scrape_interval: 1s
  scrape_timeout: 1s
  evaluation_interval: 1s
rule_files:
  - %q
scrape_configs:
`, rules)
	for _, tg := range targets {
		config += fmt.Sprintf(`  - job_name: %s
    honor_labels: false
    static_configs:
      - targets: [%q]
        labels:
          namespace: %s
          pod: %s
`, tg.job, tg.addr, tg.namespace, tg.pod)
	}
	configFile := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(configFile, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := "127.0.0.1:" + strconv.Itoa(freePort(t))
	cmd := exec.Command(bin,
		"--config.file="+configFile,
		"--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+addr,
		"--log.level=warn",
	)
	p := &promProc{testproc.Start(t, "prometheus", cmd)}
	p.URL = "http://" + addr
	p.AwaitReady(p.URL + "/-/ready")
	return p
}

// sample is one element of an instant vector.
type sample struct {
	Metric map[string]string `json:"metric"`
	Value  float64
}

// query evaluates expr now through /api/v1/query. A query Prometheus
// refuses (parse or evaluation error) is returned as an error.
func (p *promProc) query(expr string) ([]sample, error) {
	resp, err := http.Get(p.URL + "/api/v1/query?query=" + url.QueryEscape(expr))
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var body struct {
		Status    string `json:"status"`
		ErrorType string `json:"errorType"`
		Error     string `json:"error"`
		Data      struct {
			ResultType string            `json:"resultType"`
			Result     []json.RawMessage `json:"result"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return nil, fmt.Errorf("decoding the answer to %s: %w", expr, err)
	}
	if body.Status != "success" {
		return nil, fmt.Errorf("query %s: %s: %s", expr, body.ErrorType, body.Error)
	}
	if body.Data.ResultType != "vector" {
		return nil, fmt.Errorf("query %s: result type %s, want vector", expr, body.Data.ResultType)
	}
	out := make([]sample, 0, len(body.Data.Result))
	for _, raw := range body.Data.Result {
		var r struct {
			Metric map[string]string `json:"metric"`
			Value  [2]any            `json:"value"` // [unix time, "value"]
		}
		if err := json.Unmarshal(raw, &r); err != nil {
			return nil, err
		}
		s, _ := r.Value[1].(string)
		v, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return nil, fmt.Errorf("query %s: value %q: %w", expr, s, err)
		}
		out = append(out, sample{Metric: r.Metric, Value: v})
	}
	return out, nil
}

// awaitValue polls expr until it returns exactly one sample of value want.
func (p *promProc) awaitValue(t *testing.T, d time.Duration, expr string, want float64) sample {
	t.Helper()
	var got sample
	testproc.EventuallyState(t, d, fmt.Sprintf("%s = %v", expr, want), func() (bool, string) {
		res, err := p.query(expr)
		if err != nil {
			t.Fatal(err)
		}
		if len(res) != 1 {
			return false, fmt.Sprintf("%d samples: %v", len(res), res)
		}
		got = res[0]
		return res[0].Value == want, fmt.Sprintf("%v %v", res[0].Metric, res[0].Value)
	})
	return got
}
