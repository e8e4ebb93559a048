// Package e2e runs the proxy binary as a process and drives it over real
// loopback sockets with CloudEvents clients and recording sinks.
package e2e

import (
	"context"
	"fmt"
	"io"
	"knative.dev/event-forwarding-proxy/test/testproc"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Shared with the other process tests (test/testproc).
var (
	freePort   = testproc.FreePort
	eventually = testproc.Eventually
)

type syncBuffer = testproc.SyncBuffer

// proxyBin is the proxy binary built once by TestMain, with the race
// detector so that a race in the real process fails the test that saw it.
var proxyBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "e2e-proxy")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	proxyBin = filepath.Join(dir, "proxy")
	build := exec.Command("go", "build", "-race", "-o", proxyBin, "knative.dev/event-forwarding-proxy/cmd/proxy")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building the proxy:", err)
		os.Exit(1)
	}
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// proc is a running proxy process.
type proc struct {
	t          *testing.T
	cmd        *exec.Cmd
	URL        string
	MetricsURL string
	logs       *syncBuffer
	done       chan struct{}
	err        error // exit status, set before done closes
}

// startProxy runs the proxy binary with loopback destinations allowed and
// env added, and waits until it answers /healthz.
func startProxy(t *testing.T, env ...string) *proc {
	t.Helper()
	port, metricsPort := freePort(t), freePort(t)
	cmd := exec.Command(proxyBin)
	cmd.Env = append(os.Environ(),
		"PORT="+strconv.Itoa(port),
		"METRICS_PORT="+strconv.Itoa(metricsPort),
		"FORWARD_ALLOWED_CIDRS=127.0.0.0/8",
		"FORWARD_LOG_LEVEL=debug",
		"GORACE=halt_on_error=1",
	)
	cmd.Env = append(cmd.Env, env...)
	p := &proc{
		t: t, cmd: cmd, logs: &syncBuffer{}, done: make(chan struct{}),
		URL:        "http://127.0.0.1:" + strconv.Itoa(port),
		MetricsURL: "http://127.0.0.1:" + strconv.Itoa(metricsPort) + "/metrics",
	}
	cmd.Stdout, cmd.Stderr = p.logs, p.logs
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting proxy: %v", err)
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
	eventually(t, 30*time.Second, "proxy answers /healthz", func() bool {
		select {
		case <-p.done:
			t.Fatalf("proxy exited at start: %v\n%s", p.err, p.logs.String())
		default:
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

// signal sends sig to the proxy process.
func (p *proc) signal(sig syscall.Signal) {
	p.t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		p.t.Fatalf("signal: %v", err)
	}
}

// wait returns the process's exit error once it exits, failing after d.
func (p *proc) wait(d time.Duration) error {
	p.t.Helper()
	select {
	case <-p.done:
		return p.err
	case <-time.After(d):
		p.t.Fatalf("proxy still running after %s", d)
		return nil
	}
}

// post sends body to the proxy with the given headers.
func (p *proc) post(t *testing.T, body string, headers ...string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, p.URL, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Add(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("POST through proxy: %v", err)
	}
	return resp
}

// recorded is one request as a sink saw it.
type recorded struct {
	Method string
	Path   string
	Proto  int
	Header http.Header
	Body   []byte
	At     time.Time
}

// sink is a destination on loopback that records every request and
// answers with respond (200 with no body if nil). n counts from 1.
type sink struct {
	*httptest.Server
	mu      sync.Mutex
	reqs    []recorded
	respond func(w http.ResponseWriter, r *http.Request, n int)
}

func newSink(t *testing.T, h2c bool, respond func(w http.ResponseWriter, r *http.Request, n int)) *sink {
	t.Helper()
	s := &sink{respond: respond}
	s.Server = httptest.NewUnstartedServer(http.HandlerFunc(s.serve))
	if h2c {
		s.Server.Config.Protocols = new(http.Protocols)
		s.Server.Config.Protocols.SetHTTP1(true)
		s.Server.Config.Protocols.SetUnencryptedHTTP2(true)
	}
	s.Start()
	t.Cleanup(s.Close)
	return s
}

func (s *sink) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	s.mu.Lock()
	s.reqs = append(s.reqs, recorded{r.Method, r.URL.RequestURI(), r.ProtoMajor, r.Header.Clone(), body, time.Now()})
	n := len(s.reqs)
	s.mu.Unlock()
	if s.respond != nil {
		s.respond(w, r, n)
	}
}

func (s *sink) requests() []recorded {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]recorded(nil), s.reqs...)
}

func (s *sink) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.reqs)
}

// blocker makes a sink hold every call until release is called (or the
// call's context ends), so tests can hold a known number of calls.
type blocker struct {
	release func()
	ch      chan struct{}
	once    sync.Once
}

func newBlocker(t *testing.T) *blocker {
	b := &blocker{ch: make(chan struct{})}
	b.release = func() { b.once.Do(func() { close(b.ch) }) }
	t.Cleanup(b.release)
	return b
}

func (b *blocker) hold(w http.ResponseWriter, r *http.Request, _ int) {
	select {
	case <-b.ch:
		_, _ = io.WriteString(w, "released")
	case <-r.Context().Done():
	}
}

// ctx returns a context that ends with the test or after d.
func ctxFor(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}
