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

package e2e

import (
	"encoding/hex"
	"testing"
	"time"

	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"

	"knative.dev/event-forwarding-proxy/test/testproc"
)

// TestTracesExportedOverOTLP runs the proxy with the OTLP exporter on and
// checks that a call's server and client spans reach the collector in the
// caller's trace, and that the destination sees the client span as parent.
func TestTracesExportedOverOTLP(t *testing.T) {
	collector := testproc.NewOTLPReceiver(t)
	p := startProxy(t, "FORWARD_TRACE_EXPORTER=otlp", "OTEL_EXPORTER_OTLP_ENDPOINT="+collector.URL, "OTEL_BSP_SCHEDULE_DELAY=100")
	dest := testproc.NewSink(t, nil)
	const traceID = "0af7651916cd43dd8448eb211c80319c"
	resp := p.post(t, "x", "Kn-Forward-To", dest.URL, "Traceparent", "00-"+traceID+"-b7ad6b7169203331-01", "Ce-Id", "traced-1")
	resp.Body.Close()
	eventually(t, 20*time.Second, "the spans reach the collector", func() bool { return len(collector.OfTrace(traceID)) == 2 })

	var server, client *tracepb.Span
	for _, s := range collector.OfTrace(traceID) {
		switch s.Kind {
		case tracepb.Span_SPAN_KIND_SERVER:
			server = s
		case tracepb.Span_SPAN_KIND_CLIENT:
			client = s
		}
	}
	if server == nil || client == nil {
		t.Fatalf("want a server and a client span, got %v", collector.OfTrace(traceID))
	}
	if hex.EncodeToString(server.ParentSpanId) != "b7ad6b7169203331" || string(client.ParentSpanId) != string(server.SpanId) {
		t.Errorf("spans not chained caller -> server -> client")
	}
	want := "00-" + traceID + "-" + hex.EncodeToString(client.SpanId) + "-01"
	if got := dest.Requests()[0].Header.Get("Traceparent"); got != want {
		t.Errorf("destination got traceparent %q, want %q", got, want)
	}
}
