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

package hostile

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"knative.dev/event-forwarding-proxy/test/testproc"
)

// suiteEnv is the environment of every proxy of the suite, on top of
// testproc's (loopback destinations allowed).
var suiteEnv = []string{
	// The abuse threshold of the HTTP/2 server: a connection is cut once
	// it resets, or sends frames that carry no request, more than this
	// (and more than it completed).
	"FORWARD_H2_MAX_CONCURRENT_STREAMS=100",
	"FORWARD_READ_HEADER_TIMEOUT=2s",
	"FORWARD_LOG_LEVEL=warn",
}

// Bounds every attack is held to, once it is over.
const (
	// goroutineSlack: goroutines above the baseline the proxy may keep
	// (an outbound connection or two to the sink, each with its reader).
	goroutineSlack = 16
	// heapSlack: the most the heap in use may grow during an attack. The
	// attacks send at most a few MiB; a proxy that kept what they
	// announce (16 MiB frames, megabytes of decoded headers per stream)
	// would pass it.
	heapSlack = 64 << 20
	// recoverWithin bounds the wait for goroutines to come back.
	recoverWithin = 30 * time.Second
)

// sink is the destination: the legitimate caller's requests (header
// X-Legit) are answered at once; any other request is held until its
// caller goes, the attack releases it (Release: an attack whose calls the
// sink holds releases them when it is over, so that what they keep in the
// proxy goes before its bounds are checked), or the test ends.
type sink struct{ *testproc.Sink }

func newSink(t *testing.T) sink {
	return sink{testproc.NewSink(t, &testproc.SinkOptions{
		H2C:  true,
		Hold: func(r *http.Request, _ int) bool { return !isLegit(r.Header) },
		Respond: func(w http.ResponseWriter, r *http.Request, _ int) {
			if isLegit(r.Header) {
				_, _ = io.WriteString(w, "ok")
			}
		},
	})}
}

func isLegit(h http.Header) bool { return h.Get("X-Legit") != "" }

// attacks is the number of requests that were not the legitimate
// caller's.
func (s sink) attacks() int64 {
	var n int64
	for _, r := range s.Requests() {
		if !isLegit(r.Header) {
			n++
		}
	}
	return n
}

// legit is the legitimate caller: one request every 100 ms over one h2c
// connection of its own, opened before the attack, through the proxy to
// the sink.
type legit struct {
	t      *testing.T
	client *http.Client
	url    string
	dest   string

	mu        sync.Mutex
	latencies []time.Duration
	failures  []string

	quit chan struct{} // no new call once closed
	done chan struct{}
}

func startLegit(t *testing.T, proxyURL, dest string) *legit {
	t.Helper()
	l := &legit{t: t, client: testproc.H2CClient(t, 0), url: proxyURL, dest: dest, quit: make(chan struct{}), done: make(chan struct{})}
	// The first call opens the connection; it must work before the
	// attack starts.
	if err := l.call(t.Context()); err != nil {
		t.Fatalf("the legitimate caller's first call: %v", err)
	}
	// The call in flight when the caller stops runs to its end (or its
	// own timeout): the stop does not cut it and count it as failed.
	ctx := t.Context()
	go func() {
		defer close(l.done)
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-l.quit:
				return
			case <-tick.C:
			}
			start := time.Now()
			err := l.call(ctx)
			l.mu.Lock()
			if err != nil {
				l.failures = append(l.failures, err.Error())
			} else {
				l.latencies = append(l.latencies, time.Since(start))
			}
			l.mu.Unlock()
		}
	}()
	return l
}

// call sends one request and wants the sink's answer.
func (l *legit) call(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, l.url, strings.NewReader(`{"legit":true}`))
	if err != nil {
		return err
	}
	req.Header.Set("Kn-Forward-To", l.dest)
	req.Header.Set("X-Legit", "1")
	resp, err := l.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || string(body) != "ok" {
		return fmt.Errorf("%s: %q", resp.Status, body)
	}
	return nil
}

// answered returns how many calls were answered so far.
func (l *legit) answered() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.latencies)
}

// stop ends the caller, once its call in flight is over, and returns its
// latencies and failures.
func (l *legit) stop() ([]time.Duration, []string) {
	close(l.quit)
	<-l.done
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.latencies), slices.Clone(l.failures)
}

// percentile returns the q-th quantile (0 to 1) of ds, sorted in place.
func percentile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	slices.Sort(ds)
	return ds[min(len(ds)-1, int(q*float64(len(ds))))]
}

// runtimeSample is what the proxy's /metrics says of its Go runtime.
type runtimeSample struct {
	goroutines int
	heap       int64 // bytes in use
}

func sampleRuntime(url string) (runtimeSample, error) {
	fams, err := testproc.Scrape(url)
	if err != nil {
		return runtimeSample{}, err
	}
	return runtimeSample{
		goroutines: int(testproc.Value(fams, "go_goroutines", nil)),
		heap:       int64(testproc.Value(fams, "go_memstats_heap_inuse_bytes", nil)),
	}, nil
}

// sampler polls the proxy's runtime every 25 ms and keeps the peaks.
type sampler struct {
	mu     sync.Mutex
	peak   runtimeSample
	cancel context.CancelFunc
	done   chan struct{}
}

func startSampler(ctx context.Context, url string) *sampler {
	ctx, cancel := context.WithCancel(ctx)
	s := &sampler{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(s.done)
		tick := time.NewTicker(25 * time.Millisecond)
		defer tick.Stop()
		for {
			if r, err := sampleRuntime(url); err == nil {
				s.mu.Lock()
				s.peak.goroutines = max(s.peak.goroutines, r.goroutines)
				s.peak.heap = max(s.peak.heap, r.heap)
				s.mu.Unlock()
			}
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	return s
}

func (s *sampler) stop() runtimeSample {
	s.cancel()
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.peak
}

// arena is what an attack works against: a proxy process and its sink.
type arena struct {
	proc *testproc.Proc
	addr string // the proxy's host:port
	sink sink

	outcome string // what the attacker saw, for the table (saw)
}

// saw sets what the attacker saw, a line of the table.
func (a *arena) saw(format string, args ...any) { a.outcome = fmt.Sprintf(format, args...) }

// attack is one attack class: run makes the attack a bounded number of
// times, each read and dial with a deadline, checks what the proxy does
// to the attacker, says what it saw (arena.saw), and closes the
// attacker's connections before it returns. It must end by itself in
// bounded time against a proxy without the defence too.
type attack struct {
	name string
	env  []string // on top of suiteEnv
	run  func(t testing.TB, a *arena)
}

// figures are what one attack cost, for the log and docs/benchmarks.md.
type figures struct {
	name                 string
	legit, legitFailed   int
	p50, p99             time.Duration
	base, peak           runtimeSample
	attackRequestsAtSink int64
	outcome              string
}

// runAttack starts a proxy, a sink and the legitimate caller, makes the
// attack and holds the proxy to the suite's bounds, filling f. A bound
// the proxy breaks fails the test and f is still filled: the table has
// every attack's row.
func runAttack(t *testing.T, at attack, f *figures) {
	t.Helper()
	f.name = at.name
	f.outcome = "not run: the proxy or the legitimate caller did not start"
	s := newSink(t)
	port := testproc.FreePort(t)
	p := testproc.StartProxy(t, proxyBin, port, testproc.FreePort(t), append(slices.Clone(suiteEnv), at.env...)...)
	a := &arena{proc: p, addr: strings.TrimPrefix(p.URL, "http://"), sink: s}
	l := startLegit(t, p.URL, s.URL+"/legit")
	testproc.Eventually(t, 10*time.Second, "the legitimate caller is answered", func() bool { return l.answered() >= 2 })
	base, err := sampleRuntime(p.MetricsURL)
	if err != nil {
		t.Fatalf("scraping the proxy: %v", err)
	}
	smp := startSampler(t.Context(), p.MetricsURL)

	att := &attackT{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		at.run(att, a)
	}()
	ended := true
	select {
	case <-done:
	case <-time.After(attackWithin):
		t.Errorf("the attack still ran after %s: its connections are closed", attackWithin)
		att.cleanup()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Errorf("the attack still runs 30s after its connections were closed")
			ended = false
		}
	}
	att.cleanup()
	s.Release()
	switch {
	case !ended:
		f.outcome = "the attack did not end"
	case att.fatal != "" && a.outcome != "":
		f.outcome = a.outcome + "; then the attack stopped: " + att.fatal
	case att.fatal != "":
		f.outcome = "the attack stopped: " + att.fatal
	default:
		f.outcome = a.outcome
	}

	var now runtimeSample
	if !testproc.Poll(recoverWithin, func() bool {
		now, err = sampleRuntime(p.MetricsURL)
		return err == nil && now.goroutines <= base.goroutines+goroutineSlack
	}) {
		t.Errorf("timed out after %s waiting until the proxy's goroutines are back within %d of %d (%d now)",
			recoverWithin, goroutineSlack, base.goroutines, now.goroutines)
	}
	// The legitimate caller goes on a moment after the attack.
	after := l.answered()
	if !testproc.Poll(10*time.Second, func() bool { return l.answered() >= after+3 }) {
		t.Errorf("timed out after 10s waiting until the legitimate caller is answered after the attack (%d calls answered after it)",
			l.answered()-after)
	}
	peak := smp.stop()
	lat, failures := l.stop()

	*f = figures{name: at.name, legit: len(lat), legitFailed: len(failures), p50: percentile(lat, 0.5), p99: percentile(lat, 0.99),
		base: base, peak: peak, attackRequestsAtSink: s.attacks(), outcome: f.outcome}
	t.Logf("%s: legitimate caller answered %d times, failed %d times, p50 %s, p99 %s; goroutines %d at rest, %d at the peak, %d after; heap in use %.1f MiB at rest, %.1f MiB at the peak; %d attack requests reached the sink; the attacker saw: %s",
		at.name, f.legit, f.legitFailed, f.p50.Round(10*time.Microsecond), f.p99.Round(10*time.Microsecond), base.goroutines, peak.goroutines, now.goroutines,
		float64(base.heap)/(1<<20), float64(peak.heap)/(1<<20), f.attackRequestsAtSink, f.outcome)
	if len(failures) > 0 {
		t.Errorf("the legitimate caller failed %d times during the attack (answered %d): first %q", len(failures), len(lat), failures[0])
	}
	if peak.heap > base.heap+heapSlack {
		t.Errorf("the heap in use peaked at %.1f MiB, %.1f MiB above its %.1f MiB at rest (bound %d MiB)",
			float64(peak.heap)/(1<<20), float64(peak.heap-base.heap)/(1<<20), float64(base.heap)/(1<<20), heapSlack>>20)
	}
}
