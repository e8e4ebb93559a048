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

// Package load is the scenario bench behind cmd/loadgen: it starts the
// peers under test (the real cmd/proxy binary, a naive
// httputil.ReverseProxy, nginx and HAProxy when installed) and a slow or fast sink as
// processes on loopback, drives them over h2c and HTTP/1.1, and measures
// memory per held call, added latency, CPU per request and the seed
// scenario (an mt-adapter-like sender, direct versus async through the
// proxy). Every loop is bounded in count and in time.
package load

import (
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"knative.dev/event-forwarding-proxy/test/bench/procstat"
	"knative.dev/event-forwarding-proxy/test/bench/result"
	"knative.dev/event-forwarding-proxy/test/bench/sender"
)

// Scenarios.
const (
	ScenarioHeld       = "held"
	ScenarioThroughput = "throughput"
	ScenarioSeed       = "seed"
	ScenarioBurst      = "burst"
)

// Config configures a run. Every zero value means the full bench.
type Config struct {
	// ProxyBin is the cmd/proxy binary under test. Required.
	ProxyBin string
	// Self is the command line prefix that runs this program's helper
	// commands (sink, naive, sender). If nil, this executable.
	Self []string
	// SelfEnv is added to the helpers' environment.
	SelfEnv []string
	// Nginx is nginx's path. If empty, /usr/sbin/nginx when installed;
	// "off" leaves nginx out.
	Nginx string
	// HAProxy is HAProxy's path. If empty, /usr/sbin/haproxy when
	// installed; "off" leaves HAProxy out.
	HAProxy string
	// Peers are the peers compared. If nil, all of them.
	Peers []string
	// Scenarios are the scenarios run. If nil, all of them.
	Scenarios []string
	// HeldH2C are the held-call counts over h2c. If nil, 1k, 10k, 50k and
	// 100k, times Scale.
	HeldH2C []int
	// HeldHTTP1 are the held-call counts over HTTP/1.1, where both sides
	// of a peer need a socket per call. If nil, 1k, 5k and 9k, times Scale.
	HeldHTTP1 []int
	// Scale shrinks counts and durations for a quick run. If zero, 1.
	Scale float64
	// NoPin leaves every process unpinned. If false and the machine has
	// two cores or more, peers run on the last core and the load
	// generator, sinks and sender on the first.
	NoPin bool
	// ProbeEvery is the interval of latency probes. If zero, 5 ms.
	ProbeEvery time.Duration
	// ProbeCount is the probes sent while N calls are held. If zero, 600.
	ProbeCount int
	// RampTimeout bounds getting N calls held, and their release.
	// If zero, 3 minutes.
	RampTimeout time.Duration
	// MaxHold is the longest a sink holds a call unreleased. If zero, 5m.
	MaxHold time.Duration
	// HeaderBytes, if set, adds a header of about that many bytes (name,
	// value and the line's punctuation) to every held call, to measure
	// what large headers cost a held call. Probes never carry it.
	HeaderBytes int
	// Concurrency is the throughput scenario's closed-loop workers.
	// If zero, 64.
	Concurrency int
	// Warmup and Window are the throughput warm-up and measured window.
	// If zero, 1 s and 10 s times Scale (at least 1 s).
	Warmup, Window time.Duration
	// Seed is the seed scenario.
	Seed SeedConfig
	// BurstEvents is the size of each burst of the burst scenario. If
	// zero, 5000 times Scale.
	BurstEvents int
	// ProxyEnv is added to the environment of the proxy (and proxy-pprof)
	// peer, after the bench's own settings: for experiments such as GOGC.
	ProxyEnv []string
	// ProfileDir, if set, gets CPU profiles of every ramp and throughput
	// window and heap profiles of every held state, of the proxy-pprof
	// peer and of the load generator itself.
	ProfileDir string
	// Out, if set, is where results are written after every run.
	Out string
	// Log gets a line per run. If nil, nothing is logged.
	Log io.Writer
}

// SeedConfig scales the seed scenario: "a minute" is Period.
type SeedConfig struct {
	// Sources fire an event each Period. If zero, 5000 times Scale.
	Sources int
	// Period is the time between ticks. If zero, 10 s times Scale.
	Period time.Duration
	// Hold is how long the sinks hold each call. If zero, 60 s times Scale.
	Hold time.Duration
	// Duration is how long the sender runs. If zero, 90 s times Scale.
	Duration time.Duration
}

type orch struct {
	cfg              Config
	res              *result.Results
	peerCPU, loadCPU int
	// taskset is taskset's path, or "" when processes cannot be pinned.
	taskset string
	// control talks to the sinks' and peers' control endpoints.
	control *http.Client
	cleanup []func()
}

func (c *Config) defaults() error {
	if c.ProxyBin == "" {
		return fmt.Errorf("no proxy binary")
	}
	if c.Self == nil {
		exe, err := os.Executable()
		if err != nil {
			return err
		}
		c.Self = []string{exe}
	}
	if c.Scale <= 0 {
		c.Scale = 1
	}
	s := c.Scale
	if c.Peers == nil {
		c.Peers = []string{PeerProxy, PeerHAProxy, PeerNaive, PeerNaiveDefault, PeerNginx}
	}
	if c.Scenarios == nil {
		c.Scenarios = []string{ScenarioHeld, ScenarioThroughput, ScenarioBurst, ScenarioSeed}
	}
	if c.HeldH2C == nil {
		c.HeldH2C = scaled([]int{1000, 10000, 50000, 100000}, s)
	}
	if c.HeldHTTP1 == nil {
		c.HeldHTTP1 = scaled([]int{1000, 5000, 9000}, s)
	}
	c.ProbeEvery = orDur(c.ProbeEvery, 5*time.Millisecond)
	if c.ProbeCount <= 0 {
		c.ProbeCount = 600
	}
	c.RampTimeout = orDur(c.RampTimeout, 3*time.Minute)
	c.MaxHold = orDur(c.MaxHold, 5*time.Minute)
	if c.Concurrency <= 0 {
		c.Concurrency = 64
	}
	c.Warmup = orDur(c.Warmup, scaledDur(time.Second, s, time.Second))
	c.Window = orDur(c.Window, scaledDur(10*time.Second, s, time.Second))
	if c.BurstEvents <= 0 {
		c.BurstEvents = scaled([]int{5000}, s)[0]
	}
	if c.Seed.Sources <= 0 {
		c.Seed.Sources = scaled([]int{5000}, s)[0]
	}
	c.Seed.Period = orDur(c.Seed.Period, scaledDur(10*time.Second, s, 500*time.Millisecond))
	c.Seed.Hold = orDur(c.Seed.Hold, scaledDur(time.Minute, s, 3*time.Second))
	c.Seed.Duration = orDur(c.Seed.Duration, scaledDur(90*time.Second, s, 4*time.Second))
	if c.Log == nil {
		c.Log = io.Discard
	}
	return nil
}

// Run runs the configured scenarios and returns their results.
func Run(ctx context.Context, cfg Config) (*result.Results, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	o := &orch{cfg: cfg, peerCPU: -1, loadCPU: -1,
		control: &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 4}}}
	o.taskset, _ = exec.LookPath("taskset")
	defer o.control.CloseIdleConnections()
	defer func() {
		for _, f := range o.cleanup {
			f()
		}
	}()
	o.res = &result.Results{Started: time.Now().UTC(), Scale: cfg.Scale, Command: strings.Join(os.Args, " ")}
	nofile, err := RaiseNofile()
	if err != nil {
		o.notef("open-file limit: %v", err)
	}
	if !cfg.NoPin && runtime.NumCPU() >= 2 && o.taskset != "" {
		o.peerCPU, o.loadCPU = runtime.NumCPU()-1, 0
		// Every thread of this process, so the load stays off the peers' core.
		if out, err := exec.Command(o.taskset, "-a", "-p", "-c", "0", strconv.Itoa(os.Getpid())).CombinedOutput(); err != nil {
			o.notef("pinning the load generator: %v: %s", err, out)
		}
	}
	o.res.Machine = describeMachine(nofile, o.peerCPU)
	for peer, path := range map[string]string{PeerNginx: nginxPath(cfg.Nginx), PeerHAProxy: haproxyPath(cfg.HAProxy)} {
		if path == "" && slices.Contains(o.cfg.Peers, peer) {
			o.notef("%s is not installed: left out", peer)
			o.cfg.Peers = slices.DeleteFunc(slices.Clone(o.cfg.Peers), func(p string) bool { return p == peer })
		}
	}
	begin := time.Now()
	for _, sc := range o.cfg.Scenarios {
		if ctx.Err() != nil {
			break
		}
		switch sc {
		case ScenarioHeld:
			o.held(ctx)
		case ScenarioThroughput:
			o.throughput(ctx)
		case ScenarioSeed:
			o.seed(ctx)
		case ScenarioBurst:
			o.bursts(ctx)
		default:
			return o.res, fmt.Errorf("unknown scenario %q", sc)
		}
	}
	o.res.WallSeconds = time.Since(begin).Seconds()
	o.res.Machine.LoadAvgEnd = procstat.LoadAvg()
	return o.res, o.save()
}

// nginxMaxHeld is the most held calls nginx gets: one upstream socket
// each, within one worker's open-file limit.
const nginxMaxHeld = 18000

func (o *orch) held(ctx context.Context) {
	for _, proto := range []string{H2C, H2CAsync, HTTP1} {
		ns := o.cfg.HeldH2C
		if proto == HTTP1 {
			ns = o.cfg.HeldHTTP1
		}
		for _, n := range ns {
			for _, peer := range o.cfg.Peers {
				if peer == PeerNaiveDefault || (peer == PeerNginx && n > nginxMaxHeld) || ctx.Err() != nil {
					continue
				}
				if proto == H2CAsync && !holdsAsync(peer) {
					continue
				}
				r := o.runHeld(ctx, peer, proto, n)
				o.res.Held = append(o.res.Held, r)
				o.logf("held %-5s n=%-6d %-13s %6.0f B/call  added p50 %7.2f ms p99 %8.2f ms max %8.2f ms  ramp %5.1fs cpu %5.2fs %s",
					proto, n, peer, r.BytesPerCall, r.Added.P50, r.Added.P99, r.Added.Max, r.RampSeconds, r.CPUSeconds, r.Note)
				_ = o.save()
			}
		}
	}
}

func (o *orch) throughput(ctx context.Context) {
	for _, proto := range []string{HTTP1, H2C} {
		// The same client straight at the sink first: the baseline a
		// peer's request rate is judged against.
		for _, peer := range append([]string{PeerDirect}, o.cfg.Peers...) {
			if (peer == PeerNaiveDefault && proto != HTTP1) || ctx.Err() != nil {
				continue
			}
			r := o.runThroughput(ctx, peer, proto)
			o.res.Throughput = append(o.res.Throughput, r)
			o.logf("throughput %-5s %-13s %8.0f req/s  %6.1f µs CPU/req  (load %.1fs sink %.1fs cpu)  p99 %.2f ms errors %d",
				proto, peer, r.RPS, r.CPUMicrosPerRequest, r.LoadCPUSeconds, r.SinkCPUSeconds, r.Latency.P99, r.Errors)
			_ = o.save()
		}
	}
}

// bursts runs the burst scenario for the peers that take async
// hand-offs, after the same bursts straight at the sink.
func (o *orch) bursts(ctx context.Context) {
	for _, peer := range append([]string{PeerDirect}, o.cfg.Peers...) {
		if ctx.Err() != nil {
			return
		}
		if peer != PeerDirect && !holdsAsync(peer) {
			continue
		}
		r := o.runBurst(ctx, peer)
		o.res.Burst = append(o.res.Burst, r)
		o.logf("burst %-13s %d × %d events on %d connections: answer p50 %.2f ms p99 %.2f ms max %.2f ms, %d errors, cpu %.2fs %s",
			peer, r.Bursts, r.Events, r.Conns, r.HandOff.P50, r.HandOff.P99, r.HandOff.Max, r.Errors, r.CPUSeconds, r.Note)
		_ = o.save()
	}
}

// seedModes are the seed scenario's runs: the sender on its own, handing
// events to the proxy, and waiting for its sinks through HAProxy (which
// holds the upstream calls but cannot answer before the sink).
var seedModes = []seedMode{
	{name: sender.Direct, sender: sender.Direct},
	{name: sender.ProxyAsync, sender: sender.ProxyAsync, peer: PeerProxy},
	{name: "haproxy-sync", sender: sender.ThroughPeer, peer: PeerHAProxy},
}

type seedMode struct {
	name, sender string
	// peer is what the sender sends through; "" for none.
	peer string
}

func (o *orch) seed(ctx context.Context) {
	for _, mode := range seedModes {
		if ctx.Err() != nil {
			return
		}
		if mode.peer != "" && !slices.Contains(o.cfg.Peers, mode.peer) {
			continue
		}
		r := o.runSeed(ctx, mode)
		o.res.Seed = append(o.res.Seed, r)
		o.logf("seed %-12s sent %d errors %d  sender peak %d KB, %d in flight; peer peak %d KB; sinks held %d; hand-off p50 %.2f ms p99 %.2f ms",
			mode.name, r.Sent, r.Errors, r.PeakSenderRSSKB, r.PeakSenderInflight, r.PeakProxyRSSKB, r.PeakSinkHeld, r.HandOff.P50, r.HandOff.P99)
		_ = o.save()
	}
}

func (o *orch) save() error {
	if o.cfg.Out == "" {
		return nil
	}
	return result.Write(o.cfg.Out, o.res)
}

func (o *orch) logf(format string, args ...any) {
	fmt.Fprintf(o.cfg.Log, time.Now().Format("15:04:05 ")+format+"\n", args...)
}

func scaled(ns []int, s float64) []int {
	out := make([]int, len(ns))
	for i, n := range ns {
		out[i] = max(int(math.Round(float64(n)*s)), 10)
	}
	return out
}

func scaledDur(d time.Duration, s float64, floor time.Duration) time.Duration {
	return max(time.Duration(float64(d)*s), floor)
}

func orDur(d, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return d
}
