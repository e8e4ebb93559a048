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

// Package heartbeats runs the heartbeat source (cmd/heartbeats, built on
// eventing's adapter/v2) and the proxy as processes against a real API
// server (test/apiserver) and a recording sink on loopback.
//
// Every test here carries the integration build tag: `make integration`
// runs them, or `go test -tags integration ./test/heartbeats/`.
package heartbeats

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"knative.dev/event-forwarding-proxy/test/testproc"
)

// bins are built once, with the race detector, before any test runs.
var bins struct{ heartbeats, proxy string }

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "heartbeats-e2e")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	bins.heartbeats, bins.proxy = filepath.Join(dir, "heartbeats"), filepath.Join(dir, "proxy")
	var wg sync.WaitGroup
	errs := make([]error, 2)
	wg.Go(func() { errs[0] = testproc.GoBuild(bins.heartbeats, "cmd/heartbeats", true) })
	wg.Go(func() { errs[1] = testproc.GoBuild(bins.proxy, "cmd/proxy", true) })
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}
