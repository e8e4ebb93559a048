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

package proxy

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"knative.dev/event-forwarding-proxy/proxy/proxytest"
)

// observed is an in-process proxy with an in-memory metric reader and span
// recorder.
type observed struct {
	*testProxy
	reader *sdkmetric.ManualReader
	spans  *tracetest.SpanRecorder
}

func newObserved(t *testing.T, env map[string]string) *observed {
	t.Helper()
	return newObservedLogger(t, env, zap.NewNop().Sugar())
}

// newObservedLogger is newObserved with its logs going to logger.
func newObservedLogger(t *testing.T, env map[string]string, logger *zap.SugaredLogger) *observed {
	t.Helper()
	reader := sdkmetric.NewManualReader()
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	p := newTestProxyLogger(t, env, logger,
		WithMeterProvider(sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))), WithTracerProvider(tp))
	return &observed{testProxy: p, reader: reader, spans: spans}
}

// sum adds the points of an integer metric whose attributes include want.
func (o *observed) sum(t *testing.T, name string, want ...attribute.KeyValue) int64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := o.reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	var total int64
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != name {
				continue
			}
			var points []metricdata.DataPoint[int64]
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				points = d.DataPoints
			case metricdata.Gauge[int64]:
				points = d.DataPoints
			}
			for _, p := range points {
				ok := true
				for _, kv := range want {
					if v, found := p.Attributes.Value(kv.Key); !found || v != kv.Value {
						ok = false
					}
				}
				if ok {
					total += p.Value
				}
			}
		}
	}
	return total
}

// TestActiveGaugeEqualsHeldCalls holds sync and async calls and reads the
// in-flight gauges while they are held and after.
func TestActiveGaugeEqualsHeldCalls(t *testing.T) {
	o := newObserved(t, nil)
	hold := proxytest.NewHold(t)
	dest := proxytest.NewDestination(t, hold.Reply)
	c := h1Client(t)
	var pending []<-chan result
	for _, tenant := range []string{"a", "a", "b"} {
		req := o.newRequest(t, dest.URL, strings.NewReader("x"))
		req.Header.Set("Kn-Namespace", tenant)
		pending = append(pending, goDo(c, req))
	}
	req := o.newRequest(t, dest.URL, strings.NewReader("x"))
	req.Header.Set("Prefer", "respond-async")
	req.Header.Set("Kn-Namespace", "b")
	if resp, _ := do(t, c, req); resp.StatusCode != http.StatusAccepted {
		t.Fatalf("async call: %d", resp.StatusCode)
	}
	proxytest.Eventually(t, 5*time.Second, func() bool { return dest.Count() == 4 }, "four calls held")

	for _, tc := range []struct {
		name   string
		metric string
		attrs  []attribute.KeyValue
		want   int64
	}{
		{name: "all held", metric: metricActive, want: 4},
		{name: "held for tenant a", metric: metricTenantActive, attrs: []attribute.KeyValue{attribute.String("tenant", "a")}, want: 2},
		{name: "held for tenant b", metric: metricTenantActive, attrs: []attribute.KeyValue{attribute.String("tenant", "b")}, want: 2},
		{name: "async backlog", metric: metricAsyncPending, want: 1},
		{name: "capacity", metric: metricCapacity, want: 8},
		{name: "memory budget", metric: metricMemoryBudget, want: 256 << 20},
		{name: "memory reserved: the four calls' headers and the async body", metric: metricMemoryReserved, want: o.Budget.Reserved()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := o.sum(t, tc.metric, tc.attrs...); got != tc.want {
				t.Errorf("%s%v = %d, want %d", tc.metric, tc.attrs, got, tc.want)
			}
			if got := int64(o.Limiter.Inflight()); tc.metric == metricActive && got != tc.want {
				t.Errorf("the limiter holds %d", got)
			}
			if tc.metric == metricMemoryReserved && tc.want <= 4*int64(len("Kn-Forward-To: "+dest.URL)) {
				t.Errorf("four held calls reserve %d bytes, less than their Kn-Forward-To headers", tc.want)
			}
		})
	}
	hold.Release()
	for _, p := range pending {
		await(t, p)
	}
	proxytest.Eventually(t, 5*time.Second, func() bool { return o.sum(t, metricActive) == 0 }, "gauge back to 0")
	proxytest.Eventually(t, 5*time.Second, func() bool { return o.sum(t, metricMemoryReserved) == 0 }, "reserved bytes back to 0")
	if got := o.sum(t, metricAsyncDeliveries, attribute.String("outcome", "delivered")); got != 1 {
		t.Errorf("async deliveries = %d, want 1", got)
	}
	if got := o.sum(t, metricRequests, attribute.String("outcome", "forwarded"), attribute.String("code", "2xx")); got != 3 {
		t.Errorf("forwarded requests = %d, want 3", got)
	}
}

// TestLabelValuesAreCapped: a caller cannot grow the series without bound
// by inventing tenants.
func TestLabelValuesAreCapped(t *testing.T) {
	o := newObserved(t, map[string]string{"FORWARD_METRICS_MAX_LABEL_VALUES": "2"})
	hold := proxytest.NewHold(t)
	dest := proxytest.NewDestination(t, hold.Reply)
	c := h1Client(t)
	var pending []<-chan result
	for _, tenant := range []string{"t1", "t2", "t3", "t4"} {
		req := o.newRequest(t, dest.URL, nil)
		req.Header.Set("Kn-Namespace", tenant)
		pending = append(pending, goDo(c, req))
		proxytest.Eventually(t, 5*time.Second, func() bool { return dest.Count() == len(pending) }, "call held")
	}
	if got := o.sum(t, metricTenantActive, attribute.String("tenant", OtherLabel)); got != 2 {
		t.Errorf("tenant %q holds %d, want the 2 calls past the cap", OtherLabel, got)
	}
	if got := o.sum(t, metricTenantActive); got != 4 {
		t.Errorf("all tenants hold %d, want 4", got)
	}
	hold.Release()
	for _, p := range pending {
		await(t, p)
	}
}

// TestTracePropagation: the caller's trace continues through the proxy's
// server span and client span to the destination; probes make no span.
//
// Over HTTP/1.1 end to end, and over h2c end to end, where an async
// attempt runs without a goroutine of its own (delivery.Start).
func TestTracePropagation(t *testing.T) {
	for _, h2c := range []bool{false, true} {
		t.Run(map[bool]string{false: "http1", true: "h2c"}[h2c], func(t *testing.T) { testTracePropagation(t, h2c) })
	}
}

func testTracePropagation(t *testing.T, h2c bool) {
	var env map[string]string
	client := h1Client(t)
	if h2c {
		env, client = h2cLoopback, h2cClient(t)
	}
	o := newObserved(t, env)
	dest, _ := proxytest.NewCountedDestination(t, h2c, nil)
	const callerTrace = "4bf92f3577b34da6a3ce929d0e0e4736"
	const callerSpan = "00f067aa0ba902b7"
	for _, async := range []bool{false, true} {
		o.spans.Reset()
		req := o.newRequest(t, dest.URL, strings.NewReader("x"))
		req.Header.Set("Traceparent", "00-"+callerTrace+"-"+callerSpan+"-01")
		req.Header.Set("Baggage", "tenant=a")
		req.Header.Set("Ce-Id", "id-1")
		req.Header.Set("Ce-Type", "dev.knative.sources.ping")
		req.Header.Set("Ce-Source", "/apis/v1/namespaces/a/pingsources/p")
		if async {
			req.Header.Set("Prefer", "respond-async")
		}
		do(t, client, req)
		got := dest.Next(t)
		if h2c && got.ProtoMajor != 2 {
			t.Fatalf("async=%v: the destination got HTTP/%d, want h2c", async, got.ProtoMajor)
		}
		proxytest.Eventually(t, 5*time.Second, func() bool { return len(o.spans.Ended()) == 2 }, "two spans ended")

		var server, client sdktrace.ReadOnlySpan
		for _, s := range o.spans.Ended() {
			switch s.SpanKind() {
			case trace.SpanKindServer:
				server = s
			case trace.SpanKindClient:
				client = s
			}
		}
		if server == nil || client == nil {
			t.Fatalf("async=%v: spans %v, want one server and one client span", async, o.spans.Ended())
		}
		if server.Parent().SpanID().String() != callerSpan || server.SpanContext().TraceID().String() != callerTrace {
			t.Errorf("async=%v: the server span does not continue the caller's trace", async)
		}
		if client.Parent().SpanID() != server.SpanContext().SpanID() {
			t.Errorf("async=%v: the client span is not a child of the server span", async)
		}
		want := "00-" + callerTrace + "-" + client.SpanContext().SpanID().String() + "-01"
		if tp := got.Header.Get("Traceparent"); tp != want {
			t.Errorf("async=%v: destination got traceparent %q, want %q", async, tp, want)
		}
		if b := got.Header.Get("Baggage"); b != "tenant=a" {
			t.Errorf("async=%v: destination got baggage %q", async, b)
		}
		attrs := map[attribute.Key]string{}
		for _, kv := range server.Attributes() {
			attrs[kv.Key] = kv.Value.String()
		}
		for k, v := range map[attribute.Key]string{
			"cloudevents.event_id": "id-1", "cloudevents.event_type": "dev.knative.sources.ping",
			"cloudevents.event_source": "/apis/v1/namespaces/a/pingsources/p",
		} {
			if attrs[k] != v {
				t.Errorf("async=%v: server span %s = %q, want %q", async, k, attrs[k], v)
			}
		}
	}

	o.spans.Reset()
	for _, path := range []string{HealthPath, ReadyPath} {
		resp, _ := do(t, h1Client(t), mustGet(t, o.URL+path))
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: %d", path, resp.StatusCode)
		}
	}
	if n := len(o.spans.Ended()); n != 0 {
		t.Errorf("probes made %d spans", n)
	}
}

// TestRefusalSpanCarriesReason: a refused call's server span says why.
func TestRefusalSpanCarriesReason(t *testing.T) {
	o := newObserved(t, nil)
	do(t, h1Client(t), o.newRequest(t, "http://example.com/", nil))
	spans := o.spans.Ended()
	if len(spans) != 1 {
		t.Fatalf("%d spans, want 1", len(spans))
	}
	var reason string
	for _, kv := range spans[0].Attributes() {
		if kv.Key == "kn.forward.reason" {
			reason = kv.Value.AsString()
		}
	}
	if reason != string(ReasonDestinationDenied) {
		t.Errorf("span reason %q, want %q", reason, ReasonDestinationDenied)
	}
}

func mustGet(t *testing.T, url string) *http.Request {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	return req
}

// TestOneLogLinePerRefusedOrFailedCall: each call the proxy refuses or
// cannot complete is logged once, with reason, tenant, destination host and
// event id.
func TestOneLogLinePerRefusedOrFailedCall(t *testing.T) {
	core, logs := observer.New(zapcore.InfoLevel)
	p := newTestProxyLogger(t, nil, zap.New(core).Sugar())
	// A port a socket holds, not a closed listener's: another test's
	// server could be given that one, and answer.
	closedURL := "http://" + proxytest.NewRefusingAddr(t)
	for _, tc := range []struct {
		name, dest, msg, reason, host string
	}{
		{name: "refused", dest: "http://sink.ns.example.com/", msg: "Refused a call", reason: "destination_denied", host: "sink.ns.example.com"},
		{name: "failed", dest: closedURL, msg: "Call failed", reason: "unreachable", host: strings.TrimPrefix(closedURL, "http://")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			logs.TakeAll()
			req := p.newRequest(t, tc.dest, nil)
			req.Header.Set("Kn-Namespace", "tenant-a")
			req.Header.Set("Ce-Id", "ev-"+tc.name)
			do(t, h1Client(t), req)
			entries := logs.FilterMessage(tc.msg).AllUntimed()
			if len(entries) != 1 {
				t.Fatalf("%d %q lines, want 1: %v", len(entries), tc.msg, logs.AllUntimed())
			}
			f := entries[0].ContextMap()
			for k, v := range map[string]string{"reason": tc.reason, "tenant": "tenant-a", "destination": tc.host, "ceId": "ev-" + tc.name} {
				if f[k] != v {
					t.Errorf("%s = %v, want %q", k, f[k], v)
				}
			}
		})
	}
}
