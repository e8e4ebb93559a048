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
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"knative.dev/event-forwarding-proxy/test/bench/procstat"
	"knative.dev/event-forwarding-proxy/test/bench/result"
	"knative.dev/event-forwarding-proxy/test/bench/sender"
	"knative.dev/event-forwarding-proxy/test/bench/sink"
)

// runSeed runs the mt-adapter-like sender for one mode and samples, every
// second, the sender's memory and in-flight calls, the peer's memory and
// the calls the sinks hold.
func (o *orch) runSeed(ctx context.Context, m seedMode) (r result.SeedRun) {
	s, mode := o.cfg.Seed, m.name
	r = result.SeedRun{
		Mode: mode, Peer: m.peer, Sources: s.Sources, PeriodSeconds: s.Period.Seconds(),
		HoldSeconds: s.Hold.Seconds(), DurationSeconds: s.Duration.Seconds(),
	}
	sk, err := o.startSink(ctx)
	if err != nil {
		o.notef("seed %s: %v", mode, err)
		return r
	}
	defer sk.stop(5 * time.Second)
	var px *child
	if m.peer != "" {
		if px, err = o.startPeer(ctx, m.peer, H2C, sk.Addr); err != nil {
			o.notef("seed %s: %v", mode, err)
			return r
		}
		defer px.stop(10 * time.Second)
	}

	var inflight atomic.Int64
	var mu sync.Mutex
	var sum *sender.Summary
	onLine := func(line string) {
		var fin sender.Summary
		if json.Unmarshal([]byte(line), &fin) != nil {
			return
		}
		if fin.Final {
			mu.Lock()
			sum = &fin
			mu.Unlock()
			return
		}
		var x sender.Sample
		if json.Unmarshal([]byte(line), &x) == nil {
			inflight.Store(x.Inflight)
		}
	}
	argv := append(append([]string{}, o.cfg.Self...), "sender", "-mode", m.sender, "-sink", sk.URL(),
		"-sources", strconv.Itoa(s.Sources), "-period", s.Period.String(), "-hold", s.Hold.String(),
		"-duration", s.Duration.String())
	if px != nil {
		argv = append(argv, "-proxy", px.URL())
	}
	cpu0 := 0.0
	if px != nil {
		cpu0, _ = procstat.CPUSeconds(px.Pid())
	}
	snd, err := o.start(ctx, childSpec{name: "sender", argv: argv, env: o.cfg.SelfEnv, cpu: o.loadCPU, onLine: onLine})
	if err != nil {
		o.notef("seed %s: %v", mode, err)
		return r
	}
	defer snd.stop(5 * time.Second)

	begin := time.Now()
	limit := time.NewTimer(s.Duration + time.Minute)
	defer limit.Stop()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for done := false; !done; {
		select {
		case <-snd.done:
			done = true
		case <-limit.C:
			o.notef("seed %s: the sender did not end within %s", mode, s.Duration+time.Minute)
			done = true
		case <-ctx.Done():
			done = true
		case <-tick.C:
			r.Samples = append(r.Samples, o.sampleSeed(ctx, begin, snd, px, sk, inflight.Load()))
		}
	}
	if px != nil {
		cpu1, _ := procstat.CPUSeconds(px.Pid())
		r.ProxyCPUSeconds = cpu1 - cpu0
		// Let the proxy drain at once: the sink answers what it holds.
		_ = o.sinkPost(ctx, sk, sink.PathRelease)
	}
	mu.Lock()
	defer mu.Unlock()
	if sum == nil {
		o.notef("seed %s: no summary from the sender: %s", mode, snd.logs.String())
		return r
	}
	r.Sent, r.Errors, r.Cut, r.HandOff, r.SenderCPUSeconds = sum.Sent, sum.Errors, sum.Cut, sum.HandOff, sum.CPUSeconds
	for _, x := range r.Samples {
		r.PeakSenderRSSKB = max(r.PeakSenderRSSKB, x.SenderRSSKB)
		r.PeakSenderInflight = max(r.PeakSenderInflight, x.SenderInflight)
		r.PeakProxyRSSKB = max(r.PeakProxyRSSKB, x.ProxyRSSKB)
		r.PeakSinkHeld = max(r.PeakSinkHeld, x.SinkHeld)
	}
	return r
}

func (o *orch) sampleSeed(ctx context.Context, begin time.Time, snd, px, sk *child, inflight int64) result.SeedSample {
	x := result.SeedSample{T: time.Since(begin).Seconds(), SenderInflight: inflight}
	x.SenderRSSKB, _ = procstat.RSSKB(snd.Pid())
	if px != nil {
		x.ProxyRSSKB, _ = procstat.RSSKB(px.Pid())
	}
	if st, err := o.sinkStats(ctx, sk); err == nil {
		x.SinkHeld = st.Held
	}
	return x
}

// notef records a note in the results and logs it.
func (o *orch) notef(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	o.res.Notes = append(o.res.Notes, msg)
	o.logf("note: %s", msg)
}
