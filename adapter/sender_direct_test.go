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
	"context"
	"encoding/pem"
	"errors"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/google/go-cmp/cmp"

	"knative.dev/event-forwarding-proxy/config"
)

func TestSendDirectEncodesBinaryWithNamespace(t *testing.T) {
	sink := newServer(t, nil)
	s := testSender(SenderParams{}, newFakeClock())
	res, err := s.Send(ctxFor(t, 10*time.Second), Target{URL: sink.url(t), Namespace: "tenant"}, testEvent("id-1"))
	if err != nil {
		t.Fatal(err)
	}
	if res.Route != RouteDirect || res.StatusCode != http.StatusOK || res.Attempts != 1 || res.Fallback {
		t.Errorf("result %+v", res)
	}
	reqs := sink.requests()
	if len(reqs) != 1 {
		t.Fatalf("sink got %d requests", len(reqs))
	}
	h := reqs[0].Header
	got := map[string]string{}
	for _, k := range []string{"Ce-Id", "Ce-Source", "Ce-Type", "Ce-Specversion", "Content-Type", "Kn-Namespace", "Prefer", "Kn-Forward-To"} {
		got[k] = h.Get(k)
	}
	want := map[string]string{
		"Ce-Id": "id-1", "Ce-Source": "/apis/v1/namespaces/tenant/pingsources/p", "Ce-Type": "dev.knative.sources.ping",
		"Ce-Specversion": "1.0", "Content-Type": "application/json", "Kn-Namespace": "tenant", "Prefer": "", "Kn-Forward-To": "",
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("headers (-want +got):\n%s", d)
	}
	if string(reqs[0].Body) != `{"hello":"world"}` {
		t.Errorf("body %q", reqs[0].Body)
	}
}

func TestSendDirectRetries(t *testing.T) {
	ra := func(v string) http.Header { return http.Header{"Retry-After": {v}} }
	ms := time.Millisecond
	tests := []struct {
		name      string
		codes     []int
		headers   map[int]http.Header
		params    SenderParams
		config    config.Forwarding // config-event-forwarding's delivery keys
		wantErr   bool
		attempts  int
		wantWaits []time.Duration
	}{
		{name: "success at once", codes: []int{200}, attempts: 1},
		{name: "202 is a success", codes: []int{202}, attempts: 1},
		{name: "503 twice then 200: exponential from 50 ms", codes: []int{503, 503, 200}, attempts: 3,
			wantWaits: []time.Duration{50 * ms, 100 * ms}},
		{name: "every retryable status of upstream", codes: []int{404, 413, 425, 429, 502, 504, 200}, attempts: 7,
			params:    SenderParams{Retries: 6},
			wantWaits: []time.Duration{50 * ms, 100 * ms, 200 * ms, 400 * ms, 800 * ms, 1600 * ms}},
		{name: "5 retries then give up", codes: []int{503}, attempts: 6, wantErr: true,
			wantWaits: []time.Duration{50 * ms, 100 * ms, 200 * ms, 400 * ms, 800 * ms}},
		{name: "the cap bounds the exponential", codes: []int{503}, attempts: 6, wantErr: true,
			params:    SenderParams{BackoffMax: 150 * ms},
			wantWaits: []time.Duration{50 * ms, 100 * ms, 150 * ms, 150 * ms, 150 * ms}},
		{name: "Retry-After in seconds is a floor", codes: []int{429, 200}, headers: map[int]http.Header{429: ra("3")}, attempts: 2,
			wantWaits: []time.Duration{3 * time.Second}},
		{name: "Retry-After is capped", codes: []int{503, 200}, headers: map[int]http.Header{503: ra("3600")}, attempts: 2,
			wantWaits: []time.Duration{30 * time.Second}},
		{name: "linear from the ConfigMap", codes: []int{503}, attempts: 6, wantErr: true,
			config:    config.Forwarding{LinearBackoff: true},
			wantWaits: []time.Duration{50 * ms, 100 * ms, 150 * ms, 200 * ms, 250 * ms}},
		{name: "the ConfigMap's cap on Retry-After", codes: []int{503, 200}, headers: map[int]http.Header{503: ra("3600")}, attempts: 2,
			config:    config.Forwarding{RetryAfterMax: 2 * time.Second},
			wantWaits: []time.Duration{2 * time.Second}},
		{name: "the ConfigMap's 0 ignores Retry-After", codes: []int{429, 200}, headers: map[int]http.Header{429: ra("3")}, attempts: 2,
			config:    config.Forwarding{IgnoreRetryAfter: true},
			wantWaits: []time.Duration{50 * ms}},
		{name: "500 is final, as upstream", codes: []int{500}, attempts: 1, wantErr: true},
		{name: "400 is final", codes: []int{400}, attempts: 1, wantErr: true},
		{name: "negative retries: none", codes: []int{503}, attempts: 1, wantErr: true, params: SenderParams{Retries: -1}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			sink := newServer(t, statuses(tc.codes, tc.headers))
			clock := newFakeClock()
			s := testSender(tc.params, clock)
			s.SetForwarding(tc.config)
			res, err := s.Send(ctxFor(t, 10*time.Second), Target{URL: sink.url(t)}, testEvent("e"))
			if (err != nil) != tc.wantErr {
				t.Fatalf("error %v, want error %v", err, tc.wantErr)
			}
			if err != nil && !errors.Is(err, ErrUndelivered) {
				t.Errorf("error %v does not wrap ErrUndelivered", err)
			}
			if res.Attempts != tc.attempts || sink.count() != tc.attempts {
				t.Errorf("attempts %d, sink saw %d, want %d", res.Attempts, sink.count(), tc.attempts)
			}
			if d := cmp.Diff(tc.wantWaits, clock.Sleeps()); d != "" {
				t.Errorf("waits (-want +got):\n%s", d)
			}
			if want := tc.codes[min(tc.attempts, len(tc.codes))-1]; res.StatusCode != want {
				t.Errorf("status %d, want %d", res.StatusCode, want)
			}
		})
	}
}

func TestSendDirectNetworkErrors(t *testing.T) {
	// A server that takes the connection and closes it without a word.
	hangup := newServerProto(t, true, func(w http.ResponseWriter, _ *http.Request, _ int) {
		conn, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			conn.Close()
		}
	})
	closed := newServer(t, nil)
	closedURL := closed.url(t)
	closed.Close()
	hold := make(chan struct{})
	t.Cleanup(func() { close(hold) })
	slow := newServer(t, func(_ http.ResponseWriter, r *http.Request, _ int) {
		select {
		case <-hold:
		case <-r.Context().Done():
		}
	})
	tests := []struct {
		name     string
		target   Target
		params   SenderParams
		attempts int
	}{
		{name: "connection refused is retried", target: Target{URL: closedURL}, attempts: 6},
		{name: "hang-up before the answer is retried", target: Target{URL: hangup.url(t)}, params: SenderParams{Retries: 2}, attempts: 3},
		{name: "per-send timeout ends each attempt", target: Target{URL: slow.url(t)}, params: SenderParams{Retries: 1, Timeout: 50 * time.Millisecond}, attempts: 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			clock := newFakeClock()
			s := testSender(tc.params, clock)
			start := time.Now()
			res, err := s.Send(ctxFor(t, 10*time.Second), tc.target, testEvent("e"))
			if !errors.Is(err, ErrUndelivered) {
				t.Fatalf("error %v, want ErrUndelivered", err)
			}
			if res.Attempts != tc.attempts || res.StatusCode != 0 {
				t.Errorf("attempts %d status %d, want %d attempts and no status", res.Attempts, res.StatusCode, tc.attempts)
			}
			if took := time.Since(start); took > 5*time.Second {
				t.Errorf("took %s", took)
			}
		})
	}
}

func TestSendCallerGone(t *testing.T) {
	sink := newServer(t, statuses([]int{503}, nil))
	s := NewSender(SenderParams{BackoffDelay: time.Hour, BackoffMax: time.Hour})
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := s.Send(ctx, Target{URL: sink.url(t)}, testEvent("e"))
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("error %v, want the context's", err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("a cancelled send waited %s for its backoff", took)
	}
}

// TestSendDirectSharesConnections is the upstream bug this sender fixes: a
// client per source and idle connections closed after every tick. Many
// sources over many ticks reuse a handful of connections, HTTP/1.1 and h2c.
func TestSendDirectSharesConnections(t *testing.T) {
	tests := []struct {
		name      string
		h1Only    bool
		h2cHosts  []string
		wantProto int
	}{
		{name: "HTTP/1.1 sink", h1Only: true, wantProto: 1},
		{name: "h2c sink", h2cHosts: []string{"127.0.0.1"}, wantProto: 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			sink := newServerProto(t, tc.h1Only, nil)
			s := NewSender(SenderParams{SinkH2CHosts: tc.h2cHosts})
			const sources, ticks = 20, 5
			for tick := range ticks {
				done := make(chan error, sources)
				for src := range sources {
					go func() {
						_, err := s.Send(ctxFor(t, 10*time.Second), Target{URL: sink.url(t), Namespace: "ns" + strconv.Itoa(src)}, testEvent(strconv.Itoa(tick)))
						done <- err
					}()
				}
				for range sources {
					if err := <-done; err != nil {
						t.Fatal(err)
					}
				}
			}
			if n := sink.count(); n != sources*ticks {
				t.Fatalf("sink got %d events, want %d", n, sources*ticks)
			}
			// At most one connection per concurrent source, never one per
			// event.
			if c := sink.conns.Load(); c > sources {
				t.Errorf("%d connections for %d events", c, sources*ticks)
			}
			for _, r := range sink.requests() {
				if r.Proto != tc.wantProto {
					t.Fatalf("proto HTTP/%d, want HTTP/%d", r.Proto, tc.wantProto)
				}
			}
		})
	}
}

func TestSendDirectCACerts(t *testing.T) {
	tlsSink := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))
	tlsSink.Config.ErrorLog = log.New(io.Discard, "", 0) // the refused handshakes
	tlsSink.StartTLS()
	t.Cleanup(tlsSink.Close)
	caPEM := string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: tlsSink.Certificate().Raw}))
	u := mustParse(t, tlsSink.URL)
	tests := []struct {
		name    string
		caCerts string
		wantErr bool
	}{
		{name: "trusted through the target's CA certificates", caCerts: caPEM},
		{name: "unknown authority without them", wantErr: true},
		{name: "not PEM", caCerts: "garbage", wantErr: true},
	}
	s := NewSender(SenderParams{Retries: -1})
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := s.Send(ctxFor(t, 10*time.Second), Target{URL: u, CACerts: tc.caCerts}, testEvent("e"))
			if (err != nil) != tc.wantErr {
				t.Fatalf("error %v, want error %v", err, tc.wantErr)
			}
		})
	}
}

func TestSendSyncReply(t *testing.T) {
	sink := newServer(t, func(w http.ResponseWriter, _ *http.Request, _ int) {
		w.Header().Set("Ce-Id", "reply-1")
		w.Header().Set("Ce-Source", "/sink")
		w.Header().Set("Ce-Type", "reply")
		w.Header().Set("Ce-Specversion", "1.0")
		w.Header().Set("Content-Type", "text/plain")
		_, _ = w.Write([]byte("pong"))
	})
	s := NewSender(SenderParams{})
	tests := []struct {
		name   string
		sync   bool
		wantID string
	}{
		{name: "sync keeps the reply", sync: true, wantID: "reply-1"},
		{name: "async drops it"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res, err := s.Send(ctxFor(t, 10*time.Second), Target{URL: sink.url(t), Sync: tc.sync}, testEvent("e"))
			if err != nil {
				t.Fatal(err)
			}
			reply, err := res.Reply(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			gotID := ""
			if reply != nil {
				gotID = reply.ID()
				if string(reply.Data()) != "pong" {
					t.Errorf("reply data %q", reply.Data())
				}
			}
			if gotID != tc.wantID {
				t.Errorf("reply id %q, want %q", gotID, tc.wantID)
			}
		})
	}
}

func TestSendRefusesBadInput(t *testing.T) {
	sink := newServer(t, nil)
	bad := event.New() // no id, source or type
	tests := []struct {
		name   string
		target Target
		event  event.Event
	}{
		{name: "no URL", event: testEvent("e")},
		{name: "relative URL", target: Target{URL: mustParse(t, "/x")}, event: testEvent("e")},
		{name: "not http", target: Target{URL: mustParse(t, "ftp://h/x")}, event: testEvent("e")},
		{name: "invalid event", target: Target{URL: sink.url(t)}, event: bad},
	}
	s := NewSender(SenderParams{})
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := s.Send(context.Background(), tc.target, tc.event); !errors.Is(err, ErrUndelivered) {
				t.Errorf("error %v, want ErrUndelivered", err)
			}
		})
	}
	if sink.count() != 0 {
		t.Errorf("sink got %d requests", sink.count())
	}
}

// TestSendDirectSinkSeesOnlyTheEvents is the regression test of the h2c
// probe: to learn whether a sink spoke h2c, the sender sent it the HTTP/2
// connection preface, which a plain net/http HTTP/1.1 server takes for a
// "PRI *" request and hands to its handler. A sink sees the events sent
// and nothing else; h2c goes to the sinks SinkH2CHosts names, HTTP/1.1
// (as upstream's adapter speaks) to the others, even when they speak h2c.
func TestSendDirectSinkSeesOnlyTheEvents(t *testing.T) {
	tests := []struct {
		name     string
		h1Only   bool
		h2cHosts []string
		want     string
	}{
		{name: "HTTP/1.1-only sink", h1Only: true, want: "HTTP/1.1"},
		{name: "h2c sink not listed", want: "HTTP/1.1"},
		{name: "h2c sink listed", h2cHosts: []string{"127.0.0.1"}, want: "HTTP/2.0"},
		{name: "h2c sink under *", h2cHosts: []string{"*"}, want: "HTTP/2.0"},
		{name: "h2c sink, another host listed", h2cHosts: []string{"*.svc.cluster.local"}, want: "HTTP/1.1"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			sink := newServerProto(t, tc.h1Only, nil)
			s := NewSender(SenderParams{SinkH2CHosts: tc.h2cHosts})
			const n = 5
			for i := range n {
				if _, err := s.Send(ctxFor(t, 10*time.Second), Target{URL: sink.url(t), Namespace: "ns"}, testEvent(strconv.Itoa(i))); err != nil {
					t.Fatal(err)
				}
			}
			reqs := sink.requests()
			if len(reqs) != n {
				t.Errorf("the sink saw %d requests for %d events", len(reqs), n)
			}
			for _, r := range reqs {
				if r.Method != http.MethodPost || r.HTTP != tc.want {
					t.Errorf("the sink saw %s over %s, want POST over %s", r.Method, r.HTTP, tc.want)
				}
			}
		})
	}
}
