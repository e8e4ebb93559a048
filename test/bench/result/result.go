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

// Package result holds what the scenario bench measures: the types written
// to docs/bench/results.json, their JSON reader and writer, and the
// percentile math every latency figure goes through.
package result

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// Results is one run of the scenario bench.
type Results struct {
	// Machine is where it ran.
	Machine Machine `json:"machine"`
	// Command is the command line that produced the run.
	Command string `json:"command"`
	// Started is when the run began; WallSeconds how long it took.
	Started     time.Time `json:"started"`
	WallSeconds float64   `json:"wallSeconds"`
	// Scale shrinks every scenario for a quick run; 1 is the full run.
	Scale float64 `json:"scale"`
	// Held, Throughput and Seed are the three scenarios, one entry per
	// peer, protocol and size.
	Held       []HeldRun       `json:"held"`
	Throughput []ThroughputRun `json:"throughput"`
	Burst      []BurstRun      `json:"burst,omitempty"`
	Seed       []SeedRun       `json:"seed"`
	// Notes are things the run could not do (a peer missing, a limit hit).
	Notes []string `json:"notes,omitempty"`
}

// Machine describes the host.
type Machine struct {
	CPUModel  string `json:"cpuModel"`
	Cores     int    `json:"cores"`
	GoVersion string `json:"goVersion"`
	Kernel    string `json:"kernel"`
	// NofileLimit is the open-file limit the load generator got.
	NofileLimit uint64 `json:"nofileLimit"`
	// PeerCPU is the core the peers under test were pinned to; -1 when
	// they were not pinned.
	PeerCPU int `json:"peerCPU"`
	// LoadAvgStart and LoadAvgEnd are the 1-minute load averages when the
	// run began and ended: well above 2 on two cores means other work
	// shared the machine and the figures are noisier.
	LoadAvgStart float64 `json:"loadAvgStart"`
	LoadAvgEnd   float64 `json:"loadAvgEnd"`
}

// Latency summarises a set of durations, in milliseconds.
type Latency struct {
	Count  int     `json:"count"`
	Errors int     `json:"errors"`
	P50    float64 `json:"p50Ms"`
	P99    float64 `json:"p99Ms"`
	Max    float64 `json:"maxMs"`
}

// HeldRun is one peer holding N calls to the slow sink.
type HeldRun struct {
	Peer     string `json:"peer"`
	Protocol string `json:"protocol"`
	N        int    `json:"n"`
	// HeaderBytes is the size of the extra header every held call carried
	// (loadgen run -header-bytes); 0 for none.
	HeaderBytes int `json:"headerBytes,omitempty"`
	// Reached is how many calls the sink saw held at once (N when all
	// went through).
	Reached int `json:"reached"`
	// Failed counts calls that did not end with 200.
	Failed int `json:"failed"`
	// IdleRSSKB is the peer's resident memory before the calls, HeldRSSKB
	// once all of them are held and the peer has settled.
	IdleRSSKB int64 `json:"idleRssKB"`
	HeldRSSKB int64 `json:"heldRssKB"`
	// BytesPerCall is (HeldRSSKB - IdleRSSKB) / Reached, in bytes.
	BytesPerCall float64 `json:"bytesPerCall"`
	// BodyBytes is the size of the body each held async event carries,
	// which the peer must keep until delivery; 0 for synchronous calls.
	BodyBytes int `json:"bodyBytes,omitempty"`
	// RampSeconds is the wall time to get every call held.
	RampSeconds float64 `json:"rampSeconds"`
	// SettleSeconds is how long the peer then stayed busy (finishing a
	// garbage collection, mostly) before the held-state figures were taken.
	SettleSeconds float64 `json:"settleSeconds"`
	// RampCPUSeconds is the peer's CPU time (user+system) from idle to all
	// held; CPUSeconds to the end of the run, releases included.
	RampCPUSeconds float64 `json:"rampCpuSeconds"`
	CPUSeconds     float64 `json:"cpuSeconds"`
	// RampLoadCPUSeconds and RampSinkCPUSeconds are the load generator's
	// and the sink's CPU time during the ramp, on their own core.
	RampLoadCPUSeconds float64 `json:"rampLoadCpuSeconds"`
	RampSinkCPUSeconds float64 `json:"rampSinkCpuSeconds"`
	// Added is the added latency of fast probe calls sent through the
	// peer while all N are held and it has settled: each probe's time to
	// response headers minus the median of the same probes sent to the
	// sink directly at the same time.
	Added Latency `json:"addedLatency"`
	// Through and Direct are the raw probe latencies through the peer and
	// to the sink directly.
	Through Latency `json:"throughLatency"`
	Direct  Latency `json:"directLatency"`
	// RampAdded is the added latency of probes sent while the N calls
	// were being opened.
	RampAdded Latency `json:"rampAddedLatency"`
	// Note says why a run stopped short.
	Note string `json:"note,omitempty"`
}

// BurstRun is bursts of events arriving at a peer at the same instant,
// each burst split over a few h2c connections and written at once.
type BurstRun struct {
	Peer string `json:"peer"`
	// Events is the size of a burst; Bursts how many were sent, one after
	// the other, while the deliveries of the ones before were held.
	Events int `json:"events"`
	Bursts int `json:"bursts"`
	Conns  int `json:"conns"`
	// HandOff is each event's time from the burst's write to its answer:
	// the 202 of an async hand-off, or the sink's answer direct.
	HandOff Latency `json:"handOffLatency"`
	// Errors counts events not answered as expected.
	Errors int `json:"errors"`
	// CPUSeconds is the peer's CPU time over the bursts.
	CPUSeconds float64 `json:"cpuSeconds"`
	Note       string  `json:"note,omitempty"`
}

// ThroughputRun is one peer forwarding to the fast sink as fast as the
// load generator can drive it.
type ThroughputRun struct {
	Peer        string  `json:"peer"`
	Protocol    string  `json:"protocol"`
	Concurrency int     `json:"concurrency"`
	Seconds     float64 `json:"seconds"`
	Requests    int64   `json:"requests"`
	Errors      int64   `json:"errors"`
	RPS         float64 `json:"rps"`
	// CPUSeconds is the peer's CPU time during the measured window;
	// CPUMicrosPerRequest that divided by Requests.
	CPUSeconds          float64 `json:"cpuSeconds"`
	CPUMicrosPerRequest float64 `json:"cpuMicrosPerRequest"`
	// LoadCPUSeconds is the load generator's and the sink's CPU time in
	// the same window: when their core is full, they are the bottleneck.
	LoadCPUSeconds float64 `json:"loadCpuSeconds"`
	SinkCPUSeconds float64 `json:"sinkCpuSeconds"`
	// Latency of every request, through the peer.
	Latency Latency `json:"latency"`
}

// SeedRun is the mt-adapter-like sender, either waiting for its sinks
// itself (direct) or handing every event to the proxy (proxy-async).
type SeedRun struct {
	Mode            string  `json:"mode"`
	Sources         int     `json:"sources"`
	PeriodSeconds   float64 `json:"periodSeconds"`
	HoldSeconds     float64 `json:"holdSeconds"`
	DurationSeconds float64 `json:"durationSeconds"`
	Sent            int64   `json:"sent"`
	Errors          int64   `json:"errors"`
	// Cut counts calls still in flight when the sender stopped.
	Cut int64 `json:"cut"`
	// Peer is what the sender sent through ("" for none). The Proxy
	// fields are that peer's, whichever it is.
	Peer string `json:"peer,omitempty"`
	// Peak values over the run.
	PeakSenderRSSKB    int64   `json:"peakSenderRssKB"`
	PeakSenderInflight int64   `json:"peakSenderInflight"`
	PeakProxyRSSKB     int64   `json:"peakProxyRssKB"`
	PeakSinkHeld       int64   `json:"peakSinkHeld"`
	SenderCPUSeconds   float64 `json:"senderCpuSeconds"`
	ProxyCPUSeconds    float64 `json:"proxyCpuSeconds"`
	// HandOff is how long the sender waited per event: the 202 in
	// proxy-async mode; the destination's answer in the other modes.
	HandOff Latency      `json:"handOffLatency"`
	Samples []SeedSample `json:"samples"`
}

// SeedSample is one second of a seed run.
type SeedSample struct {
	T              float64 `json:"t"`
	SenderRSSKB    int64   `json:"senderRssKB"`
	SenderInflight int64   `json:"senderInflight"`
	ProxyRSSKB     int64   `json:"proxyRssKB,omitempty"`
	SinkHeld       int64   `json:"sinkHeld"`
}

// Write writes r as indented JSON to path, creating its folder, through a
// temporary file so that a reader never sees half a file.
func Write(path string, r *Results) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, append(b, '\n'), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// Read reads results written by Write.
func Read(path string) (*Results, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var r Results
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &r, nil
}

// AddedP50 and AddedP99 are the held-state probes' added latency;
// RampAddedP99 that of the probes sent during the ramp.
func (h HeldRun) AddedP50() float64     { return h.Added.P50 }
func (h HeldRun) AddedP99() float64     { return h.Added.P99 }
func (h HeldRun) RampAddedP99() float64 { return h.RampAdded.P99 }
