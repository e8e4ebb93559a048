// Package sender tests delivery.Sender as a source author meets it: against
// the real proxy binary, run as a process, a real Kubernetes API server
// (test/apiserver) for the live ConfigMap and the TokenRequest API, and
// recording sinks on loopback.
package sender

import (
	"bytes"
	"context"
	"fmt"
	"knative.dev/event-forwarding-proxy/test/testproc"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
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

// proxyBin is the proxy binary, built once by TestMain before any test runs
// and never written again; with the race detector when this test binary
// has it, so that a race in the real process fails the test that saw it.
var proxyBin string

func TestMain(m *testing.M) {
	if os.Getenv(sinkChildEnv) != "" {
		os.Exit(runSinkChild())
	}
	dir, err := os.MkdirTemp("", "sender-proxy")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	proxyBin = filepath.Join(dir, "proxy")
	args := []string{"build", "-o", proxyBin}
	if raceEnabled {
		args = append(args, "-race")
	}
	build := exec.Command("go", append(args, "knative.dev/event-forwarding-proxy/cmd/proxy")...)
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
	tb          testing.TB
	cmd         *exec.Cmd
	URL         string
	MetricsURL  string
	port, mport int
	logs        *syncBuffer
	done        chan struct{}
	err         error // exit status, set before done closes
}

// startProxy runs the proxy binary on new ports with loopback destinations
// allowed and env added, and waits until it answers /healthz.
func startProxy(tb testing.TB, env ...string) *proc {
	tb.Helper()
	return startProxyOn(tb, freePort(tb), freePort(tb), env...)
}

// startProxyOn runs the proxy binary on the given ports.
func startProxyOn(tb testing.TB, port, metricsPort int, env ...string) *proc {
	tb.Helper()
	cmd := exec.Command(proxyBin)
	cmd.Env = append(os.Environ(),
		"PORT="+strconv.Itoa(port),
		"METRICS_PORT="+strconv.Itoa(metricsPort),
		"FORWARD_ALLOWED_CIDRS=127.0.0.0/8",
		"GORACE=halt_on_error=1",
	)
	cmd.Env = append(cmd.Env, env...)
	p := &proc{
		tb: tb, cmd: cmd, logs: &syncBuffer{}, done: make(chan struct{}), port: port, mport: metricsPort,
		URL:        "http://127.0.0.1:" + strconv.Itoa(port),
		MetricsURL: "http://127.0.0.1:" + strconv.Itoa(metricsPort) + "/metrics",
	}
	cmd.Stdout, cmd.Stderr = p.logs, p.logs
	if err := cmd.Start(); err != nil {
		tb.Fatalf("starting proxy: %v", err)
	}
	go func() { p.err = cmd.Wait(); close(p.done) }()
	tb.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-p.done
		if strings.Contains(p.logs.String(), "DATA RACE") {
			tb.Errorf("the proxy process hit a data race:\n%s", p.logs.String())
		}
		if tb.Failed() {
			tb.Logf("proxy logs:\n%s", p.logs.String())
		}
	})
	eventually(tb, 60*time.Second, "the proxy answers /healthz", func() bool {
		select {
		case <-p.done:
			tb.Fatalf("proxy exited at start: %v\n%s", p.err, p.logs.String())
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

// stop sends sig and waits until the process exits.
func (p *proc) stop(sig syscall.Signal) {
	p.tb.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		p.tb.Fatalf("signal %v: %v", sig, err)
	}
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		p.tb.Fatalf("proxy still running 30 s after %v", sig)
	}
}

// metric returns the sum of the samples of a metric whose line contains
// every one of labels, from the proxy's /metrics.
func (p *proc) metric(name string, labels ...string) float64 {
	p.tb.Helper()
	resp, err := http.Get(p.MetricsURL)
	if err != nil {
		p.tb.Fatalf("scraping the proxy: %v", err)
	}
	defer resp.Body.Close()
	var buf bytes.Buffer
	_, _ = buf.ReadFrom(resp.Body)
	sum := 0.0
lines:
	for line := range strings.SplitSeq(buf.String(), "\n") {
		if !strings.HasPrefix(line, name+"{") && !strings.HasPrefix(line, name+" ") {
			continue
		}
		for _, l := range labels {
			if !strings.Contains(line, l) {
				continue lines
			}
		}
		f := strings.Fields(line)
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		if err == nil {
			sum += v
		}
	}
	return sum
}

func mustURL(tb testing.TB, raw string) *url.URL {
	tb.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		tb.Fatal(err)
	}
	return u
}

// ctxFor returns a context that ends with the test or after d.
func ctxFor(tb testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	tb.Cleanup(cancel)
	return ctx
}
