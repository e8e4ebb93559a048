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
// and raw HTTP/1.1 sockets that half-close or trickle their headers. Each
// attack runs a bounded number of times while one legitimate caller sends
// a request every 100 ms; the test asserts the bounds the proxy keeps
// (goroutines back near their baseline, heap bounded, the attacker's
// connection closed where the defence says so, every legitimate request
// answered) and logs what the attack cost: the legitimate caller's
// latency, and the peak heap and goroutines.
//
// Every test here carries the integration build tag: `make integration`
// runs them, or `go test -tags integration ./test/hostile/`.
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
// test/e2e builds it: the build is shared.
var proxyBin string

func TestMain(m *testing.M) {
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
