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

package result

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func millis(n float64) time.Duration { return time.Duration(n * float64(time.Millisecond)) }

func TestPercentile(t *testing.T) {
	hundred := make([]time.Duration, 100)
	for i := range hundred {
		hundred[i] = millis(float64(i + 1))
	}
	tests := []struct {
		name   string
		sorted []time.Duration
		p      float64
		want   time.Duration
	}{
		{name: "empty", sorted: nil, p: 50, want: 0},
		{name: "one value", sorted: []time.Duration{millis(7)}, p: 99, want: millis(7)},
		{name: "median of odd count", sorted: []time.Duration{millis(1), millis(2), millis(3)}, p: 50, want: millis(2)},
		{name: "median of even count is the lower middle", sorted: []time.Duration{millis(1), millis(2), millis(3), millis(4)}, p: 50, want: millis(2)},
		{name: "p99 of 100", sorted: hundred, p: 99, want: millis(99)},
		{name: "p100 is the max", sorted: hundred, p: 100, want: millis(100)},
		{name: "tiny p is the min", sorted: hundred, p: 0.001, want: millis(1)},
		{name: "p99 of 10 is the max", sorted: hundred[:10], p: 99, want: millis(10)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Percentile(tt.sorted, tt.p); got != tt.want {
				t.Errorf("Percentile(%v, %v) = %v, want %v", tt.sorted, tt.p, got, tt.want)
			}
		})
	}
}

func TestSummarize(t *testing.T) {
	tests := []struct {
		name   string
		in     []time.Duration
		errors int
		want   Latency
	}{
		{name: "nothing", want: Latency{}},
		{name: "errors only", errors: 3, want: Latency{Errors: 3}},
		{name: "unsorted input", in: []time.Duration{millis(3), millis(1), millis(2)}, errors: 1,
			want: Latency{Count: 3, Errors: 1, P50: 2, P99: 3, Max: 3}},
		{name: "sub-millisecond", in: []time.Duration{250 * time.Microsecond}, want: Latency{Count: 1, P50: 0.25, P99: 0.25, Max: 0.25}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, Summarize(tt.in, tt.errors)); diff != "" {
				t.Errorf("Summarize (-want +got):\n%s", diff)
			}
		})
	}
}

func TestMinus(t *testing.T) {
	tests := []struct {
		name string
		in   []time.Duration
		base time.Duration
		want []time.Duration
	}{
		{name: "empty", in: nil, base: millis(1), want: []time.Duration{}},
		{name: "subtracts", in: []time.Duration{millis(5), millis(3)}, base: millis(2), want: []time.Duration{millis(3), millis(1)}},
		{name: "never below zero", in: []time.Duration{millis(1)}, base: millis(2), want: []time.Duration{0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, Minus(tt.in, tt.base)); diff != "" {
				t.Errorf("Minus (-want +got):\n%s", diff)
			}
		})
	}
}

func TestWriteRead(t *testing.T) {
	tests := []struct {
		name string
		res  Results
	}{
		{name: "empty run", res: Results{Scale: 1}},
		{name: "every scenario", res: Results{
			Machine:     Machine{CPUModel: "AMD EPYC", Cores: 2, GoVersion: "go1.26.8", NofileLimit: 20000, PeerCPU: 1},
			Started:     time.Date(2026, 11, 30, 6, 0, 0, 0, time.UTC),
			WallSeconds: 600, Scale: 1,
			Held: []HeldRun{{Peer: "proxy", Protocol: "h2c", N: 100000, Reached: 100000, IdleRSSKB: 10240, HeldRSSKB: 3000000,
				BytesPerCall: 30617.6, Added: Latency{Count: 600, P50: 0.2, P99: 3, Max: 5}}},
			Throughput: []ThroughputRun{{Peer: "naive", Protocol: "http1", Requests: 1000, RPS: 100, CPUMicrosPerRequest: 87}},
			Seed:       []SeedRun{{Mode: "direct", Sources: 5000, Samples: []SeedSample{{T: 1, SenderRSSKB: 1024}}}},
			Notes:      []string{"nginx is not installed: left out"},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "sub", "results.json")
			if err := Write(path, &tt.res); err != nil {
				t.Fatalf("Write: %v", err)
			}
			if _, err := os.Stat(path + ".tmp"); !os.IsNotExist(err) {
				t.Errorf("temporary file left behind: %v", err)
			}
			got, err := Read(path)
			if err != nil {
				t.Fatalf("Read: %v", err)
			}
			if diff := cmp.Diff(&tt.res, got); diff != "" {
				t.Errorf("round trip (-want +got):\n%s", diff)
			}
		})
	}
}

func TestReadRejectsGarbage(t *testing.T) {
	path := filepath.Join(t.TempDir(), "results.json")
	if err := os.WriteFile(path, []byte("{not json"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Read(path); err == nil {
		t.Error("Read of a malformed file: no error")
	}
}
