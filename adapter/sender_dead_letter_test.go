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

package adapter

import (
	"encoding/base64"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"knative.dev/event-forwarding-proxy/config"
	"knative.dev/event-forwarding-proxy/internal/eventingtest"
)

// failWith answers every request with status and body.
func failWith(status int, body string) func(http.ResponseWriter, *http.Request, int) {
	return func(w http.ResponseWriter, _ *http.Request, _ int) {
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
	}
}

// TestSendDeadLettersDirect: an async event whose sink fails for the last
// time goes to its dead-letter sink, the Target's own or else the
// install's, with the extensions eventing's dispatcher writes for the
// same failure, and Send reports it dead-lettered, not failed.
func TestSendDeadLettersDirect(t *testing.T) {
	long := strings.Repeat("x", 2000) // knativeerrordata carries its first 768 bytes
	tests := []struct {
		name       string
		status     int    // the sink's answer to every attempt
		body       string // and its body
		own        bool   // the Target names its own dead-letter sink
		attempts   int    // at the sink
		wantStatus int    // knativeerrorcode
		wantData   string // knativeerrordata, decoded
	}{
		{name: "final 500, the install's sink", status: 500, body: "boom", attempts: 1, wantStatus: 500, wantData: "boom"},
		{name: "503 after every retry, the Target's own sink", status: 503, body: long, own: true, attempts: 3, wantStatus: 503, wantData: long[:768]},
		{name: "final 400 without a body", status: 400, attempts: 1, wantStatus: 400},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			sink := newServer(t, failWith(tc.status, tc.body))
			installs, own := newServer(t, nil), newServer(t, nil)
			s := testSender(SenderParams{Retries: 2}, newFakeClock())
			s.SetForwarding(config.Forwarding{DeadLetterSink: installs.url(t)})
			target := Target{URL: mustParse(t, sink.URL+"/in"), Namespace: "tenant"}
			want := installs
			if tc.own {
				target.DeadLetter, want = own.url(t), own
			}
			res, err := s.Send(ctxFor(t, 10*time.Second), target, testEvent("d-1"))
			if err != nil || !res.DeadLettered {
				t.Fatalf("Send: %v, dead-lettered %v; want no error, dead-lettered", err, res.DeadLettered)
			}
			if sink.count() != tc.attempts || res.Attempts != tc.attempts+1 {
				t.Errorf("the sink got %d attempts, the result counts %d; want %d and one more", sink.count(), res.Attempts, tc.attempts)
			}
			if installs.count()+own.count() != 1 || want.count() != 1 {
				t.Fatalf("the install's sink got %d, the Target's %d; want the one right sink once", installs.count(), own.count())
			}
			sent, got := sink.requests()[0], want.requests()[0]
			eventingtest.WantErrorExtensions(t, got.Header, got.Body, sent.Header, sent.Body, sink.URL+"/in", tc.wantStatus, []byte(tc.wantData))
			if got.Header.Get("Kn-Namespace") != "tenant" {
				t.Errorf("Kn-Namespace %q at the dead-letter sink, want the source's", got.Header.Get("Kn-Namespace"))
			}
		})
	}
}

// TestSendDeadLettersUnreachableSink: a sink that never answers is
// dead-lettered with eventing's code 500 and "dispatch error:".
func TestSendDeadLettersUnreachableSink(t *testing.T) {
	down := newServer(t, nil)
	downURL := down.url(t)
	down.Close()
	dls := newServer(t, nil)
	s := testSender(SenderParams{Retries: 1}, newFakeClock())
	s.SetForwarding(config.Forwarding{DeadLetterSink: dls.url(t)})
	res, err := s.Send(ctxFor(t, 10*time.Second), Target{URL: downURL}, testEvent("u-1"))
	if err != nil || !res.DeadLettered || res.StatusCode != 0 {
		t.Fatalf("Send: %v, result %+v; want dead-lettered with no status", err, res)
	}
	got := dls.requests()[0].Header
	data, err := base64.StdEncoding.DecodeString(got.Get("Ce-Knativeerrordata"))
	if got.Get("Ce-Knativeerrorcode") != "500" || err != nil || !strings.HasPrefix(string(data), "dispatch error: ") {
		t.Errorf("knativeerrorcode %q, knativeerrordata %q (%v); want 500 and \"dispatch error: ...\"", got.Get("Ce-Knativeerrorcode"), data, err)
	}
	if dest := got.Get("Ce-Knativeerrordest"); dest != downURL.String() {
		t.Errorf("knativeerrordest %q, want %q", dest, downURL)
	}
}

// TestSendDeadLetterSinkDown: when the dead-letter sink fails too, after
// its own retries, the send fails with both failures, logged once.
func TestSendDeadLetterSinkDown(t *testing.T) {
	sink := newServer(t, failWith(http.StatusBadRequest, "no"))
	dls := newServer(t, failWith(http.StatusBadGateway, ""))
	core, logs := observer.New(zapcore.WarnLevel)
	s := testSender(SenderParams{Retries: 2, Logger: zap.New(core).Sugar()}, newFakeClock())
	s.SetForwarding(config.Forwarding{DeadLetterSink: dls.url(t)})
	res, err := s.Send(ctxFor(t, 10*time.Second), Target{URL: sink.url(t)}, testEvent("l-1"))
	if !errors.Is(err, ErrUndelivered) || res.DeadLettered {
		t.Fatalf("Send: %v, dead-lettered %v; want ErrUndelivered", err, res.DeadLettered)
	}
	if msg := err.Error(); !strings.Contains(msg, "answered 400") || !strings.Contains(msg, "answered 502") {
		t.Errorf("error %q, want the sink's 400 and the dead-letter sink's 502", msg)
	}
	if dls.count() != 3 {
		t.Errorf("the dead-letter sink got %d attempts, want 3 (its own retries)", dls.count())
	}
	if n := logs.FilterMessage("Event not delivered").Len(); n != 1 || logs.Len() != 1 {
		t.Errorf("%d lines about the lost event, %d in all; want 1: %v", n, logs.Len(), logs.All())
	}
}

// TestSendSyncIsNotDeadLettered: the caller of a Sync send has the
// failure (and would get the dead-letter sink's answer as a reply).
func TestSendSyncIsNotDeadLettered(t *testing.T) {
	sink := newServer(t, failWith(http.StatusBadRequest, "no"))
	dls := newServer(t, nil)
	s := testSender(SenderParams{}, newFakeClock())
	s.SetForwarding(config.Forwarding{DeadLetterSink: dls.url(t)})
	res, err := s.Send(ctxFor(t, 10*time.Second), Target{URL: sink.url(t), Sync: true, DeadLetter: dls.url(t)}, testEvent("s-1"))
	if !errors.Is(err, ErrUndelivered) || res.DeadLettered || dls.count() != 0 {
		t.Errorf("Send: %v, dead-lettered %v, dead-letter sink got %d; want the failure, nothing dead-lettered", err, res.DeadLettered, dls.count())
	}
	if string(res.Body) != "no" {
		t.Errorf("reply %q, want the sink's answer", res.Body)
	}
}

// TestSendThroughProxyDeliverySpec: a hand-off carries the install's
// delivery keys, and the Target's own dead-letter sink over the install's,
// for the proxy to do what the Sender would; a Sync call carries none.
func TestSendThroughProxyDeliverySpec(t *testing.T) {
	proxy := newServer(t, statuses([]int{http.StatusAccepted}, nil))
	sink := newServer(t, nil)
	installs, own := mustParse(t, "http://dls.install.svc/failed"), mustParse(t, "http://dls.tenant.svc/")
	tests := []struct {
		name   string
		target Target
		want   map[string]string
	}{
		{name: "the install's", target: Target{URL: sink.url(t)}, want: map[string]string{
			"Kn-Forward-Dead-Letter-To": installs.String(), "Kn-Forward-Backoff-Policy": "linear", "Kn-Forward-Retry-After-Max": "PT0S"}},
		{name: "the Target's own", target: Target{URL: sink.url(t), DeadLetter: own}, want: map[string]string{
			"Kn-Forward-Dead-Letter-To": own.String(), "Kn-Forward-Backoff-Policy": "linear", "Kn-Forward-Retry-After-Max": "PT0S"}},
		{name: "sync", target: Target{URL: sink.url(t), Sync: true, DeadLetter: own}, want: map[string]string{
			"Kn-Forward-Dead-Letter-To": "", "Kn-Forward-Backoff-Policy": "", "Kn-Forward-Retry-After-Max": ""}},
	}
	s := testSender(SenderParams{}, newFakeClock())
	c := forwardingTo(t, proxy)
	c.DeadLetterSink, c.LinearBackoff, c.IgnoreRetryAfter = installs, true, true
	s.SetForwarding(c)
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := s.Send(ctxFor(t, 10*time.Second), tc.target, testEvent("e")); err != nil {
				t.Fatal(err)
			}
			h := proxy.requests()[i].Header
			for k, v := range tc.want {
				if h.Get(k) != v {
					t.Errorf("%s: %q, want %q", k, h.Get(k), v)
				}
			}
		})
	}
}
