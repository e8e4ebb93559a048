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
	"bytes"
	"encoding/base64"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"knative.dev/event-forwarding-proxy/internal/eventingtest"
	"knative.dev/event-forwarding-proxy/proxy/proxytest"
)

// failing answers every request with status and body.
func failing(status int, body string) proxytest.Reply {
	return func(w http.ResponseWriter, _ *http.Request, _ int) {
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
	}
}

// deadLetterHandOff hands an event of header h and body off to tp for
// dest, naming dls as its dead-letter sink, with one retry, and wants 202.
func deadLetterHandOff(t *testing.T, tp *testProxy, dest, dls string, h http.Header, body []byte) {
	t.Helper()
	req := tp.newRequest(t, dest, bytes.NewReader(body))
	for k, v := range h {
		req.Header[k] = v
	}
	req.Header.Set("Prefer", "respond-async")
	req.Header.Set("Authorization", "Bearer for-the-destination")
	req.Header.Set("Kn-Forward-Retry", "1")
	req.Header.Set("Kn-Forward-Dead-Letter-To", dls)
	if resp, b := do(t, h1Client(t), req); resp.StatusCode != http.StatusAccepted {
		t.Fatalf("hand-off: %d %q, want 202", resp.StatusCode, b)
	}
}

// TestDeadLetterSink: once an async event's last attempt fails, the
// dead-letter sink gets it, binary or structured, with the extensions
// eventing's dispatcher writes for the same failure.
func TestDeadLetterSink(t *testing.T) {
	binary := http.Header{"Ce-Specversion": {"1.0"}, "Ce-Id": {"b-1"}, "Ce-Source": {"/e2e"}, "Ce-Type": {"t"},
		"Content-Type": {"application/json"}}
	structured := http.Header{"Content-Type": {"application/cloudevents+json"}}
	structuredBody := []byte(`{"specversion":"1.0","id":"s-1","source":"/e2e","type":"t","datacontenttype":"application/json","data":{"x":1}}`)
	for _, tc := range []struct {
		name   string
		header http.Header
		body   []byte
	}{{"binary", binary, []byte(`{"x":1}`)}, {"structured", structured, structuredBody}} {
		t.Run(tc.name, func(t *testing.T) {
			dest := proxytest.NewDestination(t, failing(http.StatusInternalServerError, "boom"))
			dls := proxytest.NewDestination(t, nil)
			o := newObserved(t, nil)
			deadLetterHandOff(t, o.testProxy, dest.URL+"/in", dls.URL+"/dead", tc.header, tc.body)

			got := dls.Next(t)
			if got.RequestURI != "/dead" {
				t.Errorf("the dead-letter sink got %s, want /dead", got.RequestURI)
			}
			if tc.name == "binary" && !bytes.Equal(got.Body, tc.body) {
				t.Errorf("body = %q, want the event's %q byte for byte", got.Body, tc.body)
			}
			for k := range got.Header {
				if strings.HasPrefix(k, "Kn-Forward-") || k == "Authorization" {
					t.Errorf("%s reached the dead-letter sink", k)
				}
			}
			if a := dest.Requests()[0].Header.Get("Authorization"); a != "Bearer for-the-destination" {
				t.Errorf("the destination got Authorization %q, want the caller's", a)
			}
			eventingtest.WantErrorExtensions(t, got.Header, got.Body, tc.header, tc.body, dest.URL+"/in", 500, []byte("boom"))
			proxytest.Eventually(t, 5*time.Second, func() bool { return o.async.Pending() == 0 }, "the event's delivery ends")
			if n := dest.Count(); n != 2 {
				t.Errorf("the destination got %d attempts, want 2 (one retry)", n)
			}
			if n := o.sum(t, metricAsyncDeliveries, attribute.String("outcome", "dead_lettered")); n != 1 {
				t.Errorf("%s{outcome=dead_lettered} = %d, want 1", metricAsyncDeliveries, n)
			}
			wantDeadLetters(t, o, "delivered", "5xx")
		})
	}
}

// wantDeadLetters checks that kn_forward_dead_letters_total counts one
// event, with outcome and reason.
func wantDeadLetters(t *testing.T, o *observed, outcome, reason string) {
	t.Helper()
	if n := o.sum(t, metricDeadLetters); n != 1 {
		t.Errorf("%s = %d, want 1", metricDeadLetters, n)
	}
	if n := o.sum(t, metricDeadLetters, attribute.String("outcome", outcome), attribute.String("reason", reason)); n != 1 {
		t.Errorf("%s{outcome=%s,reason=%s} = %d, want 1", metricDeadLetters, outcome, reason, n)
	}
}

// TestDeadLetterWithoutAnswer: a destination that never answers is
// dead-lettered with eventing's code 500 and "dispatch error:".
func TestDeadLetterWithoutAnswer(t *testing.T) {
	dls := proxytest.NewDestination(t, nil)
	o := newObserved(t, nil)
	h := http.Header{"Ce-Specversion": {"1.0"}, "Ce-Id": {"n-1"}, "Ce-Source": {"/e2e"}, "Ce-Type": {"t"}}
	deadLetterHandOff(t, o.testProxy, "http://"+proxytest.NewRefusingAddr(t)+"/", dls.URL, h, []byte("x"))
	got := dls.Next(t)
	proxytest.Eventually(t, 5*time.Second, func() bool { return o.async.Pending() == 0 }, "the event's delivery ends")
	wantDeadLetters(t, o, "delivered", "unreachable")
	if code := got.Header.Get("Ce-Knativeerrorcode"); code != "500" {
		t.Errorf("knativeerrorcode = %q, want 500", code)
	}
	data, err := base64.StdEncoding.DecodeString(got.Header.Get("Ce-Knativeerrordata"))
	if err != nil || !strings.HasPrefix(string(data), "dispatch error: ") {
		t.Errorf("knativeerrordata = %q (%v), want base64 of \"dispatch error: ...\"", data, err)
	}
}

// TestDeadLetterSinkDown: when the dead-letter sink fails too, after its
// own retries, the event is logged with both failures.
func TestDeadLetterSinkDown(t *testing.T) {
	dest := proxytest.NewDestination(t, failing(http.StatusServiceUnavailable, ""))
	dls := proxytest.NewDestination(t, failing(http.StatusBadGateway, ""))
	core, logs := observer.New(zapcore.ErrorLevel)
	o := newObservedLogger(t, nil, zap.New(core).Sugar())
	deadLetterHandOff(t, o.testProxy, dest.URL, dls.URL, http.Header{"Ce-Id": {"d-1"}}, []byte("x"))
	proxytest.Eventually(t, 5*time.Second, func() bool { return o.async.Pending() == 0 }, "the event's delivery ends")
	wantDeadLetters(t, o, "failed", "5xx")
	if n := dls.Count(); n != 2 {
		t.Errorf("the dead-letter sink got %d attempts, want 2 (its own retry)", n)
	}
	lines := logs.FilterMessage("Async delivery and its dead-lettering failed").All()
	if len(lines) != 1 {
		t.Fatalf("%d lines about the lost event, want 1: %v", len(lines), logs.All())
	}
	f := lines[0].ContextMap()
	if f["ceId"] != "d-1" || f["status"] != int64(502) || !strings.HasPrefix(f["destinationFailure"].(string), "status 503") {
		t.Errorf("the line says %v, want event d-1, the sink's 502 and the destination's 503", f)
	}
}

// TestDeadLetterRefused: a dead-letter sink the caller could not name as
// its destination, or on a synchronous call, is refused before the 202.
func TestDeadLetterRefused(t *testing.T) {
	dest := proxytest.NewDestination(t, nil)
	tp := newTestProxy(t, nil)
	for _, tc := range []struct {
		dls    string
		async  bool
		reason Reason
	}{
		{dls: dest.URL, async: false, reason: ReasonBadRequest},
		{dls: "sink/relative", async: true, reason: ReasonBadDestination},
		{dls: "http://169.254.169.254/", async: true, reason: ReasonDestinationDenied},
		{dls: "http://dead.example/", async: true, reason: ReasonDestinationDenied},
	} {
		req := tp.newRequest(t, dest.URL, bytes.NewReader(event))
		if tc.async {
			req.Header.Set("Prefer", "respond-async")
		}
		req.Header.Set("Kn-Forward-Dead-Letter-To", tc.dls)
		resp, body := do(t, h1Client(t), req)
		wantProxyError(t, resp, body, tc.reason)
	}
	if n := dest.Count(); n != 0 {
		t.Errorf("%d requests reached the destination, want none", n)
	}
}

// TestDeadLetterKeepsTheSlot: an event on its way to its dead-letter sink
// keeps its admission slot, so failing events hold no more than the
// pod's limit.
func TestDeadLetterKeepsTheSlot(t *testing.T) {
	dest := proxytest.NewDestination(t, failing(http.StatusBadRequest, "no"))
	hold := proxytest.NewHold(t)
	dls := proxytest.NewDestination(t, hold.Reply)
	tp := newTestProxy(t, nil) // FORWARD_MAX_INFLIGHT 8
	for range 8 {
		deadLetterHandOff(t, tp, dest.URL, dls.URL, http.Header{"Ce-Id": {"k"}}, []byte("x"))
	}
	proxytest.Eventually(t, 5*time.Second, func() bool { return dls.Count() == 8 }, "the 8 events held at the dead-letter sink")
	req := tp.newRequest(t, dest.URL, bytes.NewReader(event))
	req.Header.Set("Prefer", "respond-async")
	resp, body := do(t, h1Client(t), req)
	wantProxyError(t, resp, body, ReasonOverloaded)
	hold.Release()
	proxytest.Eventually(t, 5*time.Second, func() bool { return tp.Limiter.Inflight() == 0 }, "every slot back")
}
