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
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	duckv1 "knative.dev/pkg/apis/duck/v1"

	sourcesv1 "knative.dev/eventing/pkg/apis/sources/v1"

	"knative.dev/event-forwarding-proxy/test/testproc"
)

// fastElection makes Leases move within seconds.
var fastElection = map[string]string{"buckets": "2", "lease-duration": "3s", "renew-deadline": "2s", "retry-period": "500ms"}

const every2s = "@every 2s"

// TestOneAdapter runs one adapter process and checks what reaches the
// sinks: the events themselves, schedule changes, and the route (direct,
// or through the proxy above the threshold).
func TestOneAdapter(t *testing.T) {
	t.Parallel()
	c := newCluster(t, maps.Clone(fastElection), "tenant-a", "tenant-b")
	sk := newSink(t)
	startAdapter(t, c, "adapter-0")

	t.Run("events", func(t *testing.T) { testEvents(t, c, sk) })
	t.Run("update and delete", func(t *testing.T) { testUpdateDelete(t, c, sk) })
	t.Run("threshold", func(t *testing.T) { testThreshold(t, c, sk) })
}

// TestLoggingFollowsUpstream: the adapter logs in the format and at the
// level of K_LOGGING_CONFIG, as upstream's adapter does, and LOG_LEVEL
// overrides that level.
func TestLoggingFollowsUpstream(t *testing.T) {
	t.Parallel()
	c := newCluster(t, maps.Clone(fastElection))
	lines := func(p *proc) (started bool, levels map[string]int) {
		levels = map[string]int{}
		for _, l := range strings.Split(strings.TrimSpace(p.Logs.String()), "\n") {
			var e struct{ Msg, Level, LogLevel string }
			if json.Unmarshal([]byte(l), &e) != nil || e.Msg == "" {
				continue // not a line of the configured format
			}
			levels[e.Level]++
			started = started || (e.Msg == "Starting" && e.LogLevel == "debug")
		}
		return started, levels
	}
	upstream := startAdapter(t, c, "adapter-upstream-logging")
	if started, levels := lines(upstream); !started || levels["debug"] == 0 {
		t.Errorf("with config-logging at debug: started at debug %v, lines by level %v; want both in its format", started, levels)
	}
	quiet := startAdapter(t, c, "adapter-warn", "LOG_LEVEL=warn")
	if _, levels := lines(quiet); levels["debug"]+levels["info"] > 0 {
		t.Errorf("LOG_LEVEL=warn over config-logging's debug: lines by level %v", levels)
	}
}

// TestTracesThroughTheProxy: with config-observability's tracing in
// K_OBSERVABILITY_CONFIG, each send is a client span exported over OTLP,
// and its W3C context reaches the sink through the proxy, direct too.
func TestTracesThroughTheProxy(t *testing.T) {
	t.Parallel()
	c := newCluster(t, maps.Clone(fastElection), "tenant-a")
	collector := testproc.NewOTLPReceiver(t)
	sk := newSink(t)
	startAdapter(t, c, "adapter-traced",
		`K_OBSERVABILITY_CONFIG={"tracing":{"protocol":"http/protobuf","endpoint":"`+collector.URL+`/v1/traces","samplingRate":1}}`,
		"OTEL_BSP_SCHEDULE_DELAY=100")
	spec := sourcesv1.PingSourceSpec{Schedule: every2s, ContentType: "application/json", Data: `{"traced":true}`}
	c.createSource(t, "tenant-a", "traced", spec, sk.url("traced"), sourceStatus{})
	traced := func(proxied bool) {
		t.Helper()
		var r received
		eventually(t, 20*time.Second, "an event arrives with a traceparent", func() bool {
			for _, got := range sk.got("traced", time.Time{}) {
				if got.viaProxy() == proxied && got.header.Get("Traceparent") != "" {
					r = got
					return true
				}
			}
			return false
		})
		parts := strings.Split(r.header.Get("Traceparent"), "-")
		if len(parts) != 4 || parts[3] != "01" {
			t.Fatalf("traceparent %q: want a sampled W3C trace context", r.header.Get("Traceparent"))
		}
		eventually(t, 20*time.Second, "the send's span reaches the collector", func() bool {
			for _, sp := range collector.OfTrace(parts[1]) {
				if hex.EncodeToString(sp.SpanId) == parts[2] && sp.Kind == tracepb.Span_SPAN_KIND_CLIENT {
					return true
				}
			}
			return false
		})
	}
	traced(false)
	p := startProxy(t)
	c.setForwarding(t, p.URL, "0")
	traced(true)
}

// TestMetricsPushedOverOTLP: with K_OBSERVABILITY_CONFIG's metrics on
// OTLP, the adapter pushes its metrics (the Sender's among them) to the
// endpoint, as upstream's adapter does, and still serves them on
// METRICS_PORT, which the kit and the HPA scrape.
func TestMetricsPushedOverOTLP(t *testing.T) {
	t.Parallel()
	c := newCluster(t, maps.Clone(fastElection), "tenant-a")
	collector := testproc.NewOTLPReceiver(t)
	sk := newSink(t)
	metricsPort := freePort(t)
	startAdapter(t, c, "adapter-otlp-metrics",
		`K_OBSERVABILITY_CONFIG={"metrics":{"protocol":"http/protobuf","endpoint":"`+collector.URL+`/v1/metrics","exportInterval":500000000}}`,
		"METRICS_PORT="+strconv.Itoa(metricsPort))
	spec := sourcesv1.PingSourceSpec{Schedule: every2s, ContentType: "application/json", Data: `{"metrics":true}`}
	c.createSource(t, "tenant-a", "counted", spec, sk.url("counted"), sourceStatus{})
	want := []string{"kn_forward_mtping_leases_held", "kn_forward_mtping_tick_lateness", "kn_forward_sender_sends", "kn_forward_sender_inflight"}
	eventually(t, 30*time.Second, "the adapter's metrics reach the collector", func() bool {
		got := collector.MetricNames()
		for _, name := range want {
			if !got[name] {
				return false
			}
		}
		return true
	})
	resp, err := http.Get("http://127.0.0.1:" + strconv.Itoa(metricsPort) + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	for _, family := range []string{"kn_forward_mtping_leases_held", "kn_forward_sender_sends_total"} {
		if !strings.Contains(string(body), "\n"+family) {
			t.Errorf("METRICS_PORT no longer serves %s", family)
		}
	}
}

// testEvents creates PingSources of every kind and checks their events.
func testEvents(t *testing.T, c *cluster, sk *sink) {
	c.serviceAccount(t, "tenant-b", "oidc-ping")
	binary := []byte{0, 1, 2, 0xff, 'p', 'i', 'n', 'g'}
	tests := []struct {
		name, ns    string
		spec        sourcesv1.PingSourceSpec
		status      sourceStatus
		contentType string
		data        string
		ext         map[string]any
		account     string // the OIDC subject the sink sees
	}{{
		name: "json", ns: "tenant-a",
		spec:        sourcesv1.PingSourceSpec{Schedule: every2s, ContentType: "application/json", Data: `{"hello":"world"}`},
		contentType: "application/json", data: `{"hello":"world"}`,
	}, {
		name: "base64", ns: "tenant-a",
		spec:        sourcesv1.PingSourceSpec{Schedule: every2s, ContentType: "application/octet-stream", DataBase64: base64.StdEncoding.EncodeToString(binary)},
		contentType: "application/octet-stream", data: string(binary),
	}, {
		name: "cron-timezone-overrides", ns: "tenant-b",
		spec: sourcesv1.PingSourceSpec{Schedule: "*/2 * * * * *", Timezone: "Asia/Kolkata", ContentType: "text/plain", Data: "plain",
			SourceSpec: duckv1.SourceSpec{CloudEventOverrides: &duckv1.CloudEventOverrides{Extensions: map[string]string{"team": "blue"}}}},
		contentType: "text/plain", data: "plain", ext: map[string]any{"team": "blue"},
	}, {
		name: "oidc", ns: "tenant-b",
		spec:   sourcesv1.PingSourceSpec{Schedule: every2s, ContentType: "application/json", Data: `{}`},
		status: sourceStatus{audience: "sink-audience", account: "oidc-ping"}, contentType: "application/json", data: `{}`,
		account: "system:serviceaccount:tenant-b:oidc-ping",
	}}
	start := time.Now()
	for _, tc := range tests {
		c.createSource(t, tc.ns, tc.name, tc.spec, sk.url(tc.name), tc.status)
		t.Cleanup(func() { c.deleteSource(t, tc.ns, tc.name) })
	}
	c.createSource(t, "tenant-a", "not-ready", sourcesv1.PingSourceSpec{Schedule: every2s}, sk.url("not-ready"), sourceStatus{notReady: true})
	t.Cleanup(func() { c.deleteSource(t, "tenant-a", "not-ready") })
	eventually(t, 20*time.Second, "every Ready source fired 3 times", func() bool {
		for _, tc := range tests {
			if len(sk.got(tc.name, start)) < 3 {
				return false
			}
		}
		return true
	})

	ids := map[string]bool{}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rs := sk.got(tc.name, start)
			for i, r := range rs {
				e := r.event
				if e.Type() != "dev.knative.sources.ping" || e.Source() != fmt.Sprintf("/apis/v1/namespaces/%s/pingsources/%s", tc.ns, tc.name) {
					t.Errorf("event %d: type %q, source %q", i, e.Type(), e.Source())
				}
				if e.DataContentType() != tc.contentType || string(e.Data()) != tc.data {
					t.Errorf("event %d: content type %q, data %q; want %q, %q", i, e.DataContentType(), e.Data(), tc.contentType, tc.data)
				}
				for k, v := range tc.ext {
					if got := e.Extensions()[k]; got != v {
						t.Errorf("event %d: extension %s = %v, want %v", i, k, got, v)
					}
				}
				if ids[e.ID()] || e.ID() == "" {
					t.Errorf("event %d: id %q is not fresh", i, e.ID())
				}
				ids[e.ID()] = true
				// The time is the send's: after the source was created and
				// not after the event arrived; countTicks below checks that
				// the times move one tick at a time. How long a send took
				// (a token to mint on a loaded machine) bounds nothing.
				if e.Time().Before(start) || e.Time().After(r.at) {
					t.Errorf("event %d: time %v, received %v, sources created from %v", i, e.Time(), r.at, start)
				}
				if got := r.header.Get("Kn-Namespace"); got != tc.ns {
					t.Errorf("event %d: Kn-Namespace %q, want %q", i, got, tc.ns)
				}
				if r.viaProxy() {
					t.Errorf("event %d came through the proxy, which is not configured", i)
				}
				switch auth := r.header.Get("Authorization"); {
				case tc.account == "" && auth != "":
					t.Errorf("event %d: Authorization without OIDC", i)
				case tc.account != "":
					sub, aud := jwtClaims(t, auth)
					if sub != tc.account || len(aud) != 1 || aud[0] != "sink-audience" {
						t.Errorf("event %d: token of %q for %v, want %q for sink-audience", i, sub, aud, tc.account)
					}
				}
			}
			if tl := countTicks(rs[1:], 2*time.Second); tl.duplicates != 0 || tl.missing != 0 {
				t.Errorf("every 2 s: %+v", tl)
			}
		})
	}
	if n := len(sk.got("not-ready", start)); n != 0 {
		t.Errorf("a PingSource that is not Ready fired %d times", n)
	}
}

// testUpdateDelete changes a source's schedule and data, then deletes it.
func testUpdateDelete(t *testing.T, c *cluster, sk *sink) {
	const ns, name = "tenant-a", "changing"
	c.createSource(t, ns, name, sourcesv1.PingSourceSpec{Schedule: every2s, Data: "v1"}, sk.url(name), sourceStatus{})
	start := time.Now()
	eventually(t, 10*time.Second, "two v1 events", func() bool { return len(sk.got(name, start)) >= 2 })

	c.updateSpec(t, ns, name, func(s *sourcesv1.PingSourceSpec) { s.Schedule, s.Data = "@every 1s", "v2" })
	updated := time.Now()
	var v2 []received
	eventually(t, 10*time.Second, "four v2 events", func() bool {
		v2 = v2[:0]
		for _, r := range sk.got(name, updated) {
			if string(r.event.Data()) == "v2" {
				v2 = append(v2, r)
			}
		}
		return len(v2) >= 4
	})
	if tl := countTicks(v2, time.Second); tl.duplicates != 0 || tl.missing != 0 {
		t.Errorf("every 1 s after the update: %+v", tl)
	}
	if late := sk.got(name, v2[0].at); string(late[len(late)-1].event.Data()) != "v2" {
		t.Error("v1 events after the first v2 one")
	}

	c.deleteSource(t, ns, name)
	// A tick already started before the adapter saw the deletion may land
	// up to the spread (500 ms) later.
	deleted := time.Now().Add(time.Second)
	consistently(t, 3*time.Second, "no event after the deletion", func() bool { return len(sk.got(name, deleted)) == 0 })
}

// testThreshold switches the route: direct while the adapter serves no
// more sources than the threshold, through the proxy above it, direct
// again under 90 % of it.
func testThreshold(t *testing.T, c *cluster, sk *sink) {
	const ns = "tenant-a"
	p := startProxy(t)
	c.setForwarding(t, p.URL, "2")
	t.Cleanup(func() { c.setForwarding(t, "", "500") })

	route := func(names []string, from time.Time, proxied bool) func() bool {
		return func() bool {
			for _, n := range names {
				rs := sk.got(n, from)
				if len(rs) < 2 {
					return false
				}
				for _, r := range rs {
					if r.viaProxy() != proxied {
						return false
					}
				}
			}
			return true
		}
	}
	spec := sourcesv1.PingSourceSpec{Schedule: every2s, ContentType: "application/json", Data: `{"route":true}`}
	c.createSource(t, ns, "route-1", spec, sk.url("route-1"), sourceStatus{})
	c.createSource(t, ns, "route-2", spec, sk.url("route-2"), sourceStatus{})
	start := time.Now()
	eventually(t, 10*time.Second, "2 sources (threshold 2) fire directly", route([]string{"route-1", "route-2"}, start, false))

	c.createSource(t, ns, "route-3", spec, sk.url("route-3"), sourceStatus{})
	third := time.Now().Add(time.Second) // ticks already under way may still go direct
	all := []string{"route-1", "route-2", "route-3"}
	eventually(t, 10*time.Second, "3 sources fire through the proxy", route(all, third, true))
	for _, n := range all {
		for _, r := range sk.got(n, third) {
			if r.event.Type() != "dev.knative.sources.ping" || string(r.event.Data()) != `{"route":true}` || r.header.Get("Kn-Namespace") != ns {
				t.Errorf("%s through the proxy: type %q, data %q, Kn-Namespace %q", n, r.event.Type(), r.event.Data(), r.header.Get("Kn-Namespace"))
			}
		}
	}

	c.deleteSource(t, ns, "route-2")
	c.deleteSource(t, ns, "route-3")
	back := time.Now().Add(time.Second)
	eventually(t, 10*time.Second, "1 source fires directly again", route([]string{"route-1"}, back, false))
	c.deleteSource(t, ns, "route-1")
}
