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

package reliability

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
	"go.uber.org/zap"

	"knative.dev/event-forwarding-proxy/config"
	"knative.dev/event-forwarding-proxy/proxy"
	"knative.dev/event-forwarding-proxy/proxy/proxytest"
	"knative.dev/event-forwarding-proxy/test/testproc"
)

// TestQuietPeriod: from SIGTERM on, through the quiet period, readiness
// fails, liveness holds, new calls (sync and async) get 503 draining and
// reach nothing, while the calls already held run to completion; the
// process then exits 0.
func TestQuietPeriod(t *testing.T) {
	const quiet = 3 * time.Second
	p := startProxy(t, "FORWARD_DRAIN_QUIET_PERIOD="+quiet.String())
	hold := proxytest.NewHold(t)
	held := proxytest.NewDestination(t, hold.Reply)
	other := proxytest.NewDestination(t, nil)
	syncCall := post(p.URL, held.URL, "sync")
	async := awaitAnswer(t, post(p.URL, held.URL, "async", "Prefer", "respond-async"))
	if async.status != http.StatusAccepted {
		t.Fatalf("the async call got %d, want 202", async.status)
	}
	proxytest.Eventually(t, 10*time.Second, func() bool { return held.Count() == 2 }, "the calls are not held")

	p.Signal(syscall.SIGTERM)
	sigterm := time.Now()
	proxytest.Eventually(t, 10*time.Second, func() bool { return get(p.URL+"/readyz") == http.StatusServiceUnavailable }, "readiness does not fail")
	// The quiet period is a sleep, which never ends early: readiness that
	// failed only after it is seen no sooner than quiet after SIGTERM,
	// however fast the machine, and readiness that failed at once is seen
	// sooner unless the machine stalls for the whole quiet period.
	if took := time.Since(sigterm); took >= quiet {
		t.Errorf("readiness failed %s after SIGTERM: at once, not after the quiet period (%s), is the point", took, quiet)
	}
	tick := time.NewTicker(200 * time.Millisecond) // five rounds spread over the quiet period
	defer tick.Stop()
	for i := range 5 {
		<-tick.C
		if s := get(p.URL + "/healthz"); s != http.StatusOK {
			t.Errorf("liveness answered %d while draining", s)
		}
		for _, prefer := range []string{"", "respond-async"} {
			a := awaitAnswer(t, post(p.URL, other.URL, "new", "Prefer", prefer))
			if a.status != http.StatusServiceUnavailable || a.reason != "draining" {
				t.Errorf("round %d: a new call (Prefer %q) got %d %q, want 503 draining", i, prefer, a.status, a.reason)
			}
		}
		if p.Exited() {
			t.Fatal("the proxy exited while holding calls")
		}
	}
	if n := other.Count(); n != 0 {
		t.Errorf("calls made while draining reached their destination %d times", n)
	}
	hold.Release()
	if a := awaitAnswer(t, syncCall); a.status != http.StatusOK || a.body != "released" {
		t.Errorf("the held sync call ended with %d %q %v", a.status, a.body, a.err)
	}
	if err := p.Wait(30 * time.Second); err != nil {
		t.Errorf("the proxy exited with %v, want 0", err)
	}
	if logs := p.Logs.String(); !strings.Contains(logs, "Drained") || strings.Contains(logs, "Abandoned") {
		t.Errorf("want a clean drain in the logs:\n%s", logs)
	}
}

// TestDrainDeadlineMidAnswer: a call whose answer is streaming when the
// drain timeout passes cannot get the proxy's 503 any more; its caller
// gets a broken answer (never a clean 200 with part of the body), and the
// process still exits 0.
func TestDrainDeadlineMidAnswer(t *testing.T) {
	p := startProxy(t, "FORWARD_DRAIN_TIMEOUT=500ms")
	started := make(chan struct{})
	dest := proxytest.NewDestination(t, func(w http.ResponseWriter, r *http.Request, _ int) {
		w.Header().Set("Content-Length", "65536")
		_, _ = w.Write([]byte(strings.Repeat("a", 1024)))
		http.NewResponseController(w).Flush()
		close(started)
		<-r.Context().Done()
	})
	call := post(p.URL, dest.URL, "e")
	<-started
	p.Signal(syscall.SIGTERM)
	a := awaitAnswer(t, call)
	if a.err == nil {
		t.Errorf("the caller got a clean %d with %d bytes of a 65536-byte answer", a.status, len(a.body))
	}
	if err := p.Wait(30 * time.Second); err != nil {
		t.Errorf("the proxy exited with %v, want 0", err)
	}
}

// TestShutdownLeavesNothing: once Shutdown and the server's own shutdown
// returned, an in-process proxy that served sync, async and h2c calls has
// closed every connection to its destinations and left no goroutine.
func TestShutdownLeavesNothing(t *testing.T) {
	h1, h1Conns := proxytest.NewCountedDestination(t, false, nil)
	h2, h2Conns := proxytest.NewCountedDestination(t, true, nil)
	// The destinations' own listeners are there before and after.
	defer goleak.VerifyNone(t, append(proxytest.IgnoreToxiproxy(), goleak.IgnoreCurrent())...)
	cfg, err := config.ProxyFromEnv(mapEnv(map[string]string{"FORWARD_ALLOWED_CIDRS": "127.0.0.0/8"}), 0)
	if err != nil {
		t.Fatal(err)
	}
	logger := zap.NewNop().Sugar()
	p := proxy.New(cfg, logger)
	srv := p.Server(cfg, logger)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(proxy.NewFramingListener(ln, cfg.MaxHeaderBytes)) }()
	url := "http://" + ln.Addr().String()
	clients := []*http.Client{{Transport: &http.Transport{}}, testproc.H2CClient(t, 0)}
	for _, c := range clients {
		for _, dest := range []string{h1.URL, h2.URL} {
			for _, prefer := range []string{"", "respond-async"} {
				req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader("e"))
				req.Header.Set("Kn-Forward-To", dest)
				req.Header.Set("Prefer", prefer)
				resp, err := c.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		}
		c.CloseIdleConnections()
	}
	p.Drain()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := p.Shutdown(ctx); err != nil {
		t.Errorf("Shutdown: %v", err)
	}
	if err := srv.Shutdown(ctx); err != nil {
		t.Errorf("server Shutdown: %v", err)
	}
	if err := <-served; !errors.Is(err, http.ErrServerClosed) {
		t.Errorf("Serve: %v", err)
	}
	proxytest.Eventually(t, 5*time.Second, func() bool { return h1Conns.Open()+h2Conns.Open() == 0 },
		"the proxy left connections to its destinations open after shutting down")
}

// mapEnv is a lookup backed by m.
func mapEnv(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}
