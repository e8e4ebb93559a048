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

package report

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"knative.dev/event-forwarding-proxy/test/bench/result"
)

func TestUpdate(t *testing.T) {
	tests := []struct {
		name     string
		doc      string
		sections map[string]string
		want     string
	}{
		{
			name:     "new file gets headed blocks",
			doc:      "",
			sections: map[string]string{"held": "T1"},
			want:     "\n\n## held\n\n" + begin("held") + "\nT1\n" + end("held") + "\n",
		},
		{
			name:     "prose around a block is kept",
			doc:      "# Bench\nintro\n" + begin("held") + "\nold\n" + end("held") + "\nafter\n",
			sections: map[string]string{"held": "new"},
			want:     "# Bench\nintro\n" + begin("held") + "\nnew\n" + end("held") + "\nafter\n",
		},
		{
			name:     "a block not in sections is left alone",
			doc:      begin("gobench") + "\nkeep\n" + end("gobench") + "\n",
			sections: map[string]string{},
			want:     begin("gobench") + "\nkeep\n" + end("gobench") + "\n",
		},
		{
			name:     "a missing block is appended after the others",
			doc:      "# Bench\n" + begin("held") + "\nx\n" + end("held") + "\n",
			sections: map[string]string{"held": "y", "seed": "z"},
			want:     "# Bench\n" + begin("held") + "\ny\n" + end("held") + "\n\n## seed\n\n" + begin("seed") + "\nz\n" + end("seed") + "\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Update(tt.doc, tt.sections); got != tt.want {
				t.Errorf("Update =\n%s\nwant\n%s", got, tt.want)
			}
		})
	}
}

// sample is a small run with every scenario.
func sample() *result.Results {
	held := func(peer, proto string, n int, perCall, p99 float64) result.HeldRun {
		return result.HeldRun{Peer: peer, Protocol: proto, N: n, Reached: n, IdleRSSKB: 10000,
			HeldRSSKB: 10000 + int64(perCall*float64(n)/1024), BytesPerCall: perCall,
			Added: result.Latency{Count: 100, P50: 0.3, P99: p99, Max: p99 * 2}}
	}
	asyncHeld := held("proxy", "h2c-async", 100000, 3500, 9)
	asyncHeld.BodyBytes = 512
	proxyHeld := held("proxy", "h2c", 100000, 7000, 40)
	proxyHeld.CPUSeconds = 12
	haHeld := held("haproxy", "h2c", 100000, 3000, 8)
	haHeld.CPUSeconds = 15
	return &result.Results{
		Machine: result.Machine{CPUModel: "test CPU", Cores: 2, GoVersion: "go1.26", PeerCPU: 1},
		Scale:   1,
		Held: []result.HeldRun{
			held("proxy", "h2c", 1000, 9000, 3), proxyHeld,
			held("naive", "h2c", 1000, 20000, 5), held("naive", "h2c", 100000, 22000, 900),
			held("proxy", "http1", 1000, 40000, 60),
			haHeld, asyncHeld,
		},
		Throughput: []result.ThroughputRun{
			{Peer: "proxy", Protocol: "http1", Requests: 1000, Seconds: 1, RPS: 1000, CPUSeconds: 0.04, CPUMicrosPerRequest: 40},
			{Peer: "naive", Protocol: "http1", Requests: 1000, Seconds: 1, RPS: 1000, CPUSeconds: 0.09, CPUMicrosPerRequest: 90},
			{Peer: "direct", Protocol: "h2c", Requests: 1000, Seconds: 1, RPS: 1000},
			{Peer: "proxy", Protocol: "h2c", Requests: 850, Seconds: 1, RPS: 850, CPUSeconds: 0.05},
			{Peer: "haproxy", Protocol: "h2c", Requests: 700, Seconds: 1, RPS: 700, CPUSeconds: 0.03},
		},
		Burst: []result.BurstRun{
			{Peer: "direct", Events: 5000, HandOff: result.Latency{Count: 10, P50: 80, P99: 150}},
			{Peer: "proxy", Events: 5000, HandOff: result.Latency{Count: 10, P50: 100, P99: 300}},
		},
		Seed: []result.SeedRun{
			{Mode: "direct", Sent: 10, PeakSenderRSSKB: 5000, Samples: []result.SeedSample{{T: 1, SenderRSSKB: 4000, SenderInflight: 5}, {T: 2, SenderRSSKB: 5000, SenderInflight: 10}}},
			{Mode: "proxy-async", Peer: "proxy", Sent: 10, PeakProxyRSSKB: 9000, Samples: []result.SeedSample{{T: 1, SenderRSSKB: 3000, ProxyRSSKB: 9000, SinkHeld: 10}}},
		},
	}
}

func TestTargets(t *testing.T) {
	got := targets(sample())
	for _, want := range []string{
		"≤ 8 KB RSS per held call at 100000 h2c | 6.8 KB | 2.9 KB | 21.5 KB | not measured | **met**",
		"≤ 2.5 KB RSS per held sync call at 100000 h2c | 6.8 KB | 2.9 KB | 21.5 KB | not measured | **not met**",
		"below HAProxy's | 12.0 s | 15.0 s | 0.0 s | not measured | **met**",
		"beyond its body | 2.9 KB | no async hand-off | no async hand-off | no async hand-off | **met**",
		"p50 ≤ 2 ms at every N | worst 0.30 ms (h2c N=1000) | worst 0.30 ms (h2c N=100000) | worst 0.30 ms (h2c N=1000) | not measured | **met**",
		"p99 ≤ 50 ms at every N | worst 60.00 ms (http1 N=1000) | worst 8.00 ms (h2c N=100000) | worst 900.00 ms (h2c N=100000) | not measured | **not met**",
		"over HTTP/1.1 | 40.0 µs | not measured | 90.0 µs | not measured | **met**",
		"burst of 5000 async events, p99 ≤ 250 ms on one core | p99 300.00 ms (p50 100.00); a server answering at once: p99 150.00 ms | no async hand-off | no async hand-off | no async hand-off | **not met**",
		"straight at the sink | 0.85 (850 of 1000 req/s) | 0.70 (700 of 1000 req/s) | not measured | not measured | **met**",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("targets lack %q:\n%s", want, got)
		}
	}
}

func TestTargetsWithoutData(t *testing.T) {
	got := targets(&result.Results{})
	// Every peer's cell and the verdict of every target but the ramp
	// row, less the cells of the three peers that have no async hand-off
	// in the two async rows.
	if n, want := strings.Count(got, "not measured"), 10*4+9-2*3; n != want {
		t.Errorf("%d cells say not measured, want %d:\n%s", n, want, got)
	}
}

func TestPlotsAndDoc(t *testing.T) {
	dir := t.TempDir()
	res := sample()
	if err := Plots(res, dir); err != nil {
		t.Fatalf("Plots: %v", err)
	}
	for _, name := range []string{PlotMemory, PlotLatency, PlotCPU, PlotSeed} {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil || !bytes.HasPrefix(b, []byte("\x89PNG")) {
			t.Errorf("%s: not a PNG (%v)", name, err)
		}
	}
	doc := filepath.Join(dir, "benchmarks.md")
	if err := os.WriteFile(doc, []byte("# Benchmarks\nprose\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := WriteDoc(doc, Doc{Results: res, GoBench: "BenchmarkX 1 ns/op\n", PlotDir: "bench"}); err != nil {
		t.Fatalf("WriteDoc: %v", err)
	}
	b, _ := os.ReadFile(doc)
	for _, want := range []string{"# Benchmarks\nprose\n", "| h2c | 100000 | proxy |", "BenchmarkX 1 ns/op", "](bench/memory.png)", "test CPU"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("document lacks %q", want)
		}
	}
}
