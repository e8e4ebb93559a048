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
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Proc is a process run by a test.
type Proc struct {
	TB   testing.TB
	Name string // in messages
	Cmd  *exec.Cmd
	// URL is where the process serves, set by the function that started
	// it: StartProxy sets it and the other three to the proxy's.
	URL, MetricsURL   string
	Port, MetricsPort int
	// Logs is everything the process wrote on stdout and stderr.
	Logs *SyncBuffer
	done chan struct{}
	err  error // exit status, set before done closes
}

// Start runs cmd, keeping its output in Logs. When the test ends the
// process is killed, a data race it reported fails the test, and its logs
// are shown if the test failed.
func Start(tb testing.TB, name string, cmd *exec.Cmd) *Proc {
	tb.Helper()
	p := &Proc{TB: tb, Name: name, Cmd: cmd, Logs: &SyncBuffer{}, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = p.Logs, p.Logs
	if err := cmd.Start(); err != nil {
		tb.Fatalf("starting %s: %v", name, err)
	}
	go func() { p.err = cmd.Wait(); close(p.done) }()
	tb.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-p.done
		if strings.Contains(p.Logs.String(), "DATA RACE") {
			tb.Errorf("%s hit a data race", name)
		}
		if tb.Failed() {
			tb.Logf("%s logs:\n%s", name, p.Logs.String())
		}
	})
	return p
}

// probeClient bounds a probe: a process that accepts and never answers
// fails the wait rather than hanging it.
var probeClient = &http.Client{Timeout: 10 * time.Second}

// AwaitReady waits up to a minute until GET url answers 200, failing the
// test at once if the process exits first.
func (p *Proc) AwaitReady(url string) {
	p.TB.Helper()
	EventuallyState(p.TB, time.Minute, p.Name+" answers "+url, func() (bool, string) {
		if p.Exited() {
			p.TB.Fatalf("%s exited at start: %v\n%s", p.Name, p.err, p.Logs.String())
		}
		resp, err := probeClient.Get(url)
		if err != nil {
			return false, err.Error()
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, resp.Status
	})
}

// Signal sends sig to the process.
func (p *Proc) Signal(sig syscall.Signal) {
	p.TB.Helper()
	if err := p.Cmd.Process.Signal(sig); err != nil {
		p.TB.Fatalf("signal %v to %s: %v", sig, p.Name, err)
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
		p.TB.Fatalf("%s still runs after %s", p.Name, d)
		return nil
	}
}
