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

package testproc

import (
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	colmetrics "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	metricpb "go.opentelemetry.io/proto/otlp/metrics/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// OTLPReceiver is an OTLP/HTTP endpoint on loopback that keeps every span
// and metric it is sent; its URL is the endpoint, spans go to URL +
// "/v1/traces", metrics to URL + "/v1/metrics".
type OTLPReceiver struct {
	*httptest.Server
	mu      sync.Mutex
	spans   []*tracepb.Span
	metrics []*metricpb.Metric
}

// NewOTLPReceiver starts one, closed when the test ends.
func NewOTLPReceiver(tb testing.TB) *OTLPReceiver {
	r := &OTLPReceiver{}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		var answer proto.Message
		switch req.URL.Path {
		case "/v1/traces":
			var msg coltrace.ExportTraceServiceRequest
			if proto.Unmarshal(body, &msg) != nil {
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
			answer = &coltrace.ExportTraceServiceResponse{}
		case "/v1/metrics":
			var msg colmetrics.ExportMetricsServiceRequest
			if proto.Unmarshal(body, &msg) != nil {
				http.Error(w, "bad export", http.StatusBadRequest)
				return
			}
			r.mu.Lock()
			for _, rm := range msg.ResourceMetrics {
				for _, sm := range rm.ScopeMetrics {
					r.metrics = append(r.metrics, sm.Metrics...)
				}
			}
			r.mu.Unlock()
			answer = &colmetrics.ExportMetricsServiceResponse{}
		default:
			http.Error(w, "no such export", http.StatusNotFound)
			return
		}
		w.Header().Set("Content-Type", "application/x-protobuf")
		out, _ := proto.Marshal(answer)
		_, _ = w.Write(out)
	}))
	tb.Cleanup(r.Close)
	return r
}

// MetricNames returns the names of the metrics received so far.
func (r *OTLPReceiver) MetricNames() map[string]bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	names := map[string]bool{}
	for _, m := range r.metrics {
		names[m.Name] = true
	}
	return names
}

// OfTrace returns the spans received of the trace with hex id traceID.
func (r *OTLPReceiver) OfTrace(traceID string) []*tracepb.Span {
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
