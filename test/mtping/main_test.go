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

// Package mtping runs the PingSource adapter (cmd/mtping) and the proxy as
// processes against a real API server (test/apiserver) and real loopback
// sinks: PingSources are created and made Ready through the API server, as
// upstream's controller would, and the tests watch what reaches the sinks.
//
// Every test here carries the integration build tag: `make integration`
// runs them, or `go test -tags integration ./test/mtping/`.
package mtping

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"

	"knative.dev/event-forwarding-proxy/test/testproc"
)

// Shared with the other process tests (test/testproc).
var (
	freePort     = testproc.FreePort
	eventually   = testproc.Eventually
	consistently = testproc.Consistently
)

// bins are the binaries built once by TestMain, with the race detector so
// that a race in a real process fails the test that saw it; plainBins are
// the same without it, for the benchmarks and the tests that measure the
// real thing. TestMain builds only what the run needs: bins and the plain
// adapter unless -run matches nothing ('^$', as `make bench` passes it),
// plainBins when -bench is set.
var bins, plainBins struct{ adapter, proxy string }

func TestMain(m *testing.M) {
	flag.Parse() // the flags choose the binaries; m.Run would parse them anyway
	dir, err := os.MkdirTemp("", "mtping-e2e")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	type build struct {
		out, pkg string
		race     bool
	}
	var builds []build
	if err := os.Mkdir(filepath.Join(dir, "plain"), 0o755); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	plainAdapter := filepath.Join(dir, "plain", "mtping")
	if flag.Lookup("test.run").Value.String() != "^$" {
		bins.adapter, bins.proxy = filepath.Join(dir, "mtping"), filepath.Join(dir, "proxy")
		builds = append(builds, build{bins.adapter, "cmd/mtping", true}, build{bins.proxy, "cmd/proxy", true})
		plainBins.adapter = plainAdapter // TestDirectSendStackStaysSmall
	}
	if flag.Lookup("test.bench").Value.String() != "" {
		plainBins.adapter, plainBins.proxy = plainAdapter, filepath.Join(dir, "plain", "proxy")
		builds = append(builds, build{plainBins.proxy, "cmd/proxy", false})
	}
	if plainBins.adapter != "" {
		builds = append(builds, build{plainBins.adapter, "cmd/mtping", false})
	}
	// All at once: linking a binary takes seconds.
	var wg sync.WaitGroup
	errs := make([]error, len(builds))
	for i, b := range builds {
		wg.Go(func() {
			if err := testproc.GoBuild(b.out, b.pkg, b.race); err != nil {
				errs[i] = fmt.Errorf("building %s (race %t): %w", b.pkg, b.race, err)
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// proc is a running adapter or proxy process.
type proc = testproc.Proc

// start runs bin with env added and a data race fatal, and waits until
// GET readyPath on port answers 200.
func start(t testing.TB, name, bin string, port int, readyPath string, env ...string) *proc {
	t.Helper()
	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(), "GORACE=halt_on_error=1")
	cmd.Env = append(cmd.Env, env...)
	p := testproc.Start(t, name, cmd)
	p.AwaitReady("http://127.0.0.1:" + strconv.Itoa(port) + readyPath)
	return p
}

// startProxy runs the proxy with loopback destinations allowed, and env
// added.
func startProxy(t *testing.T, env ...string) *proc {
	t.Helper()
	return testproc.StartProxy(t, bins.proxy, freePort(t), freePort(t), env...)
}

// upstreamLogging is K_LOGGING_CONFIG as upstream's PingSource controller
// writes it, from a config-logging that asks for debug lines in JSON with
// keys of its own (msg, level), so that a test can tell them from the
// adapter's built-in format.
const upstreamLogging = `{"zap-logger-config":"{\"level\":\"debug\",\"encoding\":\"json\",` +
	`\"outputPaths\":[\"stdout\"],\"errorOutputPaths\":[\"stderr\"],` +
	`\"encoderConfig\":{\"messageKey\":\"msg\",\"levelKey\":\"level\",\"levelEncoder\":\"lowercase\"}}"}`

// startAdapter runs the adapter against c's API server with identity name,
// with the environment upstream's controller gives it, and env added.
func startAdapter(t *testing.T, c *cluster, name string, env ...string) *proc {
	t.Helper()
	port := freePort(t)
	return start(t, name, bins.adapter, port, "/readiness", append([]string{
		"KUBECONFIG=" + c.Kubeconfig, "SYSTEM_NAMESPACE=" + systemNamespace, "POD_NAME=" + name,
		"SERVICE_ACCOUNT_NAME=" + adapterAccount, "PROBES_PORT=" + strconv.Itoa(port),
		"METRICS_PORT=" + strconv.Itoa(freePort(t)), "K_LOGGING_CONFIG=" + upstreamLogging, "DRAIN_TIMEOUT=5s"}, env...)...)
}
