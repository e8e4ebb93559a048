// Package reliability puts the proxy through faults that need a whole
// process or a whole pod's worth of traffic: shutdown with calls held,
// and the accounting soak, where every event of a few thousand, through
// every fault at once, must be accounted for exactly once. The proxy runs
// as the real binary (built once, with the race detector) or in process
// through its exported API, with goleak watching the in-process one.
package reliability

import (
	"fmt"
	"io"
	"knative.dev/event-forwarding-proxy/test/testproc"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"knative.dev/event-forwarding-proxy/proxy/proxytest"
)

// Shared with the other process tests (test/testproc).
var (
	freePort = testproc.FreePort
)

type lockedBuffer = testproc.SyncBuffer

// proxyBin is the proxy binary built by TestMain.
var proxyBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "reliability-proxy")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	proxyBin = filepath.Join(dir, "proxy")
	// The same flags as test/e2e, so that the build cache serves both.
	build := exec.Command("go", "build", "-race", "-o", proxyBin, "knative.dev/event-forwarding-proxy/cmd/proxy")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building the proxy:", err)
		os.Exit(1)
	}
	code := m.Run()
	if code == 0 {
		if err := goleak.Find(proxytest.IgnoreToxiproxy()...); err != nil {
			fmt.Fprintln(os.Stderr, "goroutines left behind:", err)
			code = 1
		}
	}
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// proc is a running proxy process.
type proc struct {
	t    *testing.T
	cmd  *exec.Cmd
	URL  string
	logs *lockedBuffer
	done chan struct{}
	err  error // exit status, set before done closes
}

// startProxy runs the proxy binary with loopback destinations allowed and
// env added, and waits until it answers /healthz.
func startProxy(t *testing.T, env ...string) *proc {
	t.Helper()
	cmd := exec.Command(proxyBin)
	cmd.Env = append(os.Environ(),
		"PORT="+strconv.Itoa(freePort(t)), "METRICS_PORT="+strconv.Itoa(freePort(t)),
		"FORWARD_ALLOWED_CIDRS=127.0.0.0/8", "FORWARD_LOG_LEVEL=debug", "GORACE=halt_on_error=1")
	cmd.Env = append(cmd.Env, env...)
	p := &proc{t: t, cmd: cmd, logs: &lockedBuffer{}, done: make(chan struct{})}
	for _, kv := range cmd.Env {
		if v, ok := strings.CutPrefix(kv, "PORT="); ok {
			p.URL = "http://127.0.0.1:" + v
		}
	}
	cmd.Stdout, cmd.Stderr = p.logs, p.logs
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting the proxy: %v", err)
	}
	go func() { p.err = cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-p.done
		if strings.Contains(p.logs.String(), "DATA RACE") {
			t.Errorf("the proxy process hit a data race:\n%s", p.logs.String())
		}
		if t.Failed() {
			t.Logf("proxy logs:\n%s", p.logs.String())
		}
	})
	proxytest.Eventually(t, 30*time.Second, func() bool {
		select {
		case <-p.done:
			t.Fatalf("the proxy exited at start: %v\n%s", p.err, p.logs.String())
		default:
		}
		return get(p.URL+"/healthz") == http.StatusOK
	}, "the proxy does not answer /healthz")
	return p
}

// get returns the status of a GET of url, 0 if it fails.
func get(url string) int {
	resp, err := http.Get(url)
	if err != nil {
		return 0
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// terminate sends SIGTERM.
func (p *proc) terminate() {
	p.t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		p.t.Fatalf("SIGTERM: %v", err)
	}
}

// exited reports whether the process has exited.
func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// wait returns the exit error once the process exits, failing after d.
func (p *proc) wait(d time.Duration) error {
	p.t.Helper()
	select {
	case <-p.done:
		return p.err
	case <-time.After(d):
		p.t.Fatalf("the proxy still runs after %s", d)
		return nil
	}
}

// post sends body to the proxy at url, for dest, with headers (name, value
// pairs), in the background.
func post(url, dest, body string, headers ...string) <-chan answer {
	ch := make(chan answer, 1)
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		ch <- answer{err: err}
		return ch
	}
	req.Header.Set("Kn-Forward-To", dest)
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Add(headers[i], headers[i+1])
	}
	go func() {
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			ch <- answer{err: err}
			return
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		ch <- answer{status: resp.StatusCode, reason: resp.Header.Get("Kn-Forward-Error"), body: string(b), err: err}
	}()
	return ch
}

// answer is what a caller got.
type answer struct {
	status int
	reason string // Kn-Forward-Error
	body   string
	err    error // no answer, or a broken one
}

// awaitAnswer returns the answer, failing after 30 s.
func awaitAnswer(t *testing.T, ch <-chan answer) answer {
	t.Helper()
	select {
	case a := <-ch:
		return a
	case <-time.After(30 * time.Second):
		t.Fatal("no answer within 30s")
		return answer{}
	}
}
