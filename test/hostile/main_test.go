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

// Package hostile runs the proxy binary on loopback against hostile
// peers: raw HTTP/2 frame clients (internal/h2raw) that abuse frame sizes,
// flow control, resets, HPACK and control frames, floods of connections,
// raw HTTP/1.1 sockets that half-close or trickle their headers, callers
// whose held calls fill the memory budget with large async bodies or
// large headers, and a destination that floods interim answers. Each
// attack runs a bounded number of times while one legitimate caller sends
// a request every 100 ms; the test asserts the bounds the proxy keeps
// (goroutines back near their baseline, heap bounded, the attacker's
// connection closed or its call refused where the defence says so, every
// legitimate request answered) and logs what the attack cost: the
// legitimate caller's latency and failures, the peak heap and goroutines,
// and what the attacker saw. A bound the proxy breaks fails the test, and
// the attack still ends by itself (every count bounded, every dial and
// read with a deadline) and its figures are still in the table.
//
// Every test here carries the integration build tag: `make integration`
// runs them, or `go test -tags integration ./test/hostile/`.
//
// HOSTILE_PROXY_BINARY names a proxy binary already built to run the
// attacks against instead of building one from this tree: another
// version's, to compare what the attacks cost it with what they cost
// this one (docs/benchmarks.md, "Hostile peers"). Build it as TestMain
// does, with -race: go build -race -o /tmp/proxy ./cmd/proxy.
package hostile

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"knative.dev/event-forwarding-proxy/test/testproc"
)

// proxyBin is the proxy binary built once by TestMain, with the race
// detector (a race the attacks provoke fails the test that saw it), as
// test/e2e builds it: the build is shared. HOSTILE_PROXY_BINARY, when
// set, names the binary instead, and nothing is built.
var proxyBin string

func TestMain(m *testing.M) {
	if bin := os.Getenv("HOSTILE_PROXY_BINARY"); bin != "" {
		if _, err := os.Stat(bin); err != nil {
			fmt.Fprintln(os.Stderr, "HOSTILE_PROXY_BINARY:", err)
			os.Exit(1)
		}
		proxyBin = bin
		os.Exit(m.Run())
	}
	dir, err := os.MkdirTemp("", "hostile-proxy")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	proxyBin = filepath.Join(dir, "proxy")
	if err := testproc.GoBuild(proxyBin, "cmd/proxy", true); err != nil {
		fmt.Fprintln(os.Stderr, "building the proxy:", err)
		os.Exit(1)
	}
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}
