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

// Package demo is `make demo`: the seed scenario in small on one machine.
// A multi-tenant adapter (adapter.Sender, as mt-ping uses it) fires
// thousands of PingSource events every few seconds at a sink that holds
// each call; first straight at the sink, then through the proxy with an
// asynchronous hand-off. A live table shows, every second, the calls the
// sender holds, its memory and goroutines, how long a send keeps it busy,
// and the calls the proxy and the sink hold; a two-line summary compares
// the two phases at the end.
//
// Everything runs on loopback as child processes: the sink and the sender
// are this package's helpers, run from the demo binary itself (Main's
// "sink" and "sender" commands), and the proxy is the cmd/proxy binary.
// The sender runs in a fresh process per phase, so that each phase's
// memory is its own.
package demo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"time"

	"knative.dev/event-forwarding-proxy/config"
)

// Phase names, in the order they run.
const (
	PhaseDirect   = "direct"
	PhaseViaProxy = "via proxy"
)

// Params configure a demo run.
type Params struct {
	// ProxyBin is the cmd/proxy binary. Required.
	ProxyBin string
	// Self runs this package's helpers: argv[0] is the demo binary (Main's
	// "sink" and "sender" commands follow it). Required.
	Self []string
	// Sources is the number of events fired at every tick. If zero, 2000.
	Sources int
	// Period is the time between ticks. If zero, 5 s.
	Period time.Duration
	// Hold is how long the sink holds each call. If zero, 20 s.
	Hold time.Duration
	// Phase is how long each of the two phases fires events. If zero, 25 s.
	Phase time.Duration
	// Every is the refresh interval of the view. If zero, 1 s.
	Every time.Duration
	// Live redraws the table in place (for a terminal); if false, one line
	// per refresh.
	Live bool
	// Out receives the view and the summary. If nil, nothing is shown.
	Out io.Writer
}

func (p *Params) defaults() {
	if p.Sources <= 0 {
		p.Sources = 2000
	}
	if p.Period <= 0 {
		p.Period = 5 * time.Second
	}
	if p.Hold <= 0 {
		p.Hold = 20 * time.Second
	}
	if p.Phase <= 0 {
		p.Phase = 25 * time.Second
	}
	if p.Every <= 0 {
		p.Every = time.Second
	}
	if p.Out == nil {
		p.Out = io.Discard
	}
}

// PhaseResult is what one phase showed: the sender's final counts, the
// peaks seen over the phase, and the whole run's hand-off percentiles.
type PhaseResult struct {
	Name   string       `json:"name"`
	Sender SenderReport `json:"sender"`
	// PeakSenderInflight is the most sends under way at any moment.
	PeakSenderInflight   int64 `json:"peakSenderInflight"`
	PeakSenderRSSKB      int64 `json:"peakSenderRSSKB"`
	PeakSenderGoroutines int64 `json:"peakSenderGoroutines"`
	PeakProxyHeld        int64 `json:"peakProxyHeld"`
	PeakProxyRSSKB       int64 `json:"peakProxyRSSKB"`
	PeakSinkHeld         int64 `json:"peakSinkHeld"`
}

// Summary is the outcome of a run.
type Summary struct {
	Phases []PhaseResult `json:"phases"`
	// SinkServed counts the calls the sink answered over the whole run.
	SinkServed int64 `json:"sinkServed"`
	// Children are the processes the run started, as they ended.
	Children []Exit `json:"children"`
}

// Run starts the sink and the proxy, runs the two phases with the live
// view, prints the summary and stops every child. It always returns the
// summary of what it saw, with an error when a step failed.
func Run(ctx context.Context, p Params) (*Summary, error) {
	p.defaults()
	if p.ProxyBin == "" || len(p.Self) == 0 {
		return nil, errors.New("demo: the proxy binary and the demo binary are required")
	}
	d := &run{p: p, probe: newProber(), sum: &Summary{}}
	defer d.probe.close()
	err := d.run(ctx)
	if d.sinkURL != "" {
		// Whatever happened, the sink lets go of its calls so that the
		// proxy drains at once (best effort, ctx may be over).
		rctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_ = d.probe.release(rctx, d.sinkURL)
		cancel()
	}
	d.stopAll()
	for _, c := range d.children {
		d.sum.Children = append(d.sum.Children, c.exit())
	}
	if err == nil {
		d.printSummary()
	}
	return d.sum, err
}

// run is one demo run.
type run struct {
	p        Params
	probe    *prober
	sum      *Summary
	view     *view
	children []*child

	sink, proxy                *child
	sinkURL, proxyURL, metrics string
}

func (d *run) run(ctx context.Context) error {
	p := d.p
	if err := d.startSink(ctx); err != nil {
		return err
	}
	if err := d.startProxy(ctx); err != nil {
		return err
	}
	fmt.Fprintf(p.Out, "Seed scenario in small: %d sources fire every %s at a sink that holds each call %s; %s per phase.\n",
		p.Sources, p.Period, p.Hold, p.Phase)
	fmt.Fprintf(p.Out, "Hand-off: how long a send keeps the sender busy (direct: until the sink answers; via proxy: until its 202).\n\n")
	d.view = newView(p.Out, p.Live, p.Phase, []string{PhaseDirect, PhaseViaProxy})
	if p.Live {
		d.view.draw()
	}
	for i, name := range []string{PhaseDirect, PhaseViaProxy} {
		res, err := d.runPhase(ctx, i, name)
		d.sum.Phases = append(d.sum.Phases, res)
		if err != nil {
			return fmt.Errorf("phase %s: %w", name, err)
		}
		// Let the sink and the proxy let go of the phase's calls, so the
		// next phase starts from quiet (bounded; not an error if not).
		_ = d.probe.release(ctx, d.sinkURL)
		d.settle(ctx, 5*time.Second)
	}
	if st, err := d.probe.sinkStats(ctx, d.sinkURL); err == nil {
		d.sum.SinkServed = st.Served
	}
	return nil
}

// startSink runs the sink helper and waits for its address.
func (d *run) startSink(ctx context.Context) error {
	lines := make(chan string, 1)
	argv := append(append([]string{}, d.p.Self...), "sink", "-addr", "127.0.0.1:0", "-hold", d.p.Hold.String())
	c, err := startChild("sink", argv, nil, func(l string) {
		select {
		case lines <- l:
		default:
		}
	})
	if err != nil {
		return err
	}
	d.children, d.sink = append(d.children, c), c
	addr, err := c.waitLine(ctx, lines, listenPrefix, 30*time.Second)
	if err != nil {
		return err
	}
	d.sinkURL = "http://" + addr
	return nil
}

// startProxy runs the proxy binary with loopback destinations allowed,
// limits above what the demo sends, h2c to the sink and a short drain.
func (d *run) startProxy(ctx context.Context) error {
	port, err := freePort()
	if err != nil {
		return err
	}
	mport, err := freePort()
	if err != nil {
		return err
	}
	limit := strconv.Itoa(max(100000, 2*d.p.Sources*(int(d.p.Hold/d.p.Period)+2)))
	env := []string{
		"PORT=" + strconv.Itoa(port),
		"METRICS_PORT=" + strconv.Itoa(mport),
		"FORWARD_ALLOWED_CIDRS=127.0.0.0/8",
		"FORWARD_MAX_INFLIGHT=" + limit,
		"FORWARD_MAX_INFLIGHT_PER_DESTINATION=" + limit,
		"FORWARD_MAX_INFLIGHT_PER_TENANT=" + limit,
		"FORWARD_TENANT_RESERVE=0",
		"FORWARD_H2_MAX_CONCURRENT_STREAMS=100000",
		"FORWARD_DESTINATION_PROTOCOL=h2c",
		"FORWARD_DRAIN_TIMEOUT=5s",
		"FORWARD_LOG_LEVEL=warn",
		"GODEBUG=" + config.ProxyGODEBUG, // as the manifests run it
	}
	c, err := startChild("proxy", []string{d.p.ProxyBin}, env, nil)
	if err != nil {
		return err
	}
	d.children, d.proxy = append(d.children, c), c
	d.proxyURL = "http://127.0.0.1:" + strconv.Itoa(port)
	d.metrics = "http://127.0.0.1:" + strconv.Itoa(mport) + "/metrics"
	return c.waitReady(ctx, 30*time.Second, d.probe.ok(d.proxyURL+"/healthz"))
}

// settle waits, at most d, until neither the sink nor the proxy holds a
// call.
func (d *run) settle(ctx context.Context, limit time.Duration) {
	deadline := time.NewTimer(limit)
	defer deadline.Stop()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		st, err1 := d.probe.sinkStats(ctx, d.sinkURL)
		held, err2 := d.probe.proxyHeld(ctx, d.metrics)
		if err1 == nil && err2 == nil && st.Held == 0 && held == 0 {
			return
		}
		select {
		case <-deadline.C:
			return
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// stopAll stops the children in order: senders, then the proxy (which
// drains what it still holds), then the sink.
func (d *run) stopAll() {
	for i := len(d.children) - 1; i >= 0; i-- {
		grace := 5 * time.Second
		if d.children[i] == d.proxy {
			grace = 10 * time.Second
		}
		d.children[i].stop(grace)
	}
}

func (d *run) printSummary() {
	if len(d.sum.Phases) != 2 {
		return
	}
	dir, via := d.sum.Phases[0], d.sum.Phases[1]
	fmt.Fprintln(d.p.Out)
	fmt.Fprintf(d.p.Out, "direct:    the sender held %6d calls at peak, %7.1f on average, in %6s MB at peak; a send kept it busy %s\n",
		dir.PeakSenderInflight, dir.Sender.Mean, mb(dir.PeakSenderRSSKB), busy(dir.Sender))
	fmt.Fprintf(d.p.Out, "via proxy: the sender held %6d calls at peak, %7.1f on average, in %6s MB at peak; a send kept it busy %s; the proxy held %d calls in %s MB\n",
		via.PeakSenderInflight, via.Sender.Mean, mb(via.PeakSenderRSSKB), busy(via.Sender),
		via.PeakProxyHeld, mb(via.PeakProxyRSSKB))
}

// busy tells how long the sends of a phase kept the sender busy.
func busy(r SenderReport) string {
	if r.N == 0 {
		return "until cancelled"
	}
	return duration(r.P50) + " (p50)"
}
