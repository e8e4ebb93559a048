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
	"os"
	"sync"
	"sync/atomic"
	"time"

	"knative.dev/event-forwarding-proxy/test/bench/procstat"
	"knative.dev/event-forwarding-proxy/test/bench/result"
	"knative.dev/event-forwarding-proxy/test/bench/sink"
)

// maxSamplesPerWorker bounds the latency samples one worker keeps.
const maxSamplesPerWorker = 1 << 16

// runThroughput drives peer with o.cfg.Concurrency closed-loop workers
// calling the fast sink over protocol, first to warm up, then for the
// measured window, and reports requests/s and the peer's CPU per request.
func (o *orch) runThroughput(ctx context.Context, peer, protocol string) (r result.ThroughputRun) {
	r = result.ThroughputRun{Peer: peer, Protocol: protocol, Concurrency: o.cfg.Concurrency}
	sk, err := o.startSink(ctx)
	if err != nil {
		o.notef("throughput %s %s: %v", peer, protocol, err)
		return r
	}
	defer sk.stop(5 * time.Second)
	t := newTransport(protocol, o.cfg.Concurrency)
	defer t.CloseIdleConnections()
	// Direct, the client calls the sink itself and no peer's CPU counts.
	target := probeTarget{rt: t, base: sk.URL()}
	var p *child
	var g procstat.Group
	if peer != PeerDirect {
		p, err = o.startPeer(ctx, peer, protocol, sk.Addr)
		if err != nil {
			o.notef("throughput %s %s: %v", peer, protocol, err)
			return r
		}
		defer p.stop(5 * time.Second)
		g = procstat.Group{Pid: p.Pid(), WithChildren: peer == PeerNginx}
		target = probeTarget{rt: t, base: p.URL(), dest: sk.URL() + sink.PathFast}
	}

	drive(ctx, target, o.cfg.Concurrency, o.cfg.Warmup)
	cpu0, _ := peerCPU(p, g)
	self0, _ := procstat.CPUSeconds(os.Getpid())
	sink0, _ := procstat.CPUSeconds(sk.Pid())
	prof := o.profiler(peer, p, protocol)
	prof.startCPU(ctx, "throughput")
	start := time.Now()
	ok, errs, lat := drive(ctx, target, o.cfg.Concurrency, o.cfg.Window)
	prof.stopCPU(ctx)
	r.Seconds = time.Since(start).Seconds()
	cpu1, _ := peerCPU(p, g)
	self1, _ := procstat.CPUSeconds(os.Getpid())
	sink1, _ := procstat.CPUSeconds(sk.Pid())
	r.Requests, r.Errors = ok, errs
	r.RPS = float64(ok) / r.Seconds
	r.CPUSeconds = cpu1 - cpu0
	r.LoadCPUSeconds = self1 - self0
	r.SinkCPUSeconds = sink1 - sink0
	if ok > 0 {
		r.CPUMicrosPerRequest = r.CPUSeconds * 1e6 / float64(ok)
	}
	r.Latency = result.Summarize(lat, int(errs))
	return r
}

// peerCPU is the CPU time of g, the processes of peer p; 0 with no peer.
func peerCPU(p *child, g procstat.Group) (float64, error) {
	if p == nil {
		return 0, nil
	}
	return g.CPUSeconds()
}

// drive runs workers closed-loop calls at target for d and returns the
// calls answered 200, the others, and their latencies (a bounded sample).
func drive(ctx context.Context, target probeTarget, workers int, d time.Duration) (ok, errs int64, lat []time.Duration) {
	ctx, cancel := context.WithTimeout(ctx, d+30*time.Second)
	defer cancel()
	deadline := time.Now().Add(d)
	var nok, nerr atomic.Int64
	var mu sync.Mutex
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			var mine []time.Duration
			for seq := uint64(w) << 40; time.Now().Before(deadline) && ctx.Err() == nil; seq++ {
				req, err := newCall(ctx, target.base, sink.PathFast, target.dest, seq)
				if err != nil {
					nerr.Add(1)
					continue
				}
				d, good := roundTrip(target.rt, req)
				if !good {
					nerr.Add(1)
					continue
				}
				nok.Add(1)
				if len(mine) < maxSamplesPerWorker {
					mine = append(mine, d)
				}
			}
			mu.Lock()
			lat = append(lat, mine...)
			mu.Unlock()
		})
	}
	wg.Wait()
	return nok.Load(), nerr.Load(), lat
}
