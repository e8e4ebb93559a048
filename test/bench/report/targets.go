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

package report

import (
	"fmt"
	"slices"

	"knative.dev/event-forwarding-proxy/test/bench/result"
)

// Peers the targets are judged for (the first) and compared with.
const (
	peerProxy   = "proxy"
	peerHAProxy = "haproxy"
	peerNaive   = "naive"
	peerNginx   = "nginx"
	peerDirect  = "direct"
)

var targetPeers = []string{peerProxy, peerHAProxy, peerNaive, peerNginx}

// Protocols of held runs.
const (
	protoH2C      = "h2c"
	protoH2CAsync = "h2c-async"
	protoHTTP1    = "http1"
)

// noAsync is what a peer shows where only an async hand-off applies.
const noAsync = "no async hand-off"

// figure is one peer's value for a target: v is judged, text shown.
type figure struct {
	v    float64
	text string
	ok   bool
}

func shown(v float64, text string) figure { return figure{v: v, text: text, ok: true} }

// targets judges the proxy's performance targets on this run; every other
// peer of the same run is shown beside it.
func targets(r *result.Results) string {
	top := topHeld(r)
	rows := [][]string{
		row(fmt.Sprintf("≤ 8 KB RSS per held call at %d h2c", top), func(p string) figure { return heldBytes(r, p, protoH2C, top, false) },
			func(v float64) bool { return v <= targetBytesPerCall }),
		row(fmt.Sprintf("≤ 2.5 KB RSS per held sync call at %d h2c", top), func(p string) figure { return heldBytes(r, p, protoH2C, top, false) },
			func(v float64) bool { return v <= targetLeanBytesPerCall }),
		heldCPURow(r, top),
		row(fmt.Sprintf("≤ 3 KB RSS per held async event at %d h2c, beyond its body", top),
			func(p string) figure { return heldBytes(r, p, protoH2CAsync, top, true) },
			func(v float64) bool { return v <= targetAsyncBytesPerEvent }),
		row("added latency p50 ≤ 2 ms at every N", func(p string) figure { return worstAdded(r, p, result.HeldRun.AddedP50) },
			func(v float64) bool { return v <= targetP50Ms }),
		row("added latency p99 ≤ 50 ms at every N", func(p string) figure { return worstAdded(r, p, result.HeldRun.AddedP99) },
			func(v float64) bool { return v <= targetP99Ms }),
		row("≤ 50 µs CPU per forwarded request over HTTP/1.1", func(p string) figure { return cpuPerRequest(r, p) },
			func(v float64) bool { return v <= targetCPUMicros }),
		burstRow(r),
		row("h2c throughput ≥ 0.8 of the same client straight at the sink", func(p string) figure { return throughputRatio(r, p) },
			func(v float64) bool { return v >= targetThroughputRatio }),
		rampRow(r),
	}
	head := []string{"target", "this proxy", "HAProxy", "naive peer", "nginx", "met"}
	return table(head, rows)
}

// row is a target's line: each peer's figure, then the proxy's verdict.
func row(name string, of func(peer string) figure, met func(float64) bool) []string {
	out := []string{name}
	var proxy figure
	for i, p := range targetPeers {
		f := of(p)
		if i == 0 {
			proxy = f
		}
		out = append(out, orNone(f))
	}
	return append(out, verdict(proxy.ok, proxy.ok && met(proxy.v)))
}

// topHeld is the largest N of the proxy's synchronous held h2c runs.
func topHeld(r *result.Results) int {
	top := 0
	for _, h := range r.Held {
		if h.Peer == peerProxy && h.Protocol == protoH2C && h.Reached > 0 {
			top = max(top, h.N)
		}
	}
	return top
}

func findHeld(r *result.Results, peer, protocol string, n int) (result.HeldRun, bool) {
	i := slices.IndexFunc(r.Held, func(h result.HeldRun) bool {
		return h.Peer == peer && h.Protocol == protocol && h.N == n && h.Reached > 0
	})
	if i < 0 {
		return result.HeldRun{}, false
	}
	return r.Held[i], true
}

// heldBytes is RSS per held call, less the body an async event keeps.
func heldBytes(r *result.Results, peer, protocol string, n int, async bool) figure {
	h, ok := findHeld(r, peer, protocol, n)
	if !ok {
		if async && peer != peerProxy {
			return figure{text: noAsync}
		}
		return figure{}
	}
	v := h.BytesPerCall - float64(h.BodyBytes)
	return shown(v, kb(v)+" KB")
}

// heldCPURow compares the CPU of the held run at top, ramp to release,
// with HAProxy's of the same run.
func heldCPURow(r *result.Results, top int) []string {
	ha, haOK := findHeld(r, peerHAProxy, protoH2C, top)
	name := fmt.Sprintf("CPU of the held h2c run at %d below HAProxy's", top)
	out := row(name, func(p string) figure {
		h, ok := findHeld(r, p, protoH2C, top)
		if !ok {
			return figure{}
		}
		return shown(h.CPUSeconds, f1(h.CPUSeconds)+" s")
	}, func(v float64) bool { return haOK && v < ha.CPUSeconds })
	if !haOK {
		out[len(out)-1] = "not measured"
	}
	return out
}

func worstAdded(r *result.Results, peer string, f func(result.HeldRun) float64) figure {
	w, at, ok := 0.0, "", false
	for _, h := range r.Held {
		if h.Peer != peer || h.Added.Count == 0 {
			continue
		}
		if v := f(h); !ok || v > w {
			w, at, ok = v, fmt.Sprintf("%s N=%d", h.Protocol, h.N), true
		}
	}
	if !ok {
		return figure{}
	}
	return shown(w, fmt.Sprintf("worst %s ms (%s)", f2(w), at))
}

func cpuPerRequest(r *result.Results, peer string) figure {
	for _, t := range r.Throughput {
		if t.Peer == peer && t.Protocol == protoHTTP1 && t.Requests > 0 {
			return shown(t.CPUMicrosPerRequest, f1(t.CPUMicrosPerRequest)+" µs")
		}
	}
	return figure{}
}

// throughputRatio is a peer's h2c request rate over the direct client's.
func throughputRatio(r *result.Results, peer string) figure {
	var direct, through float64
	for _, t := range r.Throughput {
		if t.Protocol != protoH2C || t.Requests == 0 {
			continue
		}
		switch t.Peer {
		case peerDirect:
			direct = t.RPS
		case peer:
			through = t.RPS
		}
	}
	if direct == 0 || through == 0 {
		return figure{}
	}
	v := through / direct
	return shown(v, fmt.Sprintf("%.2f (%.0f of %.0f req/s)", v, through, direct))
}

// burstRow judges the hand-off of bursts of async events arriving at
// once; the proxy's cell also shows, for reference, the same bursts
// answered at once by a Go HTTP/2 server on the proxy's core.
func burstRow(r *result.Results) []string {
	find := func(peer string) (result.BurstRun, bool) {
		i := slices.IndexFunc(r.Burst, func(b result.BurstRun) bool { return b.Peer == peer && b.HandOff.Count > 0 })
		if i < 0 {
			return result.BurstRun{}, false
		}
		return r.Burst[i], true
	}
	proxy, ok := find(peerProxy)
	events := 5000
	if ok {
		events = proxy.Events
	}
	return row(fmt.Sprintf("hand-off of a burst of %d async events, p99 ≤ 250 ms on one core", events), func(p string) figure {
		if p != peerProxy {
			return figure{text: noAsync}
		}
		if !ok {
			return figure{}
		}
		text := fmt.Sprintf("p99 %s ms (p50 %s)", f2(proxy.HandOff.P99), f2(proxy.HandOff.P50))
		if ref, ok := find(peerDirect); ok {
			text += fmt.Sprintf("; a server answering at once: p99 %s ms", f2(ref.HandOff.P99))
		}
		return shown(proxy.HandOff.P99, text)
	}, func(v float64) bool { return v <= targetBurstP99Ms })
}

// rampRow shows, for reading the latency rows, the worst p99 of probes
// sent while the calls were being opened as fast as the load generator
// could: the peer's core is then saturated, so this is queueing, not a
// target.
func rampRow(r *result.Results) []string {
	out := row("(not a target) added latency p99 while the N calls are being opened",
		func(p string) figure { return worstAdded(r, p, result.HeldRun.RampAddedP99) }, func(float64) bool { return true })
	out[len(out)-1] = "saturated: for reading only"
	return out
}

func orNone(f figure) string {
	switch {
	case f.text != "":
		return f.text
	case !f.ok:
		return "not measured"
	}
	return ""
}

func verdict(measured, met bool) string {
	switch {
	case !measured:
		return "not measured"
	case met:
		return "**met**"
	default:
		return "**not met**"
	}
}
