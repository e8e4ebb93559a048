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
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/goleak"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"knative.dev/event-forwarding-proxy/config"
	"knative.dev/event-forwarding-proxy/internal/telemetry"
	"knative.dev/event-forwarding-proxy/proxy"
	"knative.dev/event-forwarding-proxy/proxy/proxytest"
	"knative.dev/event-forwarding-proxy/test/testproc"
)

// soakEvents is how many events the soak sends.
const soakEvents = 3000

// event is one event of the soak and what its caller saw.
type event struct {
	id     string
	kind   kind
	h2c    bool
	tenant string

	status   int    // the answer's status; 0 if none
	reason   string // Kn-Forward-Error: the proxy answered itself
	broken   bool   // the answer started, then broke off
	canceled bool   // the caller gave up first
	err      error  // no answer, and not because the caller gave up
}

// class is where an event ends up, from the caller's point of view.
func (e *event) class() string {
	switch {
	case e.canceled:
		return "canceled by its caller"
	case e.err != nil:
		return "no answer"
	case e.broken:
		return "failed: answer broke off"
	case e.reason != "" && (e.status == http.StatusBadGateway || e.status == http.StatusGatewayTimeout):
		return "failed: proxy answered " + e.reason
	case e.reason != "":
		return "refused: " + e.reason
	case e.status == http.StatusAccepted && e.kind.async:
		return "accepted"
	case e.status >= 200 && e.status < 300:
		return "delivered: sync"
	default:
		return fmt.Sprintf("failed: destination answered %d", e.status)
	}
}

// soakProxy is the in-process proxy of the soak with its metrics and logs.
type soakProxy struct {
	*proxy.Proxy
	url  string
	srv  *http.Server
	reg  *prometheus.Registry
	logs *observer.ObservedLogs
	done chan error
}

func newSoakProxy(t *testing.T) *soakProxy {
	cfg, err := config.ProxyFromEnv(mapEnv(map[string]string{
		"FORWARD_ALLOWED_CIDRS": "127.0.0.0/8", "FORWARD_MAX_INFLIGHT": "32", "FORWARD_MAX_INFLIGHT_PER_DESTINATION": "6",
		"FORWARD_MAX_INFLIGHT_PER_TENANT": "24", "FORWARD_TENANT_RESERVE": "4", "FORWARD_MAX_EVENT_BYTES": "4096",
		"FORWARD_MAX_TIMEOUT": "5s", "FORWARD_DIAL_TIMEOUT": "200ms", "FORWARD_ASYNC_RETRY": "2",
		"FORWARD_ASYNC_MAX_RETRY": "3", "FORWARD_ASYNC_BACKOFF_DELAY": "5ms", "FORWARD_ASYNC_BACKOFF_MAX": "20ms",
		"FORWARD_ASYNC_MAX_RETRY_AFTER": "20ms", "FORWARD_BREAKER_FAILURES": "3", "FORWARD_BREAKER_COOLDOWN": "50ms",
		// The good and the slow sink listen there: h2c goes out too.
		"FORWARD_H2C_HOSTS": h2cSinkHost,
	}), 0)
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	mp, err := telemetry.NewPrometheusMeterProvider(reg)
	if err != nil {
		t.Fatal(err)
	}
	core, logs := observer.New(zapcore.ErrorLevel)
	logger := zap.New(core).Sugar()
	p := proxy.New(cfg, logger, proxy.WithMeterProvider(mp))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	sp := &soakProxy{Proxy: p, url: "http://" + ln.Addr().String(), srv: p.Server(cfg, logger),
		reg: reg, logs: logs, done: make(chan error, 1)}
	go func() { sp.done <- sp.srv.Serve(proxy.NewFramingListener(ln, cfg.MaxHeaderBytes)) }()
	return sp
}

// shutdown drains the proxy as cmd/proxy does, once every async delivery
// has ended.
func (sp *soakProxy) shutdown(t *testing.T) {
	sp.Drain()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := sp.Shutdown(ctx); err != nil {
		t.Errorf("Shutdown: %v", err)
	}
	if err := sp.srv.Shutdown(ctx); err != nil {
		t.Errorf("server Shutdown: %v", err)
	}
	if err := <-sp.done; !errors.Is(err, http.ErrServerClosed) {
		t.Errorf("Serve: %v", err)
	}
}

// send makes e's call and records what its caller saw. A caller that gives
// up does so once its call reached the destination, so that it never races
// the proxy's refusal.
func send(c *http.Client, url string, s sinks, l *ledger, e *event) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if e.kind.cancel {
		go func() {
			select {
			case <-l.arrival(e.id):
				cancel()
			case <-ctx.Done():
			}
		}()
	}
	body := "event " + e.id
	if e.kind.size > 0 {
		body = strings.Repeat("x", e.kind.size)
	}
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	h := req.Header
	h.Set("Kn-Forward-To", e.kind.dest(s))
	h.Set("Ce-Id", e.id)
	h.Set("Ce-Source", "/soak")
	h.Set("Ce-Type", "dev.knative.soak")
	h.Set("Ce-Specversion", "1.0")
	h.Set("Kn-Namespace", e.tenant)
	if e.kind.async {
		h.Set("Prefer", "respond-async")
	}
	for i := 0; i+1 < len(e.kind.headers); i += 2 {
		h.Set(e.kind.headers[i], e.kind.headers[i+1])
	}
	resp, err := c.Do(req)
	switch {
	case err != nil && e.kind.cancel && ctx.Err() != nil:
		e.canceled = true
		return
	case err != nil && e.kind.cut:
		// The proxy had passed the destination's headers on, still
		// buffered: the connection (or stream) breaks before they leave.
		e.broken = true
		return
	case err != nil:
		e.err = err
		return
	}
	defer resp.Body.Close()
	e.status, e.reason = resp.StatusCode, resp.Header.Get("Kn-Forward-Error")
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		e.broken = true
	}
}

// TestAccountingSoak sends a few thousand events through every fault at
// once, sync and async, HTTP/1.1 and h2c, from three tenants, and accounts
// for each exactly once: delivered (its sink accepted it: for a sync
// event its caller got the 2xx, for an async one no failure was logged),
// or refused or failed (the caller got the proxy's answer, the
// destination's error, a broken answer, or gave up itself; for an async
// event, one "Async delivery failed" line), and never both. The proxy's
// metrics must tell the same story, its gauges must be back to zero and
// it must leave no goroutine behind.
func TestAccountingSoak(t *testing.T) {
	l := newLedger()
	s := newSinks(t, l)
	// The sinks and toxiproxy stay up until the cleanups.
	defer goleak.VerifyNone(t, append(proxytest.IgnoreToxiproxy(), goleak.IgnoreCurrent())...)
	sp := newSoakProxy(t)
	h1 := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	h2 := testproc.H2CClient(t, 0)

	rng := rand.New(rand.NewPCG(9, 9))
	mix := soakKinds()
	var pick []int
	for i, k := range mix {
		for range k.weight {
			pick = append(pick, i)
		}
	}
	events := make([]*event, soakEvents)
	for i := range events {
		events[i] = &event{id: fmt.Sprintf("soak-%05d", i), kind: mix[pick[rng.IntN(len(pick))]],
			h2c: rng.IntN(2) == 0, tenant: []string{"team-a", "team-a", "team-b", "team-c"}[rng.IntN(4)]}
	}
	start := time.Now()
	work := make(chan *event)
	var wg sync.WaitGroup
	for range 24 {
		wg.Go(func() {
			for e := range work {
				c := h1
				if e.h2c {
					c = h2
				}
				send(c, sp.url, s, l, e)
			}
		})
	}
	for _, e := range events {
		work <- e
	}
	close(work)
	wg.Wait()
	sent := time.Since(start)
	h1.CloseIdleConnections()
	h2.CloseIdleConnections()
	sp.shutdown(t)
	t.Logf("%d events sent in %s, all ended in %s", soakEvents, sent.Round(time.Millisecond), time.Since(start).Round(time.Millisecond))
	reconcile(t, sp, l, events)
}
