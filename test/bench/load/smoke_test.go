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

package load

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"knative.dev/event-forwarding-proxy/test/bench/result"
)

// TestSmoke runs every scenario in miniature (50 held calls) through the
// real proxy binary and the naive peer, and checks that the harness
// measured something in each: no timing is asserted.
func TestSmoke(t *testing.T) {
	res := runSmoke(t, "off", PeerProxy, PeerNaive)
	// Held: both peers over h2c and HTTP/1.1, the proxy async too;
	// throughput: the direct baseline and both peers, each protocol;
	// bursts: straight at a sink, then async to the proxy.
	if len(res.Held) != 5 || len(res.Throughput) != 6 || len(res.Burst) != 2 || len(res.Seed) != 2 {
		t.Fatalf("runs: %d held, %d throughput, %d burst, %d seed; want 5, 6, 2, 2", len(res.Held), len(res.Throughput), len(res.Burst), len(res.Seed))
	}
	checkMeasured(t, res)
}

// TestHAProxyPeer runs the scenarios through Debian's HAProxy with the
// bench's configuration (haproxy.cfg): every call must reach the sink
// named by Kn-Forward-To, over h2c and HTTP/1.1 on both sides.
func TestHAProxyPeer(t *testing.T) {
	res := runSmoke(t, "", PeerHAProxy)
	if len(res.Notes) > 0 {
		t.Fatalf("notes: %v", res.Notes)
	}
	// Held over h2c and HTTP/1.1 (no async hand-off); throughput direct
	// and through HAProxy, each protocol; bursts only straight at a sink;
	// seed direct and through HAProxy.
	if len(res.Held) != 2 || len(res.Throughput) != 4 || len(res.Burst) != 1 || len(res.Seed) != 2 {
		t.Fatalf("runs: %d held, %d throughput, %d burst, %d seed; want 2, 4, 1, 2", len(res.Held), len(res.Throughput), len(res.Burst), len(res.Seed))
	}
	checkMeasured(t, res)
	if s := res.Seed[1]; s.Mode != "haproxy-sync" || s.Errors != 0 || s.PeakSenderInflight == 0 {
		t.Errorf("seed through HAProxy: %+v", s)
	}
}

// runSmoke runs the bench in miniature over peers, with haproxy as
// Config.HAProxy, and checks that its results file holds what it returned.
func runSmoke(t *testing.T, haproxy string, peers ...string) *result.Results {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "results.json")
	var log strings.Builder
	res, err := Run(t.Context(), Config{
		ProxyBin:    proxyBin,
		Self:        []string{self},
		SelfEnv:     []string{envHelper + "=1"},
		Nginx:       "off",
		HAProxy:     haproxy,
		Peers:       peers,
		HeldH2C:     []int{50},
		HeldHTTP1:   []int{50},
		NoPin:       true,
		ProbeEvery:  2 * time.Millisecond,
		ProbeCount:  20,
		RampTimeout: time.Minute,
		Concurrency: 4,
		Warmup:      100 * time.Millisecond,
		Window:      500 * time.Millisecond,
		Seed:        SeedConfig{Sources: 20, Period: 500 * time.Millisecond, Hold: time.Second, Duration: 2 * time.Second},
		BurstEvents: 40,
		Out:         out,
		Log:         &log,
	})
	t.Logf("run log:\n%s", log.String())
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	written, err := result.Read(out)
	if err != nil {
		t.Fatalf("results file: %v", err)
	}
	if diff := cmp.Diff(res, written); diff != "" {
		t.Errorf("results file differs from the results (-returned +file):\n%s", diff)
	}
	if res.Machine.Cores == 0 || res.Machine.GoVersion == "" || res.Machine.NofileLimit == 0 {
		t.Errorf("machine = %+v", res.Machine)
	}
	return res
}

// checkMeasured checks that every run measured something and lost no call.
func checkMeasured(t *testing.T, res *result.Results) {
	t.Helper()
	for _, h := range res.Held {
		if h.Reached != h.N || h.Failed != 0 || h.IdleRSSKB <= 0 || h.HeldRSSKB <= 0 || h.Through.Count == 0 || h.Direct.Count == 0 || h.Note != "" {
			t.Errorf("held run measured nothing: %+v", h)
		}
	}
	for _, tr := range res.Throughput {
		// The direct baseline has no peer whose CPU would count.
		if tr.Requests == 0 || tr.RPS <= 0 || (tr.CPUSeconds <= 0) != (tr.Peer == PeerDirect) || tr.Latency.Count == 0 || tr.Errors != 0 {
			t.Errorf("throughput run measured nothing: %+v", tr)
		}
	}
	for _, b := range res.Burst {
		// 3 bursts of 40 may take less CPU than the clock's tick: CPU is
		// not checked.
		if b.Bursts == 0 || b.Errors != 0 || b.HandOff.Count != b.Bursts*b.Events || b.Note != "" {
			t.Errorf("burst run measured nothing: %+v", b)
		}
	}
	for _, s := range res.Seed {
		if s.Sent == 0 || s.PeakSenderRSSKB <= 0 || s.PeakSinkHeld == 0 || len(s.Samples) == 0 || s.HandOff.Count == 0 {
			t.Errorf("seed run %s measured nothing: %+v", s.Mode, s)
		}
		if s.Peer != "" && s.PeakProxyRSSKB <= 0 {
			t.Errorf("seed run through %s has no peer memory: %+v", s.Peer, s)
		}
	}
}
