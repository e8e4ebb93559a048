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
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"knative.dev/pkg/apis"

	sourcesv1 "knative.dev/eventing/pkg/apis/sources/v1"
	"knative.dev/eventing/pkg/client/clientset/versioned"

	"knative.dev/event-forwarding-proxy/config"
	"knative.dev/event-forwarding-proxy/test/bench/report"
	"knative.dev/event-forwarding-proxy/test/testproc"
)

// The seed scenario's two modes, as report renders them.
const (
	modeDirect = report.MtpingDirect // no proxy in config-event-forwarding
	modeProxy  = report.MtpingProxy  // the proxy, threshold 0: every send handed off
)

// seedConfig sizes the seed scenario (environment, see BenchmarkSeed).
type seedConfig struct {
	Sources    int           `json:"sources"`
	Namespaces int           `json:"namespaces"`
	Schedule   string        `json:"schedule"`
	Hold       time.Duration `json:"-"`
	Duration   time.Duration `json:"-"`
	// StartSecond is the second of the minute each mode's adapter starts
	// at, so that both modes see their ticks at the same offsets.
	StartSecond int `json:"start_second"`
}

// MarshalJSON writes the durations in seconds.
func (c seedConfig) MarshalJSON() ([]byte, error) {
	type plain seedConfig
	return json.Marshal(struct {
		plain
		HoldSeconds     float64 `json:"hold_s"`
		DurationSeconds float64 `json:"duration_s"`
	}{plain(c), c.Hold.Seconds(), c.Duration.Seconds()})
}

// BenchmarkSeed is the seed scenario (thousands of PingSources firing on
// the same minute at sinks that hold each call) with the real adapter: a
// real API server holds SEED_SOURCES PingSources (default 2000, over 4
// namespaces) firing every minute ("* * * * *") at a sink (HTTP/1.1, in
// this process) that holds each call for SEED_HOLD (default 150 s). The
// real cmd/mtping binary (one replica, one bucket) runs for SEED_DURATION
// (default 200 s: four ticks, the first 10 s after it starts) twice:
// direct, and with config-event-forwarding naming a real cmd/proxy process
// with threshold 0, so that every send is handed off (Prefer:
// respond-async). Every second it samples the adapter's and the proxy's
// RSS and CPU time (/proc), the adapter's in-flight sends and the proxy's
// held calls (their /metrics) and the calls the sink holds.
//
// Reported per mode: adapter-peak-RSS-MB; adapter-peak-inflight and
// adapter-settled-inflight (the peak 10 s or more after a tick, past the
// spread and the hand-off); adapter-CPU-s (start included);
// lateness-p50-ms and lateness-p99-ms (the adapter's tick-lateness
// histogram, interpolated in its buckets); proxy-peak-RSS-MB and
// proxy-peak-held; received and expected (events of the ticks in the run:
// sources × ticks); errors (failed sends and fallbacks in the adapter,
// rejections and failed or abandoned async deliveries in the proxy).
// ns/op is one mode's run, from the adapter's start. The figures also go
// to docs/bench/mtping-seed.json, docs/bench/mtping-seed.png and the
// generated block at the end of docs/benchmarks.md:
//
//	go test -run '^$' -bench Seed -benchtime 1x -timeout 30m ./test/mtping/
func BenchmarkSeed(b *testing.B) {
	cfg := seedConfig{
		Sources:     testproc.EnvInt(b, "SEED_SOURCES", 2000),
		Namespaces:  4,
		Schedule:    "* * * * *",
		Hold:        testproc.EnvDuration(b, "SEED_HOLD", 150*time.Second),
		Duration:    testproc.EnvDuration(b, "SEED_DURATION", 200*time.Second),
		StartSecond: 50,
	}
	if plainBins.adapter == "" {
		b.Fatal("TestMain built no binaries for benchmarks")
	}
	began := time.Now()
	machine := newMachine()
	namespaces := make([]string, cfg.Namespaces)
	for i := range namespaces {
		namespaces[i] = fmt.Sprintf("seed-%d", i)
	}
	c := newCluster(b, map[string]string{"buckets": "1"}, namespaces...)
	sk := startSeedSink(b, cfg.Hold)
	createSeedSources(b, c, cfg, namespaces, sk.URL+"/hold")

	var runs []*seedRun
	for _, mode := range []string{modeDirect, modeProxy} {
		b.Run("mode="+mode+"/sources="+strconv.Itoa(cfg.Sources), func(b *testing.B) {
			r := runSeedMode(b, c, sk, cfg, mode)
			r.report(b)
			runs = append(runs, r)
		})
	}
	if len(runs) != 2 {
		b.Fatalf("%d of 2 modes ran", len(runs))
	}
	machine.finish()
	out := seedOutput{Config: cfg, Machine: machine, Started: began, Runs: runs}
	if err := out.write(); err != nil {
		b.Fatal(err)
	}
}

// createSeedSources creates the PingSources, spread over namespaces, and
// makes them Ready with sink as their status.sinkUri, 32 at a time.
func createSeedSources(b testing.TB, c *cluster, cfg seedConfig, namespaces []string, sink string) {
	b.Helper()
	rc := rest.CopyConfig(c.Config)
	rc.QPS = -1 // no client-side rate limit
	ping := versioned.NewForConfigOrDie(rc)
	sinkURI, err := apis.ParseURL(sink)
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(c.ctx, 5*time.Minute)
	defer cancel()
	start := time.Now()
	work := make(chan int)
	errs := make(chan error, cfg.Sources)
	var wg sync.WaitGroup
	for range 32 {
		wg.Go(func() {
			for i := range work {
				ns := namespaces[i%len(namespaces)]
				if err := createSeedSource(ctx, ping, ns, fmt.Sprintf("seed-%05d", i), cfg.Schedule, sinkURI); err != nil {
					errs <- err
					cancel()
				}
			}
		})
	}
feed:
	for i := range cfg.Sources {
		select {
		case work <- i:
		case <-ctx.Done():
			break feed
		}
	}
	close(work)
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		b.Fatalf("creating PingSources: %v", err)
	}
	if ctx.Err() != nil {
		b.Fatalf("creating %d PingSources took over 5 minutes", cfg.Sources)
	}
	b.Logf("created %d Ready PingSources in %s", cfg.Sources, time.Since(start).Round(time.Millisecond))
}

// createSeedSource creates one PingSource and writes its status (Ready,
// sink) through the status subresource, as upstream's controller does.
func createSeedSource(ctx context.Context, ping versioned.Interface, ns, name, schedule string, sink *apis.URL) error {
	src, err := ping.SourcesV1().PingSources(ns).Create(ctx, &sourcesv1.PingSource{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       sourcesv1.PingSourceSpec{Schedule: schedule, ContentType: "application/json", Data: `{"seed":true}`},
	}, metav1.CreateOptions{})
	if err != nil {
		return err
	}
	src.Status.SinkURI = sink
	src.Status.SetConditions(apis.Conditions{{Type: apis.ConditionReady, Status: corev1.ConditionTrue}})
	_, err = ping.SourcesV1().PingSources(ns).UpdateStatus(ctx, src, metav1.UpdateOptions{})
	return err
}

// runSeedMode runs the adapter (and in proxy mode the proxy) for
// cfg.Duration, sampling every second, then stops both and lets the sink
// end what it holds.
func runSeedMode(b *testing.B, c *cluster, sk *seedSink, cfg seedConfig, mode string) *seedRun {
	b.Helper()
	r := &seedRun{Mode: mode}
	forwarding := map[string]string{} // off
	var px *proc
	var pxMetrics string
	if mode == modeProxy {
		px, pxMetrics = startSeedProxy(b)
		forwarding = map[string]string{config.ForwardingProxyKey: px.URL, config.ForwardingThresholdKey: "0"}
	}
	c.setConfigMap(b, config.ForwardingConfigName, forwarding)

	waitForSecond(b, cfg.StartSecond)
	b.ResetTimer()
	ad, adMetrics := startSeedAdapter(b, c, "seed-"+mode)
	begin := time.Now()
	eventually(b, time.Minute, "the adapter leads its bucket", func() bool {
		m, err := scrape(adMetrics)
		return err == nil && m.sum("kn_forward_mtping_leases_held") == 1
	})
	r.LeaderAfter = time.Since(begin).Seconds()
	before := sk.snapshot()

	smp := newSeedSampler(ad, px, adMetrics, pxMetrics, sk)
	end := begin.Add(cfg.Duration)
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for now := time.Now(); now.Before(end); now = time.Now() {
		select {
		case <-b.Context().Done():
			b.Fatal("interrupted")
		case <-ad.Done():
			b.Fatalf("the adapter exited: %v\n%s", ad.Wait(time.Second), ad.Logs.String())
		case <-tick.C:
			r.Samples = append(r.Samples, smp.sample(begin))
		}
	}
	b.StopTimer()
	r.finish(b, smp, begin, end, before, sk.snapshot(), cfg)

	// Stop: the sink answers what it holds, so that both processes drain
	// at once, then they get SIGTERM.
	sk.Release()
	stopSeedProc(b, ad)
	if px != nil {
		stopSeedProc(b, px)
	}
	eventually(b, time.Minute, "the sink holds nothing", func() bool {
		sk.Release()
		return sk.Stats().Held == 0
	})
	return r
}

// startSeedAdapter runs the adapter without the race detector and with
// the settings ConfigMap's GODEBUG, and returns it with its /metrics URL.
func startSeedAdapter(b testing.TB, c *cluster, name string) (*proc, string) {
	b.Helper()
	port, mport := freePort(b), freePort(b)
	p := start(b, name, plainBins.adapter, port, "/readiness",
		"KUBECONFIG="+c.Kubeconfig, "SYSTEM_NAMESPACE="+systemNamespace, "POD_NAME="+name,
		"PROBES_PORT="+strconv.Itoa(port), "METRICS_PORT="+strconv.Itoa(mport),
		"LOG_LEVEL=info", "DRAIN_TIMEOUT=5s", "GODEBUG="+config.ProxyGODEBUG)
	return p, "http://127.0.0.1:" + strconv.Itoa(mport) + "/metrics"
}

// startSeedProxy runs the proxy without the race detector, with loopback
// destinations allowed, limits above what the scenario holds and the
// manifests' GODEBUG, and returns it with its /metrics URL.
func startSeedProxy(b *testing.B) (*proc, string) {
	b.Helper()
	p := testproc.StartProxy(b, plainBins.proxy, freePort(b), freePort(b),
		"FORWARD_MAX_INFLIGHT=50000", "FORWARD_MAX_INFLIGHT_PER_DESTINATION=50000",
		"FORWARD_MAX_INFLIGHT_PER_TENANT=50000", "FORWARD_DRAIN_TIMEOUT=5s",
		"GODEBUG="+config.ProxyGODEBUG) // as the manifests run it
	return p, p.MetricsURL
}

// stopSeedProc sends SIGTERM and waits up to a minute for the exit.
func stopSeedProc(b *testing.B, p *proc) {
	b.Helper()
	p.Signal(syscall.SIGTERM)
	if err := p.Wait(time.Minute); err != nil {
		b.Errorf("%s exited with %v", p.Name, err)
	}
}

// waitForSecond waits until the wall clock is at second s of a minute, at
// least 2 s from now: so that each mode's first tick comes (60-s) s after
// its adapter starts.
func waitForSecond(b *testing.B, s int) {
	b.Helper()
	now := time.Now()
	at := now.Truncate(time.Minute).Add(time.Duration(s) * time.Second)
	for at.Before(now.Add(2 * time.Second)) {
		at = at.Add(time.Minute)
	}
	t := time.NewTimer(time.Until(at))
	defer t.Stop()
	select {
	case <-t.C:
	case <-b.Context().Done():
		b.Fatal("interrupted")
	}
}
