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

package demo

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"knative.dev/event-forwarding-proxy/test/bench/tailbuf"
)

// listenPrefix starts the line the sink helper prints once it listens.
const listenPrefix = "LISTEN "

// child is a process the demo started: the sink, the proxy or a sender.
// It runs in a process group of its own, so that the parent decides the
// order in which they stop, and is killed if the parent dies.
type child struct {
	name   string
	cmd    *exec.Cmd
	logs   *tailbuf.Tail
	done   chan struct{}
	killed atomic.Bool
}

// Exit is how a child ended.
type Exit struct {
	Name string `json:"name"`
	Pid  int    `json:"pid"`
	// Exited is set once the child has ended and been reaped.
	Exited bool `json:"exited"`
	// Code is its exit status; -1 when a signal ended it.
	Code int `json:"code"`
	// Killed is set when it had to be killed after its grace period.
	Killed bool `json:"killed"`
}

// startChild starts argv with env added; onLine, if set, gets every line
// of its standard output. The child's standard error is kept for errors.
func startChild(name string, argv, env []string, onLine func(string)) (*child, error) {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	c := &child{name: name, cmd: cmd, logs: tailbuf.New(8 << 10), done: make(chan struct{})}
	cmd.Stderr = c.logs
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting the %s: %w", name, err)
	}
	go func() {
		// Wait closes the pipe: read it to the end first.
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			if onLine != nil {
				onLine(sc.Text())
			}
		}
		_, _ = io.Copy(io.Discard, out)
		_ = cmd.Wait()
		close(c.done)
	}()
	return c, nil
}

// Pid is the child's process id.
func (c *child) Pid() int { return c.cmd.Process.Pid }

// exited reports whether the child has ended and been reaped.
func (c *child) exited() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// stop sends SIGTERM to the child's process group, kills the group when
// the child is still there after grace, and returns once it is reaped.
func (c *child) stop(grace time.Duration) {
	if c.exited() {
		return
	}
	pgid := -c.cmd.Process.Pid
	_ = syscall.Kill(pgid, syscall.SIGTERM)
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-c.done:
	case <-t.C:
		c.killed.Store(true)
		_ = syscall.Kill(pgid, syscall.SIGKILL)
		<-c.done
	}
}

// exit describes how the child ended (Exited false while it runs).
func (c *child) exit() Exit {
	e := Exit{Name: c.name, Pid: c.Pid(), Code: -1, Killed: c.killed.Load()}
	if c.exited() {
		e.Exited = true
		e.Code = c.cmd.ProcessState.ExitCode()
	}
	return e
}

// waitLine waits (at most d) for the child's first line starting with
// prefix, delivered on lines, and returns the rest of it.
func (c *child) waitLine(ctx context.Context, lines <-chan string, prefix string, d time.Duration) (string, error) {
	t := time.NewTimer(d)
	defer t.Stop()
	for {
		select {
		case l := <-lines:
			if rest, ok := strings.CutPrefix(l, prefix); ok {
				return rest, nil
			}
		case <-c.done:
			return "", fmt.Errorf("the %s exited at start: %s", c.name, c.logs.String())
		case <-t.C:
			return "", fmt.Errorf("the %s did not start within %s", c.name, d)
		case <-ctx.Done():
			return "", ctx.Err()
		}
	}
}

// waitReady polls check every 20 ms until it succeeds, the child exits,
// or d passes.
func (c *child) waitReady(ctx context.Context, d time.Duration, check func(context.Context) error) error {
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		err := check(ctx)
		if err == nil {
			return nil
		}
		select {
		case <-c.done:
			return fmt.Errorf("the %s exited at start: %s", c.name, c.logs.String())
		case <-deadline.C:
			return fmt.Errorf("the %s was not ready within %s: %w", c.name, d, err)
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
}
