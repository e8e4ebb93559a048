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

package mtping

import (
	"bufio"
	"fmt"
	"math"
	"net"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"knative.dev/event-forwarding-proxy/test/bench/procstat"
	benchsink "knative.dev/event-forwarding-proxy/test/bench/sink"
)

// seedSink is the scenario's destination: test/bench/sink's slow path,
// served over HTTP/1.1 only (a synchronous service as upstream's adapter
// meets it: one connection per held call), counting the events it receives
// by the minute of their time (each PingSource tick's minute).
type seedSink struct {
	*benchsink.Sink
	URL      string
	received atomic.Int64

	mu      sync.Mutex
	ticks   map[int64]int64 // Unix minute of ce-time → events received
	untimed int64           // events without a readable ce-time
}

func startSeedSink(b testing.TB, hold time.Duration) *seedSink {
	b.Helper()
	s := &seedSink{Sink: benchsink.New(benchsink.Params{Hold: hold}), ticks: map[int64]int64{}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	srv := &http.Server{Handler: s, ReadHeaderTimeout: 30 * time.Second, IdleTimeout: 5 * time.Minute}
	go func() { _ = srv.Serve(ln) }()
	b.Cleanup(func() {
		s.Release()
		_ = srv.Close()
	})
	s.URL = "http://" + ln.Addr().String()
	return s
}

func (s *seedSink) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodPost && r.URL.Path == benchsink.PathHold {
		s.received.Add(1)
		at, err := time.Parse(time.RFC3339Nano, r.Header.Get("Ce-Time"))
		s.mu.Lock()
		if err != nil {
			s.untimed++
		} else {
			s.ticks[at.Unix()/60]++
		}
		s.mu.Unlock()
	}
	s.Sink.ServeHTTP(w, r)
}

// sinkCounts is what the sink had received at one moment.
type sinkCounts struct {
	ticks             map[int64]int64
	untimed, received int64
}

func (s *seedSink) snapshot() sinkCounts {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := sinkCounts{ticks: make(map[int64]int64, len(s.ticks)), untimed: s.untimed, received: s.received.Load()}
	for k, v := range s.ticks {
		c.ticks[k] = v
	}
	return c
}

// seedSample is one second of the scenario.
type seedSample struct {
	T                 float64 `json:"t"` // seconds since the adapter started
	AdapterRSSMB      float64 `json:"adapter_rss_mb"`
	AdapterCPUSeconds float64 `json:"adapter_cpu_s"` // since it started
	AdapterInflight   float64 `json:"adapter_inflight"`
	ProxyRSSMB        float64 `json:"proxy_rss_mb,omitempty"`
	ProxyCPUSeconds   float64 `json:"proxy_cpu_s,omitempty"`
	ProxyHeld         float64 `json:"proxy_held,omitempty"` // kn_forward_active_requests
	SinkHeld          int64   `json:"sink_held"`
	SinkReceived      int64   `json:"sink_received"` // since the sink started
}

// seedSampler reads one sample of the processes; a failed read keeps the
// previous value and is counted.
type seedSampler struct {
	ad, px       *proc
	adURL, pxURL string
	sink         *seedSink
	last         seedSample
	missed       int
	pxCPU0       float64
}

// newSeedSampler samples the adapter ad and, if not nil, the proxy px,
// with their /metrics at adMetrics and pxMetrics.
func newSeedSampler(ad, px *proc, adMetrics, pxMetrics string, sk *seedSink) *seedSampler {
	s := &seedSampler{ad: ad, px: px, adURL: adMetrics, pxURL: pxMetrics, sink: sk}
	if px != nil {
		s.pxCPU0, _ = procstat.CPUSeconds(px.Cmd.Process.Pid)
	}
	return s
}

func (s *seedSampler) sample(begin time.Time) seedSample {
	x := s.last
	x.T = time.Since(begin).Seconds()
	ok := func(err error) bool {
		if err != nil {
			s.missed++
		}
		return err == nil
	}
	pid := s.ad.Cmd.Process.Pid
	if kb, err := procstat.RSSKB(pid); ok(err) {
		x.AdapterRSSMB = float64(kb) / 1024
	}
	if cpu, err := procstat.CPUSeconds(pid); ok(err) {
		x.AdapterCPUSeconds = cpu
	}
	if m, err := scrape(s.adURL); ok(err) {
		x.AdapterInflight = m.sum("kn_forward_mtping_inflight_sends")
	}
	if s.px != nil {
		pid := s.px.Cmd.Process.Pid
		if kb, err := procstat.RSSKB(pid); ok(err) {
			x.ProxyRSSMB = float64(kb) / 1024
		}
		if cpu, err := procstat.CPUSeconds(pid); ok(err) {
			x.ProxyCPUSeconds = cpu - s.pxCPU0
		}
		if m, err := scrape(s.pxURL); ok(err) {
			x.ProxyHeld = m.sum("kn_forward_active_requests")
		}
	}
	x.SinkHeld = s.sink.Stats().Held
	x.SinkReceived = s.sink.received.Load()
	s.last = x
	return x
}

// promText is a scraped /metrics page: one entry per sample line.
type promText []promSample

type promSample struct {
	name, labels string
	value        float64
}

var scrapeClient = &http.Client{Timeout: 3 * time.Second}

// scrape reads a Prometheus text page.
func scrape(url string) (promText, error) {
	resp, err := scrapeClient.Get(url)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: %s", url, resp.Status)
	}
	var out promText
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		name, labels := line, ""
		if i := strings.IndexAny(line, "{ "); i >= 0 {
			name = line[:i]
			if line[i] == '{' {
				if j := strings.LastIndexByte(line, '}'); j > i {
					labels = line[i+1 : j]
				}
			}
		}
		f := strings.Fields(line)
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		if err != nil {
			continue
		}
		out = append(out, promSample{name: name, labels: labels, value: v})
	}
	return out, sc.Err()
}

// sum adds the samples of name whose labels contain every one of labels.
func (p promText) sum(name string, labels ...string) float64 {
	total := 0.0
next:
	for _, s := range p {
		if s.name != name {
			continue
		}
		for _, l := range labels {
			if !strings.Contains(s.labels, l) {
				continue next
			}
		}
		total += s.value
	}
	return total
}

var leLabel = regexp.MustCompile(`le="([^"]+)"`)

// quantile estimates the q-quantile of histogram name (its _bucket
// series summed) by linear interpolation within the bucket that holds it,
// as Prometheus's histogram_quantile does; in the +Inf bucket it is the
// highest finite bound. ok is false for an empty histogram.
func (p promText) quantile(name string, q float64) (v float64, ok bool) {
	cum := map[float64]float64{}
	for _, s := range p {
		if s.name != name+"_bucket" {
			continue
		}
		m := leLabel.FindStringSubmatch(s.labels)
		if m == nil {
			continue
		}
		le, err := strconv.ParseFloat(m[1], 64) // "+Inf" parses as +Inf
		if err != nil {
			continue
		}
		cum[le] += s.value
	}
	bounds := make([]float64, 0, len(cum))
	for le := range cum {
		bounds = append(bounds, le)
	}
	slices.Sort(bounds)
	if len(bounds) == 0 || cum[bounds[len(bounds)-1]] == 0 {
		return 0, false
	}
	rank := q * cum[bounds[len(bounds)-1]]
	lo, below := 0.0, 0.0
	for _, le := range bounds {
		if cum[le] >= rank {
			if math.IsInf(le, 1) {
				return lo, true
			}
			if cum[le] == below {
				return le, true
			}
			return lo + (le-lo)*(rank-below)/(cum[le]-below), true
		}
		lo, below = le, cum[le]
	}
	return lo, true
}
