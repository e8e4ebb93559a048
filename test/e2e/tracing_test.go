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
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// otlpReceiver is an OTLP/HTTP trace endpoint on loopback that keeps every
// span it is sent.
type otlpReceiver struct {
	*httptest.Server
	mu    sync.Mutex
	spans []*tracepb.Span
}

func newOTLPReceiver(t *testing.T) *otlpReceiver {
	r := &otlpReceiver{}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		var msg coltrace.ExportTraceServiceRequest
		if req.URL.Path != "/v1/traces" || proto.Unmarshal(body, &msg) != nil {
			http.Error(w, "bad export", http.StatusBadRequest)
			return
		}
		r.mu.Lock()
		for _, rs := range msg.ResourceSpans {
			for _, ss := range rs.ScopeSpans {
				r.spans = append(r.spans, ss.Spans...)
			}
		}
		r.mu.Unlock()
		w.Header().Set("Content-Type", "application/x-protobuf")
		out, _ := proto.Marshal(&coltrace.ExportTraceServiceResponse{})
		_, _ = w.Write(out)
	}))
	t.Cleanup(r.Close)
	return r
}

func (r *otlpReceiver) ofTrace(traceID string) []*tracepb.Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []*tracepb.Span
	for _, s := range r.spans {
		if hex.EncodeToString(s.TraceId) == traceID {
			out = append(out, s)
		}
	}
	return out
}

// TestTracesExportedOverOTLP runs the proxy with the OTLP exporter on and
// checks that a call's server and client spans reach the collector in the
// caller's trace, and that the destination sees the client span as parent.
func TestTracesExportedOverOTLP(t *testing.T) {
	collector := newOTLPReceiver(t)
	p := startProxy(t, "FORWARD_TRACE_EXPORTER=otlp", "OTEL_EXPORTER_OTLP_ENDPOINT="+collector.URL, "OTEL_BSP_SCHEDULE_DELAY=100")
	dest := newSink(t, false, nil)
	const traceID = "0af7651916cd43dd8448eb211c80319c"
	resp := p.post(t, "x", "Kn-Forward-To", dest.URL, "Traceparent", "00-"+traceID+"-b7ad6b7169203331-01", "Ce-Id", "traced-1")
	resp.Body.Close()
	eventually(t, 20*time.Second, "the spans reach the collector", func() bool { return len(collector.ofTrace(traceID)) == 2 })

	var server, client *tracepb.Span
	for _, s := range collector.ofTrace(traceID) {
		switch s.Kind {
		case tracepb.Span_SPAN_KIND_SERVER:
			server = s
		case tracepb.Span_SPAN_KIND_CLIENT:
			client = s
		}
	}
	if server == nil || client == nil {
		t.Fatalf("want a server and a client span, got %v", collector.ofTrace(traceID))
	}
	if hex.EncodeToString(server.ParentSpanId) != "b7ad6b7169203331" || string(client.ParentSpanId) != string(server.SpanId) {
		t.Errorf("spans not chained caller -> server -> client")
	}
	want := "00-" + traceID + "-" + hex.EncodeToString(client.SpanId) + "-01"
	if got := dest.requests()[0].Header.Get("Traceparent"); got != want {
		t.Errorf("destination got traceparent %q, want %q", got, want)
	}
}
