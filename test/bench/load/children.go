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
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"knative.dev/event-forwarding-proxy/test/bench/tailbuf"
)

// listenPrefix starts the line a helper child prints once it listens.
const listenPrefix = "LISTEN "

// child is a process the bench started: a helper (sink, naive peer,
// sender), the proxy binary or nginx. It runs in a process group of its
// own, so that stopping it also stops what it forked (nginx's workers).
type child struct {
	name string
	cmd  *exec.Cmd
	// Addr is where it listens, host:port; MetricsAddr where a proxy
	// serves /metrics (and, profiled, /debug/pprof/).
	Addr, MetricsAddr string
	logs              *tailbuf.Tail
	logFile           *os.File
	done              chan struct{}
}

// childSpec says how to start a child.
type childSpec struct {
	name string
	argv []string
	env  []string
	// cpu pins the child to one core when >= 0 and taskset is there.
	cpu int
	// onLine, if set, gets every stdout line after the LISTEN line.
	onLine func(string)
	// listenLine: wait for the child to print "LISTEN host:port".
	listenLine bool
}

// start starts spec's process. With listenLine it waits (at most 30 s)
// for the child's LISTEN line; otherwise the caller waits for readiness.
func (o *orch) start(ctx context.Context, spec childSpec) (*child, error) {
	argv := spec.argv
	if spec.cpu >= 0 && o.taskset != "" {
		argv = append([]string{o.taskset, "-c", strconv.Itoa(spec.cpu)}, argv...)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), spec.env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	c := &child{name: spec.name, cmd: cmd, logs: tailbuf.New(16 << 10), done: make(chan struct{})}
	cmd.Stderr = c.logs
	if dir := os.Getenv("BENCH_CHILD_LOGS"); dir != "" {
		// Debugging aid: every child's stderr also goes to a file there.
		if f, err := os.CreateTemp(dir, spec.name+"-*.log"); err == nil {
			cmd.Stderr = io.MultiWriter(c.logs, f)
			c.logFile = f
		}
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", spec.name, err)
	}
	listening := make(chan string, 1)
	go func() {
		// Wait closes the pipe: read it to the end first.
		c.readStdout(out, spec, listening)
		_ = cmd.Wait()
		if c.logFile != nil {
			_ = c.logFile.Close()
		}
		close(c.done)
	}()
	if !spec.listenLine {
		return c, nil
	}
	t := time.NewTimer(30 * time.Second)
	defer t.Stop()
	select {
	case c.Addr = <-listening:
		return c, nil
	case <-c.done:
		err = fmt.Errorf("%s exited before listening: %s", spec.name, c.logs.String())
	case <-t.C:
		err = fmt.Errorf("%s did not listen within 30s", spec.name)
	case <-ctx.Done():
		err = ctx.Err()
	}
	c.stop(time.Second)
	return nil, err
}

func (c *child) readStdout(out io.Reader, spec childSpec, listening chan<- string) {
	sc := bufio.NewScanner(out)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if addr, ok := strings.CutPrefix(line, listenPrefix); ok && spec.listenLine {
			select {
			case listening <- addr:
			default:
			}
			continue
		}
		if spec.onLine != nil {
			spec.onLine(line)
		}
	}
}

// Pid is the child's process id (taskset execs in place, so it is the
// program's own).
func (c *child) Pid() int { return c.cmd.Process.Pid }

// URL is the child's base URL.
func (c *child) URL() string { return "http://" + c.Addr }

// stop asks the child and what it forked to end (SIGTERM to its process
// group), kills the group when the child is still there after grace, and
// returns once the child is reaped.
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
		_ = syscall.Kill(pgid, syscall.SIGKILL)
		<-c.done
	}
}

// exited reports whether the child has ended.
func (c *child) exited() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// freePort returns a loopback TCP port nobody listens on now, for
// programs that take a port number rather than a listener.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// waitReady polls until check succeeds, the child exits, or 30 s pass.
func waitReady(ctx context.Context, c *child, check func(context.Context) error) error {
	deadline := time.Now().Add(30 * time.Second)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	var err error
	for time.Now().Before(deadline) {
		if err = check(ctx); err == nil {
			return nil
		}
		select {
		case <-c.done:
			return fmt.Errorf("%s exited: %s", c.name, c.logs.String())
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
	return fmt.Errorf("%s not ready within 30s: %w", c.name, err)
}

// httpOK checks that GET url answers 200.
func httpOK(url string) func(context.Context) error {
	client := &http.Client{Timeout: time.Second, Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true}}
	return func(ctx context.Context) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("GET %s: %s", url, resp.Status)
		}
		return nil
	}
}

// tcpOpen checks that something accepts connections at addr.
func tcpOpen(addr string) func(context.Context) error {
	return func(ctx context.Context) error {
		d := net.Dialer{Timeout: time.Second}
		conn, err := d.DialContext(ctx, "tcp", addr)
		if err != nil {
			return err
		}
		return conn.Close()
	}
}
