//go:build integration

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

package sender

import (
	"runtime"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"knative.dev/event-forwarding-proxy/adapter"
	"knative.dev/event-forwarding-proxy/config"
	"knative.dev/event-forwarding-proxy/test/testproc"
)

// BenchmarkAdapterTick is the adapter side of one PingSource tick: every
// source fires one event at once at a sink (another process) that holds
// each call for a while, as a slow synchronous service does. It compares
// sending directly (HTTP/1.1 keep-alive or h2c sinks) with handing off to
// the real proxy (another process) with Prefer: respond-async.
//
// Reported per op (one tick): handoff-p50-ms and handoff-p99-ms, how long a
// source's send keeps the adapter busy; goroutines/pending and
// bytes/pending, what the adapter process holds per event the sink is
// holding (goroutines, and live heap plus stacks, measured after a GC at the
// moment the sink has received every event of the tick, less the footprint
// between ticks, divided by the calls the sink holds then); cpu-µs/event, the adapter's CPU time per event (the polling of
// the sink included); pool-bytes/event, what the connection pools keep between ticks
// (idle connections, reused by the next tick), per event of a tick.
// ns/op is the whole tick cycle, the sink's hold included, on both routes.
//
// SENDER_BENCH_EVENTS (default 1000) and SENDER_BENCH_HOLD (default 2s)
// change the tick's size and the sink's hold:
//
//	go test -run '^$' -bench AdapterTick -benchtime 3x ./test/sender/
func BenchmarkAdapterTick(b *testing.B) {
	events := testproc.EnvInt(b, "SENDER_BENCH_EVENTS", 1000)
	hold := testproc.EnvDuration(b, "SENDER_BENCH_HOLD", 2*time.Second)
	tests := []struct {
		name     string
		h1Sink   bool
		h2cHosts []string
		viaProx  bool
	}{
		{name: "direct-http1", h1Sink: true},
		{name: "direct-h2c", h2cHosts: []string{"127.0.0.1"}},
		{name: "proxy-async", viaProx: true},
	}
	for _, tc := range tests {
		b.Run(tc.name+"/events="+strconv.Itoa(events), func(b *testing.B) {
			sinkProc := startChildSink(b, tc.h1Sink)
			target := adapter.Target{URL: mustURL(b, sinkProc.URL+"/?hold="+hold.String()), Namespace: "tenant"}
			s := adapter.NewSender(adapter.SenderParams{Timeout: hold + time.Minute, SinkH2CHosts: tc.h2cHosts})
			if tc.viaProx {
				proxy := startProxy(b, "FORWARD_MAX_INFLIGHT=50000", "FORWARD_MAX_INFLIGHT_PER_DESTINATION=50000", "FORWARD_MAX_INFLIGHT_PER_TENANT=50000")
				s.SetForwarding(config.Forwarding{ProxyURL: mustURL(b, proxy.URL), Threshold: 0})
			}
			// A first tick fills the pools as every later tick finds them;
			// what they keep between ticks is reported apart.
			_, fresh := footprint()
			tick(b, s, target, events, sinkProc)
			_, warm := footprint()

			var goroutines, bytes, cpu float64
			var lat []time.Duration
			b.ResetTimer()
			for range b.N {
				g, m, c, l := tick(b, s, target, events, sinkProc)
				goroutines += g
				bytes += m
				cpu += c
				lat = append(lat, l...)
			}
			b.StopTimer()
			slices.Sort(lat)
			n := float64(b.N)
			b.ReportMetric(float64(lat[len(lat)/2])/1e6, "handoff-p50-ms")
			b.ReportMetric(float64(lat[len(lat)*99/100])/1e6, "handoff-p99-ms")
			b.ReportMetric(goroutines/n, "goroutines/pending")
			b.ReportMetric(bytes/n, "bytes/pending")
			b.ReportMetric(cpu/n, "cpu-µs/event")
			b.ReportMetric(float64(warm-fresh)/float64(events), "pool-bytes/event")
		})
	}
}

// tick fires n sends at once and returns the goroutines and bytes the
// process holds per event the sink holds once it received them all, the
// CPU time the process spent per event (the measurements' collections
// left out), and each send's hand-off time. It returns once the sink holds
// nothing.
func tick(b *testing.B, s *adapter.Sender, target adapter.Target, n int, sinkProc *childSink) (float64, float64, float64, []time.Duration) {
	_, before := sinkProc.state(b)
	g0, m0 := footprint()
	cpu0 := cpuTime(b)
	lat := make([]time.Duration, n)
	errs := make(chan error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			start := time.Now()
			_, err := s.Send(ctxFor(b, 5*time.Minute), target, pingEvent(strconv.Itoa(i)))
			lat[i] = time.Since(start)
			if err != nil {
				errs <- err
			}
		})
	}
	eventually(b, 5*time.Minute, "the sink received every event of the tick", func() bool {
		_, received := sinkProc.state(b)
		return received >= before+n
	})
	cpuGC := cpuTime(b)
	g1, m1 := footprint()
	cpuGC = cpuTime(b) - cpuGC
	pending, _ := sinkProc.state(b) // all of them unless the hold is short
	wg.Wait()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	cpu := cpuTime(b) - cpu0 - cpuGC
	eventually(b, 5*time.Minute, "the sink holds nothing", func() bool { held, _ := sinkProc.state(b); return held == 0 })
	pending = max(pending, 1)
	return float64(g1-g0) / float64(pending), float64(m1-m0) / float64(pending), float64(cpu.Microseconds()) / float64(n), lat
}

// cpuTime returns the user and system CPU time this process has used.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// footprint returns the goroutines and the live heap plus stack bytes
// after two collections (the second empties sync.Pool victim caches).
func footprint() (int, int64) {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return runtime.NumGoroutine(), int64(ms.HeapAlloc + ms.StackInuse)
}
