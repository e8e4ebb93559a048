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

package mtping

import (
	"testing"
	"time"

	"knative.dev/event-forwarding-proxy/test/bench/report"
)

// seedTick is one minute-tick inside a mode's run.
type seedTick struct {
	At       float64 `json:"at_s"` // seconds after the adapter started
	Received int64   `json:"received"`
}

// seedRun is what one mode measured.
type seedRun struct {
	Mode string `json:"mode"`
	// LeaderAfter is the time from the adapter's start until it led its
	// bucket, in seconds.
	LeaderAfter float64 `json:"leader_after_s"`
	// Ticks are the minute boundaries after LeaderAfter and at least 5 s
	// before the run's end; Expected is sources × len(Ticks) and Received
	// the events of those ticks the sink received. Other counts what the
	// sink received meanwhile outside them (a tick in the last 5 s).
	Ticks    []seedTick `json:"ticks"`
	Expected int64      `json:"expected"`
	Received int64      `json:"received"`
	Other    int64      `json:"received_other"`
	// Errors adds up ErrorsBy: failed sends and fallbacks in the adapter,
	// rejections and failed or abandoned async deliveries in the proxy,
	// events without a ce-time at the sink.
	Errors   int64              `json:"errors"`
	ErrorsBy map[string]float64 `json:"errors_by"`
	// The adapter's tick lateness histogram: ticks recorded, p50, p99
	// (interpolated in its buckets) and mean, in milliseconds.
	LatenessCount  float64 `json:"lateness_count"`
	LatenessP50Ms  float64 `json:"lateness_p50_ms"`
	LatenessP99Ms  float64 `json:"lateness_p99_ms"`
	LatenessMeanMs float64 `json:"lateness_mean_ms"`
	// AdapterIdleRSSMB is the adapter's RSS just before the first tick.
	AdapterIdleRSSMB    float64 `json:"adapter_idle_rss_mb"`
	AdapterPeakRSSMB    float64 `json:"adapter_peak_rss_mb"`
	AdapterPeakInflight float64 `json:"adapter_peak_inflight"`
	// AdapterSettledInflight is the peak of the samples taken settleAfter
	// or more after a tick: past the spread (up to 500 ms, counted as in
	// flight) and the hand-off of the tick's burst, what the adapter still
	// holds.
	AdapterSettledInflight float64 `json:"adapter_settled_inflight"`
	// AdapterCPUSeconds is the CPU time the adapter used, its start
	// included; ProxyCPUSeconds the proxy's during the run.
	AdapterCPUSeconds float64 `json:"adapter_cpu_s"`
	ProxyPeakRSSMB    float64 `json:"proxy_peak_rss_mb,omitempty"`
	ProxyPeakHeld     float64 `json:"proxy_peak_held,omitempty"`
	ProxyCPUSeconds   float64 `json:"proxy_cpu_s,omitempty"`
	SinkPeakHeld      int64   `json:"sink_peak_held"`
	// MissedReads counts samples of a process that could not be read.
	MissedReads int          `json:"missed_reads"`
	Samples     []seedSample `json:"samples"`
}

const latenessMetric = "kn_forward_mtping_tick_lateness_seconds"

// settleAfter is how long after a tick a send still in flight counts as
// held (AdapterSettledInflight). Handing a burst of 2000 events to the
// proxy takes a few seconds on two busy cores. It is report's, which
// names it in the block of docs/benchmarks.md.
const settleAfter = report.MtpingSettleAfter

// finish computes the run's figures from its samples, the sink's counts
// before and after, and a last scrape of the processes' metrics.
func (r *seedRun) finish(b *testing.B, smp *seedSampler, begin, end time.Time, before, after sinkCounts, cfg seedConfig) {
	b.Helper()
	leader := begin.Add(time.Duration(r.LeaderAfter * float64(time.Second)))
	for m := begin.Truncate(time.Minute).Add(time.Minute); !m.After(end.Add(-5 * time.Second)); m = m.Add(time.Minute) {
		if m.Before(leader) {
			continue
		}
		k := m.Unix() / 60
		t := seedTick{At: m.Sub(begin).Seconds(), Received: after.ticks[k] - before.ticks[k]}
		r.Ticks = append(r.Ticks, t)
		r.Received += t.Received
	}
	r.Expected = int64(len(r.Ticks) * cfg.Sources)
	r.Other = after.received - before.received - r.Received

	r.ErrorsBy = map[string]float64{"sink: no ce-time": float64(after.untimed - before.untimed)}
	if m, err := scrape(smp.adURL); err != nil {
		b.Errorf("scraping the adapter: %v", err)
	} else {
		r.LatenessCount = m.sum(latenessMetric + "_count")
		if r.LatenessCount > 0 {
			r.LatenessMeanMs = 1000 * m.sum(latenessMetric+"_sum") / r.LatenessCount
		}
		p50, _ := m.quantile(latenessMetric, 0.5)
		p99, _ := m.quantile(latenessMetric, 0.99)
		r.LatenessP50Ms, r.LatenessP99Ms = 1000*p50, 1000*p99
		r.ErrorsBy["adapter: failed sends"] = m.sum("kn_forward_sender_sends_total", `outcome="failed"`)
		r.ErrorsBy["adapter: fallbacks to direct"] = m.sum("kn_forward_sender_fallbacks_total")
	}
	if smp.px != nil {
		if m, err := scrape(smp.pxURL); err != nil {
			b.Errorf("scraping the proxy: %v", err)
		} else {
			r.ErrorsBy["proxy: rejected"] = m.sum("kn_forward_rejected_total")
			r.ErrorsBy["proxy: async failed"] = m.sum("kn_forward_async_deliveries_total", `outcome="failed"`)
			r.ErrorsBy["proxy: async abandoned"] = m.sum("kn_forward_async_deliveries_total", `outcome="abandoned"`)
		}
	}
	for _, n := range r.ErrorsBy {
		r.Errors += int64(n)
	}

	r.MissedReads = smp.missed
	for i, x := range r.Samples {
		if i == 0 || len(r.Ticks) > 0 && x.T < r.Ticks[0].At {
			r.AdapterIdleRSSMB = x.AdapterRSSMB
		}
		r.AdapterPeakRSSMB = max(r.AdapterPeakRSSMB, x.AdapterRSSMB)
		r.AdapterPeakInflight = max(r.AdapterPeakInflight, x.AdapterInflight)
		if at := begin.Add(time.Duration(x.T * float64(time.Second))); at.Sub(at.Truncate(time.Minute)) >= settleAfter {
			r.AdapterSettledInflight = max(r.AdapterSettledInflight, x.AdapterInflight)
		}
		r.ProxyPeakRSSMB = max(r.ProxyPeakRSSMB, x.ProxyRSSMB)
		r.ProxyPeakHeld = max(r.ProxyPeakHeld, x.ProxyHeld)
		r.SinkPeakHeld = max(r.SinkPeakHeld, x.SinkHeld)
		r.AdapterCPUSeconds, r.ProxyCPUSeconds = x.AdapterCPUSeconds, x.ProxyCPUSeconds
	}
	if r.Received < r.Expected || r.Errors > 0 {
		b.Logf("%s: received %d of %d events; errors %v", r.Mode, r.Received, r.Expected, r.ErrorsBy)
	}
}

// report reports the run's figures as benchmark metrics.
func (r *seedRun) report(b *testing.B) {
	b.ReportMetric(r.AdapterPeakRSSMB, "adapter-peak-RSS-MB")
	b.ReportMetric(r.AdapterPeakInflight, "adapter-peak-inflight")
	b.ReportMetric(r.AdapterSettledInflight, "adapter-settled-inflight")
	b.ReportMetric(r.AdapterCPUSeconds, "adapter-CPU-s")
	b.ReportMetric(r.LatenessP50Ms, "lateness-p50-ms")
	b.ReportMetric(r.LatenessP99Ms, "lateness-p99-ms")
	b.ReportMetric(r.ProxyPeakRSSMB, "proxy-peak-RSS-MB")
	b.ReportMetric(r.ProxyPeakHeld, "proxy-peak-held")
	b.ReportMetric(float64(r.Received), "received")
	b.ReportMetric(float64(r.Expected), "expected")
	b.ReportMetric(float64(r.Errors), "errors")
}
