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

// Package sender is the seed scenario's event source: like a multi-tenant
// PingSource adapter, it fires one event per source at every tick ("every
// minute", scaled down) at sinks that hold each call for long. Direct, it
// waits for every sink itself; through the proxy, it hands each event over
// with Prefer: respond-async and is free again at the 202.
package sender

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"knative.dev/event-forwarding-proxy/test/bench/procstat"
	"knative.dev/event-forwarding-proxy/test/bench/result"
)

// Modes.
const (
	// Direct sends to the sink and waits for its answer.
	Direct = "direct"
	// ProxyAsync hands every event to the proxy with Prefer: respond-async.
	ProxyAsync = "proxy-async"
	// ThroughPeer sends every event through a forwarding peer (Proxy),
	// naming the sink in Kn-Forward-To, and waits for the sink's answer.
	ThroughPeer = "through-peer"
)

// Params configure a run.
type Params struct {
	// Mode is Direct, ProxyAsync or ThroughPeer. Required.
	Mode string
	// Sink is the slow sink's base URL. Required.
	Sink string
	// Proxy is the proxy's (or the peer's) base URL. Required but Direct.
	Proxy string
	// Sources is the number of events fired at every tick. If zero, 5000.
	Sources int
	// Period is the time between ticks. If zero, 10 s.
	Period time.Duration
	// Hold is how long the sink holds each call. If zero, 60 s.
	Hold time.Duration
	// Duration bounds the run: ticks fire at 0, Period, 2 Period... while
	// it lasts (9 ticks for 90 s every 10 s), and calls still in flight at
	// its end are cancelled. If zero, 90 s.
	Duration time.Duration
	// Every is the sampling interval. If zero, 1 s.
	Every time.Duration
}

// Sample is one line of the sender's report.
type Sample struct {
	T        float64 `json:"t"`
	Inflight int64   `json:"inflight"`
	RSSKB    int64   `json:"rssKB"`
	Sent     int64   `json:"sent"`
	Errors   int64   `json:"errors"`
}

// Summary is the last line of the report.
type Summary struct {
	Final  bool  `json:"final"`
	Sent   int64 `json:"sent"`
	Errors int64 `json:"errors"`
	// Cut counts calls still in flight when the run ended, cancelled.
	Cut        int64          `json:"cut"`
	HandOff    result.Latency `json:"handOff"`
	CPUSeconds float64        `json:"cpuSeconds"`
}

type run struct {
	p        Params
	client   *http.Client
	inflight atomic.Int64
	sent     atomic.Int64
	errors   atomic.Int64
	cut      atomic.Int64
	mu       sync.Mutex
	handOffs []time.Duration
}

// Run fires events as p says and writes one JSON Sample per interval to
// out, then a Summary. It returns once every call has ended.
func Run(ctx context.Context, p Params, out io.Writer) error {
	p = withDefaults(p)
	if p.Sink == "" || (p.Mode != Direct && p.Proxy == "") || (p.Mode != Direct && p.Mode != ProxyAsync && p.Mode != ThroughPeer) {
		return fmt.Errorf("sender: bad params %+v", p)
	}
	tr := &http.Transport{Proxy: nil, DisableCompression: true, Protocols: new(http.Protocols)}
	tr.Protocols.SetUnencryptedHTTP2(true)
	defer tr.CloseIdleConnections()
	r := &run{p: p, client: &http.Client{Transport: tr}}

	ctx, cancel := context.WithTimeout(ctx, p.Duration)
	defer cancel()
	var wg sync.WaitGroup
	enc := json.NewEncoder(out)
	start := time.Now()
	tick := time.NewTicker(p.Period)
	defer tick.Stop()
	sample := time.NewTicker(p.Every)
	defer sample.Stop()
	ticks := int((p.Duration-1)/p.Period) + 1
	r.fire(ctx, &wg, 0)
	for n := 1; ctx.Err() == nil; {
		select {
		case <-tick.C:
			if n < ticks {
				r.fire(ctx, &wg, n)
				n++
			}
		case <-sample.C:
			_ = enc.Encode(r.sample(start))
		case <-ctx.Done():
		}
	}
	wg.Wait()
	_ = enc.Encode(r.sample(start))
	r.mu.Lock()
	defer r.mu.Unlock()
	cpu, _ := procstat.CPUSeconds(os.Getpid())
	return enc.Encode(Summary{
		Final: true, Sent: r.sent.Load(), Errors: r.errors.Load(), Cut: r.cut.Load(),
		HandOff: result.Summarize(r.handOffs, int(r.errors.Load())), CPUSeconds: cpu,
	})
}

func withDefaults(p Params) Params {
	if p.Sources <= 0 {
		p.Sources = 5000
	}
	if p.Period <= 0 {
		p.Period = 10 * time.Second
	}
	if p.Hold <= 0 {
		p.Hold = time.Minute
	}
	if p.Duration <= 0 {
		p.Duration = 90 * time.Second
	}
	if p.Every <= 0 {
		p.Every = time.Second
	}
	return p
}

func (r *run) sample(start time.Time) Sample {
	rss, _ := procstat.RSSKB(os.Getpid())
	return Sample{
		T: time.Since(start).Seconds(), Inflight: r.inflight.Load(), RSSKB: rss,
		Sent: r.sent.Load(), Errors: r.errors.Load(),
	}
}

// fire sends one event per source, each from its own goroutine, as a
// multi-tenant adapter does when the minute strikes.
func (r *run) fire(ctx context.Context, wg *sync.WaitGroup, tick int) {
	for i := range r.p.Sources {
		wg.Go(func() { r.send(ctx, tick, i) })
	}
}

var body = []byte(`{"message":"Hello world!"}`)

func (r *run) send(ctx context.Context, tick, src int) {
	dest := r.p.Sink + "/hold?d=" + r.p.Hold.String()
	url, want := dest, http.StatusOK
	switch r.p.Mode {
	case ProxyAsync:
		url, want = r.p.Proxy+"/hold", http.StatusAccepted
	case ThroughPeer:
		url = r.p.Proxy + "/hold"
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		r.errors.Add(1)
		return
	}
	ns := "tenant-" + strconv.Itoa(src%50)
	req.Header.Set("Ce-Specversion", "1.0")
	req.Header.Set("Ce-Id", strconv.Itoa(tick)+"-"+strconv.Itoa(src))
	req.Header.Set("Ce-Source", "/apis/v1/namespaces/"+ns+"/pingsources/p"+strconv.Itoa(src))
	req.Header.Set("Ce-Type", "dev.knative.sources.ping")
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Kn-Namespace", ns)
	if r.p.Mode != Direct {
		req.Header.Set("Kn-Forward-To", dest)
	}
	if r.p.Mode == ProxyAsync {
		req.Header.Set("Prefer", "respond-async")
	}
	r.inflight.Add(1)
	defer r.inflight.Add(-1)
	r.sent.Add(1)
	start := time.Now()
	resp, err := r.client.Do(req)
	if err == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
	}
	if err != nil && ctx.Err() != nil {
		r.cut.Add(1)
		return
	}
	if err != nil || resp.StatusCode != want {
		r.errors.Add(1)
		return
	}
	d := time.Since(start)
	r.mu.Lock()
	r.handOffs = append(r.handOffs, d)
	r.mu.Unlock()
}
