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

package demo_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"knative.dev/event-forwarding-proxy/test/demo"
	"knative.dev/event-forwarding-proxy/test/testproc"
)

// bins are the proxy and demo binaries built once by TestMain, with the
// race detector so that a race in a real process fails the test.
var bins struct{ proxy, demo string }

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "demo-test")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	bins.proxy, bins.demo = filepath.Join(dir, "proxy"), filepath.Join(dir, "demo")
	build := exec.Command("go", "build", "-race", "-o", dir+"/",
		"knative.dev/event-forwarding-proxy/cmd/proxy", "knative.dev/event-forwarding-proxy/cmd/demo")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building the proxy and the demo:", err)
		os.Exit(1)
	}
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// TestDemoSmall runs the demo at a tiny size against the real binaries:
// sending directly, the sender holds every call the sink holds; through
// the proxy it holds each one only until the 202, the proxy holds them,
// and the events still reach the sink.
func TestDemoSmall(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var out testproc.SyncBuffer
	// Two ticks per phase, 1.5 s apart, each call held 4 s: direct, the
	// sender holds both ticks (40 calls) at once; via the proxy, never
	// more than one tick's 20 unless a hand-off took 1.5 s.
	sum, err := demo.Run(ctx, demo.Params{
		ProxyBin: bins.proxy, Self: []string{bins.demo},
		Sources: 20, Period: 1500 * time.Millisecond, Hold: 4 * time.Second, Phase: 2 * time.Second,
		Every: 250 * time.Millisecond, Out: &out,
	})
	t.Logf("demo output:\n%s", out.String())
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if len(sum.Phases) != 2 || sum.Phases[0].Name != demo.PhaseDirect || sum.Phases[1].Name != demo.PhaseViaProxy {
		t.Fatalf("phases = %+v, want direct then via proxy", sum.Phases)
	}
	direct, via := sum.Phases[0], sum.Phases[1]

	if direct.PeakSenderInflight <= via.PeakSenderInflight {
		t.Errorf("peak sender in-flight: direct %d, via proxy %d; want direct above", direct.PeakSenderInflight, via.PeakSenderInflight)
	}
	if direct.PeakSenderInflight < 40 {
		t.Errorf("direct peak sender in-flight = %d, want both ticks held (40)", direct.PeakSenderInflight)
	}
	if direct.PeakSinkHeld == 0 {
		t.Error("the sink never held a direct call")
	}
	if via.Sender.Sent != 40 || via.Sender.Delivered != 40 || via.Sender.Failed != 0 || via.Sender.Fallbacks != 0 {
		t.Errorf("via proxy sender = %+v, want 40 sent and handed off, no failure, no fallback", via.Sender)
	}
	if via.PeakProxyHeld == 0 || via.PeakSinkHeld == 0 {
		t.Errorf("via proxy: proxy held up to %d, sink up to %d; want both above 0", via.PeakProxyHeld, via.PeakSinkHeld)
	}
	if sum.SinkServed < via.Sender.Delivered {
		t.Errorf("the sink answered %d calls, fewer than the %d events the proxy accepted", sum.SinkServed, via.Sender.Delivered)
	}

	names := map[string]bool{}
	for _, c := range sum.Children {
		names[c.Name] = true
		if !c.Exited || c.Code != 0 || c.Killed {
			t.Errorf("child %+v: want exited on its own or on SIGTERM, status 0", c)
		}
	}
	for _, n := range []string{"sink", "proxy", "sender (direct)", "sender (via proxy)"} {
		if !names[n] {
			t.Errorf("no child %q among %+v", n, sum.Children)
		}
	}
	for _, prefix := range []string{"direct:    the sender held", "via proxy: the sender held"} {
		if !strings.Contains(out.String(), "\n"+prefix) {
			t.Errorf("the summary has no line starting %q", prefix)
		}
	}
}
