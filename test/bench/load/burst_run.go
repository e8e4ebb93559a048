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
	"fmt"
	"net/http"
	"time"

	"knative.dev/event-forwarding-proxy/test/bench/procstat"
	"knative.dev/event-forwarding-proxy/test/bench/result"
	"knative.dev/event-forwarding-proxy/test/bench/sink"
)

// Burst scenario: a warm-up burst, then burstRounds bursts of
// Config.BurstEvents events, the deliveries of each held by the sink while
// the next arrives, as at a multi-tenant adapter's ticks.
const (
	burstRounds  = 3
	burstWarmup  = 500
	burstTimeout = time.Minute
	// burstPause lets the peer finish what the burst before started.
	burstPause = time.Second
)

// runBurst sends the bursts to peer: async hand-offs to the proxy, whose
// deliveries the sink holds, or, with PeerDirect, the same bursts
// straight at the sink's fast path, the sink alone on the peers' core:
// a reference, what a Go HTTP/2 server (golang.org/x/net/http2) that
// answers at once needs for the same bursts.
func (o *orch) runBurst(ctx context.Context, peer string) (r result.BurstRun) {
	n := o.cfg.BurstEvents
	r = result.BurstRun{Peer: peer, Events: n, Conns: burstConns}
	cpu := o.loadCPU
	if peer == PeerDirect {
		cpu = o.peerCPU
	}
	sk, err := o.startSinkOn(ctx, cpu)
	if err != nil {
		r.Note = err.Error()
		return r
	}
	defer sk.stop(5 * time.Second)
	addr, path, dest, want, async := sk.Addr, sink.PathFast, "", http.StatusOK, false
	var g procstat.Group
	var p *child
	if peer != PeerDirect {
		if p, err = o.startPeer(ctx, peer, H2C, sk.Addr); err != nil {
			r.Note = err.Error()
			return r
		}
		defer p.stop(10 * time.Second)
		g = procstat.Group{Pid: p.Pid()}
		addr, path, want, async = p.Addr, sink.PathHold, http.StatusAccepted, true
		dest = sk.URL() + sink.PathHold + "?d=" + o.cfg.MaxHold.String()
	}
	if _, bad, err := burst(ctx, addr, path, dest, burstWarmup, async, want, burstTimeout); err != nil || bad > 0 {
		r.Note = fmt.Sprintf("warm-up: %d not answered %d: %v", bad, want, err)
		return r
	}
	var all []time.Duration
	cpu0, _ := peerCPU(p, g)
	prof := o.profiler(peer, p, "burst")
	prof.startCPU(ctx, "burst")
	for range burstRounds {
		time.Sleep(burstPause)
		lat, bad, err := burst(ctx, addr, path, dest, n, async, want, burstTimeout)
		all = append(all, lat...)
		r.Errors += bad
		r.Bursts++
		if err != nil {
			r.Note = err.Error()
			break
		}
	}
	prof.stopCPU(ctx)
	cpu1, _ := peerCPU(p, g)
	r.CPUSeconds = cpu1 - cpu0
	r.HandOff = result.Summarize(all, r.Errors)
	if err := o.sinkPost(ctx, sk, sink.PathRelease); err != nil && r.Note == "" {
		r.Note = err.Error()
	}
	return r
}
