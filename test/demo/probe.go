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

package demo

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"knative.dev/event-forwarding-proxy/test/bench/sink"
)

// heldMetric is the proxy's gauge of the calls it holds (a name of the
// metrics contract, docs/configuration.md).
const heldMetric = "kn_forward_active_requests"

// prober reads what the view shows from the proxy's /metrics and the
// sink's /stats, each call bounded by a short timeout.
type prober struct {
	client *http.Client
}

func newProber() *prober {
	return &prober{client: &http.Client{
		Timeout:   time.Second,
		Transport: &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 4},
	}}
}

func (p *prober) close() { p.client.CloseIdleConnections() }

func (p *prober) do(ctx context.Context, method, url string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, method, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := p.client.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode/100 != 2 {
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		return nil, fmt.Errorf("%s %s: %s", method, url, resp.Status)
	}
	return resp, nil
}

// ok checks that GET url answers 2xx.
func (p *prober) ok(url string) func(context.Context) error {
	return func(ctx context.Context) error {
		resp, err := p.do(ctx, http.MethodGet, url)
		if err != nil {
			return err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		return resp.Body.Close()
	}
}

// proxyHeld sums the held-call gauge over its series in the Prometheus
// text at metricsURL.
func (p *prober) proxyHeld(ctx context.Context, metricsURL string) (int64, error) {
	resp, err := p.do(ctx, http.MethodGet, metricsURL)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	return sumGauge(resp.Body, heldMetric)
}

// sumGauge adds up the samples of the metric named name in Prometheus
// text format.
func sumGauge(r io.Reader, name string) (int64, error) {
	var sum float64
	found := false
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), name)
		if !ok || rest == "" || (rest[0] != '{' && rest[0] != ' ') {
			continue
		}
		f := strings.Fields(rest[strings.LastIndexByte(rest, '}')+1:])
		if len(f) == 0 {
			continue
		}
		v, err := strconv.ParseFloat(f[0], 64)
		if err != nil {
			return 0, fmt.Errorf("%s: %w", name, err)
		}
		sum += v
		found = true
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	if !found {
		return 0, fmt.Errorf("no %s in the metrics", name)
	}
	return int64(sum), nil
}

// sinkStats reads the sink's counters.
func (p *prober) sinkStats(ctx context.Context, sinkURL string) (sink.Stats, error) {
	var st sink.Stats
	resp, err := p.do(ctx, http.MethodGet, sinkURL+sink.PathStats)
	if err != nil {
		return st, err
	}
	defer resp.Body.Close()
	err = json.NewDecoder(resp.Body).Decode(&st)
	return st, err
}

// release ends every call the sink holds now.
func (p *prober) release(ctx context.Context, sinkURL string) error {
	resp, err := p.do(ctx, http.MethodPost, sinkURL+sink.PathRelease)
	if err != nil {
		return err
	}
	return resp.Body.Close()
}
