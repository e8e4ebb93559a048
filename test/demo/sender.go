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
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"

	"knative.dev/event-forwarding-proxy/adapter"
	"knative.dev/event-forwarding-proxy/config"
	"knative.dev/event-forwarding-proxy/test/bench/result"
	"knative.dev/event-forwarding-proxy/test/bench/sink"
)

// SenderParams configure the sender helper: a multi-tenant adapter in
// small, firing one PingSource event per source at every tick through
// adapter.Sender, the library mt-ping uses.
type SenderParams struct {
	// Sink is the sink's base URL. Required.
	Sink string
	// Proxy is the proxy's base URL: when set, every event goes through it
	// with an asynchronous hand-off (threshold 0); when empty, direct.
	Proxy string
	// Sources is the number of events fired at every tick. If zero, 2000.
	Sources int
	// Period is the time between ticks. If zero, 5 s.
	Period time.Duration
	// Duration bounds the run: ticks fire at 0, Period, 2 Period... while
	// it lasts, and sends still under way at its end are cancelled.
	// If zero, 25 s.
	Duration time.Duration
	// Every is the reporting interval. If zero, 200 ms.
	Every time.Duration
	// Window is how far back the hand-off percentiles of a report look.
	// If zero, 1 s.
	Window time.Duration
}

// SenderReport is one JSON line of the sender helper's output; the last
// one has Final set.
type SenderReport struct {
	// Ended is set on the report made when the run's time is up, just
	// before the sends still under way are cancelled; Final on the last.
	Ended bool    `json:"ended,omitempty"`
	Final bool    `json:"final,omitempty"`
	T     float64 `json:"t"`
	// Inflight counts sends under way now; Peak the most at any moment;
	// Mean the average over the time elapsed of the sends that have ended
	// (in the Final report, of every send).
	Inflight   int64   `json:"inflight"`
	Peak       int64   `json:"peak"`
	Mean       float64 `json:"mean"`
	Goroutines int64   `json:"goroutines"`
	// Sent counts sends begun; Delivered those the sink (direct) or the
	// proxy (202) accepted; Failed the others, except Cut, cancelled at
	// the end of the run. Fallbacks counts events meant for the proxy that
	// went direct.
	Sent      int64 `json:"sent"`
	Delivered int64 `json:"delivered"`
	Failed    int64 `json:"failed"`
	Cut       int64 `json:"cut"`
	Fallbacks int64 `json:"fallbacks"`
	// N, P50 and P99 are the count and percentiles of how long a send kept
	// the sender busy (the hand-off), for the sends that ended within the
	// last Window; in the Final report, for the whole run.
	N   int           `json:"n"`
	P50 time.Duration `json:"p50"`
	P99 time.Duration `json:"p99"`
}

func (p *SenderParams) defaults() {
	if p.Sources <= 0 {
		p.Sources = 2000
	}
	if p.Period <= 0 {
		p.Period = 5 * time.Second
	}
	if p.Duration <= 0 {
		p.Duration = 25 * time.Second
	}
	if p.Every <= 0 {
		p.Every = 200 * time.Millisecond
	}
	if p.Window <= 0 {
		p.Window = time.Second
	}
}

type senderRun struct {
	s      *adapter.Sender
	target *url.URL
	start  time.Time
	window time.Duration

	inflight, peak, sent, delivered, failed, cut, fallbacks atomic.Int64
	busy                                                    atomic.Int64 // nanoseconds spent in ended sends

	mu     sync.Mutex
	recent []ended // within the window, oldest first
	all    []time.Duration
}

// ended is a send that ended at at after taking took.
type ended struct {
	at   time.Time
	took time.Duration
}

// RunSender fires events as p says and writes one SenderReport per
// interval to out, then the final one. It returns once every send has
// ended, or 10 s after the run when some have not.
func RunSender(ctx context.Context, p SenderParams, out io.Writer) error {
	p.defaults()
	target, err := url.Parse(p.Sink + sink.PathHold)
	if err != nil || p.Sink == "" {
		return fmt.Errorf("bad sink URL %q", p.Sink)
	}
	s := adapter.NewSender(adapter.SenderParams{})
	defer s.CloseIdleConnections()
	if p.Proxy != "" {
		pu, err := url.Parse(p.Proxy)
		if err != nil {
			return fmt.Errorf("bad proxy URL %q: %w", p.Proxy, err)
		}
		s.SetForwarding(config.Forwarding{ProxyURL: pu, Threshold: 0})
	}
	s.SetDirectSources(p.Sources)
	r := &senderRun{s: s, target: target, start: time.Now(), window: p.Window}

	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	end := time.NewTimer(p.Duration)
	defer end.Stop()
	var wg sync.WaitGroup
	enc := json.NewEncoder(out)
	tick := time.NewTicker(p.Period)
	defer tick.Stop()
	report := time.NewTicker(p.Every)
	defer report.Stop()
	ticks := int((p.Duration-1)/p.Period) + 1
	r.fire(runCtx, &wg, 0, p.Sources)
	for n := 1; runCtx.Err() == nil; {
		select {
		case <-tick.C:
			if n < ticks {
				r.fire(runCtx, &wg, n, p.Sources)
				n++
			}
		case <-report.C:
			_ = enc.Encode(r.report(false))
		case <-end.C:
			x := r.report(false)
			x.Ended = true
			_ = enc.Encode(x)
			cancel()
		case <-runCtx.Done():
		}
	}
	all := make(chan struct{})
	go func() { wg.Wait(); close(all) }()
	wait := time.NewTimer(10 * time.Second)
	defer wait.Stop()
	select {
	case <-all:
	case <-wait.C:
	}
	return enc.Encode(r.report(true))
}

// fire sends one event per source, each from its own goroutine, as a
// multi-tenant adapter does when the minute strikes.
func (r *senderRun) fire(ctx context.Context, wg *sync.WaitGroup, tick, sources int) {
	for i := range sources {
		wg.Go(func() { r.send(ctx, tick, i) })
	}
}

var payload = []byte(`{"message":"Hello world!"}`)

func (r *senderRun) send(ctx context.Context, tick, src int) {
	ns := "tenant-" + strconv.Itoa(src%50)
	e := event.New()
	e.SetID(strconv.Itoa(tick) + "-" + strconv.Itoa(src))
	e.SetSource("/apis/v1/namespaces/" + ns + "/pingsources/p" + strconv.Itoa(src))
	e.SetType("dev.knative.sources.ping")
	_ = e.SetData(event.ApplicationJSON, payload)

	n := r.inflight.Add(1)
	for p := r.peak.Load(); n > p && !r.peak.CompareAndSwap(p, n); p = r.peak.Load() {
	}
	r.sent.Add(1)
	start := time.Now()
	res, err := r.s.Send(ctx, adapter.Target{URL: r.target, Namespace: ns}, e)
	now := time.Now()
	r.inflight.Add(-1)
	r.busy.Add(int64(now.Sub(start)))
	if res != nil && res.Fallback {
		r.fallbacks.Add(1)
	}
	switch {
	case err != nil && ctx.Err() != nil:
		r.cut.Add(1)
		return
	case err != nil:
		r.failed.Add(1)
	default:
		r.delivered.Add(1)
	}
	r.mu.Lock()
	r.recent = append(r.recent, ended{at: now, took: now.Sub(start)})
	r.all = append(r.all, now.Sub(start))
	r.mu.Unlock()
}

func (r *senderRun) report(final bool) SenderReport {
	elapsed := time.Since(r.start)
	x := SenderReport{
		Final: final, T: elapsed.Seconds(), Mean: float64(r.busy.Load()) / float64(max(elapsed, 1)),
		Inflight: r.inflight.Load(), Peak: r.peak.Load(), Goroutines: int64(runtime.NumGoroutine()),
		Sent: r.sent.Load(), Delivered: r.delivered.Load(), Failed: r.failed.Load(),
		Cut: r.cut.Load(), Fallbacks: r.fallbacks.Load(),
	}
	var ds []time.Duration
	r.mu.Lock()
	since := time.Now().Add(-r.window)
	i := 0
	for i < len(r.recent) && r.recent[i].at.Before(since) {
		i++
	}
	r.recent = append(r.recent[:0], r.recent[i:]...)
	if final {
		ds = slices.Clone(r.all)
	} else {
		for _, e := range r.recent {
			ds = append(ds, e.took)
		}
	}
	r.mu.Unlock()
	slices.Sort(ds)
	x.N, x.P50, x.P99 = len(ds), result.Percentile(ds, 50), result.Percentile(ds, 99)
	return x
}
