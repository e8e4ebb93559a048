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
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptrace"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"knative.dev/event-forwarding-proxy/test/bench/procstat"
	"knative.dev/event-forwarding-proxy/test/bench/result"
	"knative.dev/event-forwarding-proxy/test/bench/sink"
)

// openingLimit bounds the calls being sent at once during a ramp (until
// their request is written), so that dials and streams do not pile up
// faster than a listen backlog takes them.
const openingLimit = 512

// heldCalls are the N calls of one held run.
type heldCalls struct {
	wg     sync.WaitGroup
	failed atomic.Int64
	done   atomic.Int64
	// firstErr is why the first failed call failed.
	firstErr atomic.Pointer[string]
}

func (hc *heldCalls) fail(err error) {
	hc.failed.Add(1)
	msg := err.Error()
	hc.firstErr.CompareAndSwap(nil, &msg)
}

// runHeld makes peer hold n calls to the slow sink over protocol and
// measures its memory, CPU and the latency it adds while it holds them.
func (o *orch) runHeld(ctx context.Context, peer, protocol string, n int) (r result.HeldRun) {
	r = result.HeldRun{Peer: peer, Protocol: protocol, N: n, HeaderBytes: o.cfg.HeaderBytes}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	sk, err := o.startSink(ctx)
	if err != nil {
		r.Note = err.Error()
		return r
	}
	defer sk.stop(5 * time.Second)
	p, err := o.startPeer(ctx, peer, protocol, sk.Addr)
	if err != nil {
		r.Note = err.Error()
		return r
	}
	defer p.stop(5 * time.Second)
	g := procstat.Group{Pid: p.Pid(), WithChildren: peer == PeerNginx}

	// Held calls over a few connections; probes each on their own pool.
	conns := 4
	if protocol == HTTP1 {
		conns = 1
	}
	async := protocol == H2CAsync
	calls := newPool(wire(protocol), conns, n)
	defer calls.close()
	through := probeTarget{rt: newTransport(wire(protocol), 64), base: p.URL(), dest: sk.URL() + sink.PathFast}
	direct := probeTarget{rt: newTransport(wire(protocol), 64), base: sk.URL()}
	defer through.rt.(*http.Transport).CloseIdleConnections()
	defer direct.rt.(*http.Transport).CloseIdleConnections()

	// Warm up: connections open, pools filled, before idle memory is read.
	probe(ctx, time.Millisecond, 50, nil, through, direct)
	r.IdleRSSKB, _ = g.RSSKB()
	cpu0, _ := g.CPUSeconds()
	self0, _ := procstat.CPUSeconds(os.Getpid())
	sink0, _ := procstat.CPUSeconds(sk.Pid())

	prof := o.profiler(peer, p, fmt.Sprintf("%s-%d", protocol, n))
	prof.startCPU(ctx, "ramp")
	start := time.Now()
	stopRamp := make(chan struct{})
	rampProbes := make(chan []probeSet, 1)
	go func() { rampProbes <- probe(ctx, o.cfg.ProbeEvery, 1<<20, stopRamp, through, direct) }()
	hc := o.openHeld(ctx, calls, p.URL(), sk.URL()+sink.PathHold+"?d="+o.cfg.MaxHold.String(), n, async)
	r.Reached = o.waitHeld(ctx, sk, hc, n, o.cfg.RampTimeout)
	r.RampSeconds = time.Since(start).Seconds()
	close(stopRamp)
	rp := <-rampProbes
	cpu1, _ := g.CPUSeconds()
	prof.stopCPU(ctx)
	r.SettleSeconds = settle(ctx, g, o.cfg.RampTimeout)
	r.HeldRSSKB, _ = g.RSSKB()
	self1, _ := procstat.CPUSeconds(os.Getpid())
	sink1, _ := procstat.CPUSeconds(sk.Pid())
	r.RampCPUSeconds = cpu1 - cpu0
	r.RampLoadCPUSeconds, r.RampSinkCPUSeconds = self1-self0, sink1-sink0
	if r.Reached < n {
		r.Note = fmt.Sprintf("only %d of %d calls held after %.0fs (%d failed)", r.Reached, n, r.RampSeconds, hc.failed.Load())
		if e := hc.firstErr.Load(); e != nil {
			r.Note += "; first failure: " + *e
		}
	}
	if r.Reached > 0 {
		r.BytesPerCall = float64(r.HeldRSSKB-r.IdleRSSKB) * 1024 / float64(r.Reached)
	}
	if async {
		r.BodyBytes = len(event)
	}

	hp := probe(ctx, o.cfg.ProbeEvery, o.cfg.ProbeCount, nil, through, direct)
	r.Through = result.Summarize(hp[0].ok, hp[0].errors)
	r.Direct = result.Summarize(hp[1].ok, hp[1].errors)
	base := time.Duration(r.Direct.P50 * float64(time.Millisecond))
	r.Added = result.Summarize(result.Minus(hp[0].ok, base), hp[0].errors)
	rbase := median(rp[1].ok)
	r.RampAdded = result.Summarize(result.Minus(rp[0].ok, rbase), rp[0].errors)

	prof.heap(ctx)
	if err := o.release(ctx, sk, hc, n, async, o.cfg.RampTimeout); err != nil && r.Note == "" {
		r.Note = err.Error()
	}
	cpu2, _ := g.CPUSeconds()
	r.CPUSeconds = cpu2 - cpu0
	r.Failed = int(hc.failed.Load())
	cancel()
	hc.wg.Wait()
	return r
}

// openHeld sends n calls through the peer at base to dest, at most
// openingLimit being sent at a time, and returns at once; each call ends
// when the sink answers or ctx ends, or, async, at the peer's 202.
func (o *orch) openHeld(ctx context.Context, rt http.RoundTripper, base, dest string, n int, async bool) *heldCalls {
	hc := &heldCalls{}
	sem := make(chan struct{}, openingLimit)
	padding := paddingValue(o.cfg.HeaderBytes)
	hc.wg.Go(func() {
		for i := range n {
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				hc.failed.Add(int64(n - i))
				return
			}
			hc.wg.Go(func() {
				var once sync.Once
				sent := func() { once.Do(func() { <-sem }) }
				defer sent()
				tctx := httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{WroteRequest: func(httptrace.WroteRequestInfo) { sent() }})
				req, err := newCall(tctx, base, sink.PathHold, dest, uint64(i))
				if err == nil && padding != "" {
					req.Header[paddingHeader] = []string{padding}
				}
				want := http.StatusOK
				if err == nil && async {
					req.Header["Prefer"] = []string{"respond-async"}
					want = http.StatusAccepted
				}
				if err == nil {
					_, err = roundTripStatus(rt, req, want)
				}
				if err != nil {
					hc.fail(err)
				}
				hc.done.Add(1)
			})
		}
	})
	return hc
}

// paddingHeader is the extra header of held calls (Config.HeaderBytes).
const paddingHeader = "X-Bench-Padding"

// paddingValue is a value that makes paddingHeader's line ("name: value"
// and CRLF) n bytes long, or "" when n leaves no room for one.
func paddingValue(n int) string {
	m := n - len(paddingHeader) - len(": \r\n")
	if m <= 0 {
		return ""
	}
	return strings.Repeat("p", m)
}

// settle waits until the peer has been nearly idle (under 5 % of a core)
// for 250 ms, so that held-state figures are not those of the ramp's
// last garbage collection; it gives up after timeout and returns the
// seconds it waited.
func settle(ctx context.Context, g procstat.Group, timeout time.Duration) float64 {
	const window = 250 * time.Millisecond
	start := time.Now()
	tick := time.NewTicker(window)
	defer tick.Stop()
	last, _ := g.CPUSeconds()
	for time.Since(start) < timeout {
		select {
		case <-ctx.Done():
			return time.Since(start).Seconds()
		case <-tick.C:
		}
		now, err := g.CPUSeconds()
		if err != nil || now-last < 0.05*window.Seconds() {
			return time.Since(start).Seconds()
		}
		last = now
	}
	return time.Since(start).Seconds()
}

// waitHeld polls the sink until it holds n calls, every call that is not
// held has failed, or timeout passes; it returns the most calls seen held
// and logs progress every 10 s of a long ramp.
func (o *orch) waitHeld(ctx context.Context, sk *child, hc *heldCalls, n int, timeout time.Duration) int {
	start := time.Now()
	deadline := start.Add(timeout)
	nextLog := start.Add(10 * time.Second)
	tick := time.NewTicker(25 * time.Millisecond)
	defer tick.Stop()
	best := 0
	for time.Now().Before(deadline) {
		if st, err := o.sinkStats(ctx, sk); err == nil {
			best = max(best, int(st.Held))
			if best >= n || int64(best)+hc.failed.Load() >= int64(n) {
				return best
			}
		}
		if time.Now().After(nextLog) {
			o.logf("  ramp: %d of %d held after %.0fs (%d failed)", best, n, time.Since(start).Seconds(), hc.failed.Load())
			nextLog = nextLog.Add(10 * time.Second)
		}
		select {
		case <-ctx.Done():
			return best
		case <-tick.C:
		}
	}
	return best
}

// release ends the held calls at the sink and waits until every call has
// come back to the load generator (async, until the sink holds none of
// the peer's deliveries), releasing again for calls that reached the sink late;
// it gives up after timeout.
func (o *orch) release(ctx context.Context, sk *child, hc *heldCalls, n int, async bool, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	last := time.Time{}
	open := func() int64 {
		if !async {
			return int64(n) - hc.done.Load()
		}
		st, err := o.sinkStats(ctx, sk)
		if err != nil {
			return int64(n)
		}
		return st.Held
	}
	for left := open(); left > 0; left = open() {
		if time.Now().After(deadline) {
			return fmt.Errorf("%d of %d calls still open %s after release", left, n, timeout)
		}
		if time.Since(last) > time.Second {
			// A sink answering 100,000 calls at once may be slow to take
			// the next release: the deadline bounds the retries.
			if err := o.sinkPost(ctx, sk, sink.PathRelease); err != nil && ctx.Err() != nil {
				return err
			}
			last = time.Now()
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
	return nil
}

// sinkStats asks a sink for its counters.
func (o *orch) sinkStats(ctx context.Context, sk *child) (sink.Stats, error) {
	var st sink.Stats
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, sk.URL()+sink.PathStats, nil)
	if err != nil {
		return st, err
	}
	resp, err := o.control.Do(req)
	if err != nil {
		return st, err
	}
	defer resp.Body.Close()
	return st, json.NewDecoder(resp.Body).Decode(&st)
}

func (o *orch) sinkPost(ctx context.Context, sk *child, path string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, sk.URL()+path, nil)
	if err != nil {
		return err
	}
	resp, err := o.control.Do(req)
	if err != nil {
		return err
	}
	return resp.Body.Close()
}

// median is the 50th percentile of ds (sorted in place).
func median(ds []time.Duration) time.Duration {
	return time.Duration(result.Summarize(ds, 0).P50 * float64(time.Millisecond))
}
