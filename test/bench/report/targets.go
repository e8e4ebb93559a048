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

	"knative.dev/event-forwarding-proxy/test/bench/result"
)

// Peers the targets are judged for and compared with.
const (
	peerProxy = "proxy"
	peerNaive = "naive"
)

// targets judges the proxy's performance targets on this run, for the
// proxy and, for comparison, the naive peer.
func targets(r *result.Results) string {
	rows := [][]string{
		memoryTarget(r),
		latencyTarget(r, "added latency p50 ≤ 2 ms at every N", func(l result.Latency) float64 { return l.P50 }, targetP50Ms),
		latencyTarget(r, "added latency p99 ≤ 50 ms at every N", func(l result.Latency) float64 { return l.P99 }, targetP99Ms),
		cpuTarget(r),
		rampRow(r),
	}
	return table([]string{"target", "this proxy", "naive peer", "met"}, rows)
}

// rampRow shows, for reading the latency rows, the worst p99 of probes
// sent while the calls were being opened as fast as the load generator
// could: the peer's core is then saturated, so this is queueing, not a
// target.
func rampRow(r *result.Results) []string {
	row := latencyTargetOf(r, "(not a target) added latency p99 while the N calls are being opened",
		func(h result.HeldRun) result.Latency { return h.RampAdded }, func(l result.Latency) float64 { return l.P99 }, 0)
	row[3] = "saturated: for reading only"
	return row
}

func memoryTarget(r *result.Results) []string {
	top := 0
	for _, h := range r.Held {
		if h.Peer == peerProxy && h.Protocol == "h2c" && h.Reached > 0 {
			top = max(top, h.N)
		}
	}
	name := fmt.Sprintf("≤ 8 KB RSS per held call at %d h2c", top)
	get := func(peer string) (float64, bool) {
		for _, h := range r.Held {
			if h.Peer == peer && h.Protocol == "h2c" && h.N == top && h.Reached > 0 {
				return h.BytesPerCall, true
			}
		}
		return 0, false
	}
	p, okp := get(peerProxy)
	n, okn := get(peerNaive)
	return []string{name, orNone(okp, kb(p)+" KB"), orNone(okn, kb(n)+" KB"), verdict(okp, p <= targetBytesPerCall)}
}

// latencyTarget judges the worst value over every held run of a peer.
func latencyTarget(r *result.Results, name string, f func(result.Latency) float64, limit float64) []string {
	return latencyTargetOf(r, name, func(h result.HeldRun) result.Latency { return h.Added }, f, limit)
}

func latencyTargetOf(r *result.Results, name string, of func(result.HeldRun) result.Latency, f func(result.Latency) float64, limit float64) []string {
	worst := func(peer string) (float64, string, bool) {
		w, at, ok := 0.0, "", false
		for _, h := range r.Held {
			l := of(h)
			if h.Peer != peer || l.Count == 0 {
				continue
			}
			if v := f(l); !ok || v > w {
				w, at, ok = v, fmt.Sprintf("%s N=%d", h.Protocol, h.N), true
			}
		}
		return w, at, ok
	}
	p, pat, okp := worst(peerProxy)
	n, nat, okn := worst(peerNaive)
	return []string{name,
		orNone(okp, fmt.Sprintf("worst %s ms (%s)", f2(p), pat)),
		orNone(okn, fmt.Sprintf("worst %s ms (%s)", f2(n), nat)),
		verdict(okp, p <= limit)}
}

func cpuTarget(r *result.Results) []string {
	get := func(peer string) (float64, bool) {
		for _, t := range r.Throughput {
			if t.Peer == peer && t.Protocol == "http1" && t.Requests > 0 {
				return t.CPUMicrosPerRequest, true
			}
		}
		return 0, false
	}
	p, okp := get(peerProxy)
	n, okn := get(peerNaive)
	return []string{"≤ 50 µs CPU per forwarded request over HTTP/1.1",
		orNone(okp, f1(p)+" µs"), orNone(okn, f1(n)+" µs"), verdict(okp, p <= targetCPUMicros)}
}

func orNone(ok bool, s string) string {
	if !ok {
		return "not measured"
	}
	return s
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
