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
	"net"
	"sync"
	"time"

	"knative.dev/event-forwarding-proxy/test/bench/procstat"
)

// runPhase runs the sender helper for phase i (direct or via the proxy)
// and refreshes the view every interval until it has ended, at most the
// phase plus 30 s.
func (d *run) runPhase(ctx context.Context, i int, name string) (PhaseResult, error) {
	res := PhaseResult{Name: name}
	argv := append(append([]string{}, d.p.Self...), "sender", "-sink", d.sinkURL,
		"-sources", fmt.Sprint(d.p.Sources), "-period", d.p.Period.String(),
		"-duration", d.p.Phase.String(), "-every", (d.p.Every / 5).String(), "-window", d.p.Every.String())
	if name == PhaseViaProxy {
		argv = append(argv, "-proxy", d.proxyURL)
	}
	var mu sync.Mutex
	var last SenderReport
	var final *SenderReport
	onLine := func(line string) {
		var x SenderReport
		if json.Unmarshal([]byte(line), &x) != nil {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		if x.Final {
			final = &x
		} else {
			last = x
		}
	}
	snd, err := startChild("sender ("+name+")", argv, nil, onLine)
	if err != nil {
		return res, err
	}
	d.children = append(d.children, snd)
	defer snd.stop(5 * time.Second)

	limit := time.NewTimer(d.p.Phase + 30*time.Second)
	defer limit.Stop()
	tick := time.NewTicker(d.p.Every)
	defer tick.Stop()
	var rd reading
	frozen := false
	sample := func() {
		mu.Lock()
		x := last
		mu.Unlock()
		if frozen {
			return
		}
		// The row keeps the reading taken when the phase's time was up:
		// what the sender held before the rest was cancelled.
		frozen = x.Ended
		rd = d.read(ctx, snd, x, rd)
		res.observe(rd)
		d.view.update(i, rd)
	}
	for done := false; !done; {
		select {
		case <-snd.done:
			done = true
		case <-tick.C:
			sample()
		case <-limit.C:
			return res, fmt.Errorf("the sender did not end within %s", d.p.Phase+30*time.Second)
		case <-ctx.Done():
			return res, ctx.Err()
		}
	}
	sample() // the reading at the end of the phase, if not taken yet
	mu.Lock()
	defer mu.Unlock()
	if final == nil {
		return res, fmt.Errorf("no summary from the sender: %s", snd.logs.String())
	}
	res.Sender = *final
	res.PeakSenderInflight = max(res.PeakSenderInflight, final.Peak)
	return res, nil
}

// read takes one reading: the sender's last report and memory, the
// proxy's held calls and memory, the sink's held calls. A value that
// cannot be read (a process that just ended) keeps the previous one.
func (d *run) read(ctx context.Context, snd *child, x SenderReport, prev reading) reading {
	r := prev
	r.T, r.Sender = time.Duration(x.T*float64(time.Second)), x
	if kb, err := procstat.RSSKB(snd.Pid()); err == nil {
		r.SenderRSSKB = kb
	}
	if x.Ended {
		// The sender is cancelling what it still holds: the proxy's and
		// the sink's last readings tell the phase better than new ones.
		return r
	}
	if kb, err := procstat.RSSKB(d.proxy.Pid()); err == nil {
		r.ProxyRSSKB = kb
	}
	if held, err := d.probe.proxyHeld(ctx, d.metrics); err == nil {
		r.ProxyHeld = held
	}
	if st, err := d.probe.sinkStats(ctx, d.sinkURL); err == nil {
		r.SinkHeld = st.Held
	}
	return r
}

// observe keeps the peaks of a reading.
func (p *PhaseResult) observe(r reading) {
	p.PeakSenderInflight = max(p.PeakSenderInflight, r.Sender.Peak)
	p.PeakSenderRSSKB = max(p.PeakSenderRSSKB, r.SenderRSSKB)
	p.PeakSenderGoroutines = max(p.PeakSenderGoroutines, r.Sender.Goroutines)
	p.PeakProxyHeld = max(p.PeakProxyHeld, r.ProxyHeld)
	p.PeakProxyRSSKB = max(p.PeakProxyRSSKB, r.ProxyRSSKB)
	p.PeakSinkHeld = max(p.PeakSinkHeld, r.SinkHeld)
}

// freePort returns a loopback TCP port nobody listens on now, for the
// proxy, which takes port numbers rather than listeners.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}
