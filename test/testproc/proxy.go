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
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// GoBuild builds the package pkg of this module into out, with the race
// detector when race is set.
func GoBuild(out, pkg string, race bool) error {
	args := []string{"build", "-o", out}
	if race {
		args = append(args, "-race")
	}
	cmd := exec.Command("go", append(args, "knative.dev/event-forwarding-proxy/"+pkg)...)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	return cmd.Run()
}

// Proc is a proxy process (cmd/proxy) run by a test.
type Proc struct {
	TB                testing.TB
	Cmd               *exec.Cmd
	URL, MetricsURL   string
	Port, MetricsPort int
	// Logs is everything the process wrote on stdout and stderr.
	Logs *SyncBuffer
	done chan struct{}
	err  error // exit status, set before done closes
}

// StartProxy runs the proxy binary bin on port and metricsPort with
// loopback destinations allowed, a data race fatal, and env added; it
// waits until the proxy answers /healthz. When the test ends the process
// is killed, a data race it reported fails the test, and its logs are
// shown if the test failed.
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
	p := &Proc{
		TB: tb, Cmd: cmd, Logs: &SyncBuffer{}, done: make(chan struct{}), Port: port, MetricsPort: metricsPort,
		URL:        "http://127.0.0.1:" + strconv.Itoa(port),
		MetricsURL: "http://127.0.0.1:" + strconv.Itoa(metricsPort) + "/metrics",
	}
	cmd.Stdout, cmd.Stderr = p.Logs, p.Logs
	if err := cmd.Start(); err != nil {
		tb.Fatalf("starting the proxy: %v", err)
	}
	go func() { p.err = cmd.Wait(); close(p.done) }()
	tb.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-p.done
		if strings.Contains(p.Logs.String(), "DATA RACE") {
			tb.Errorf("the proxy process hit a data race:\n%s", p.Logs.String())
		}
		if tb.Failed() {
			tb.Logf("proxy logs:\n%s", p.Logs.String())
		}
	})
	Eventually(tb, 60*time.Second, "the proxy answers /healthz", func() bool {
		if p.Exited() {
			tb.Fatalf("the proxy exited at start: %v\n%s", p.err, p.Logs.String())
		}
		resp, err := http.Get(p.URL + "/healthz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	return p
}

// Signal sends sig to the process.
func (p *Proc) Signal(sig syscall.Signal) {
	p.TB.Helper()
	if err := p.Cmd.Process.Signal(sig); err != nil {
		p.TB.Fatalf("signal %v: %v", sig, err)
	}
}

// Exited reports whether the process has exited.
func (p *Proc) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Done is closed once the process has exited.
func (p *Proc) Done() <-chan struct{} { return p.done }

// Wait returns the process's exit error once it exits, failing the test
// after d.
func (p *Proc) Wait(d time.Duration) error {
	p.TB.Helper()
	select {
	case <-p.done:
		return p.err
	case <-time.After(d):
		p.TB.Fatalf("the proxy still runs after %s", d)
		return nil
	}
}
