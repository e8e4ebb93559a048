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

package testproc

import (
	"os"
	"os/exec"
	"strconv"
	"testing"
)

// GoBuild builds the package pkg of this module into out: with the race
// detector when race is set, and otherwise as hack/release.sh builds the
// release (static, -trimpath, no symbol table), whose compiled packages
// make test's cluster lane and make lint leave in Go's build cache.
func GoBuild(out, pkg string, race bool) error {
	args := []string{"build", "-o", out, "-race"}
	env := os.Environ()
	if !race {
		args = []string{"build", "-o", out, "-trimpath", "-ldflags", "-s -w"}
		env = append(env, "CGO_ENABLED=0")
	}
	cmd := exec.Command("go", append(args, "knative.dev/event-forwarding-proxy/"+pkg)...)
	cmd.Env = env
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	return cmd.Run()
}

// StartProxy runs the proxy binary bin on port and metricsPort with
// loopback destinations allowed, a data race fatal, and env added, as
// Start does, and waits until it answers /healthz.
func StartProxy(tb testing.TB, bin string, port, metricsPort int, env ...string) *Proc {
	tb.Helper()
	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(),
		"PORT="+strconv.Itoa(port),
		"METRICS_PORT="+strconv.Itoa(metricsPort),
		"FORWARD_ALLOWED_CIDRS=127.0.0.0/8",
		"GORACE=halt_on_error=1",
	)
	cmd.Env = append(cmd.Env, env...)
	p := Start(tb, "proxy", cmd)
	p.Port, p.MetricsPort = port, metricsPort
	p.URL = "http://127.0.0.1:" + strconv.Itoa(port)
	p.MetricsURL = "http://127.0.0.1:" + strconv.Itoa(metricsPort) + "/metrics"
	p.AwaitReady(p.URL + "/healthz")
	return p
}
