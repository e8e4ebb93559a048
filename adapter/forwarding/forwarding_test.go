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

package forwarding_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"testing"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	cecontext "github.com/cloudevents/sdk-go/v2/context"
	"github.com/cloudevents/sdk-go/v2/event"
	cehttp "github.com/cloudevents/sdk-go/v2/protocol/http"

	"knative.dev/event-forwarding-proxy/adapter"
	"knative.dev/event-forwarding-proxy/adapter/forwarding"
	"knative.dev/event-forwarding-proxy/config"
	"knative.dev/event-forwarding-proxy/delivery"
)

// recorder is a loopback server that records the requests it gets and
// answers through respond (n counts from 1). It speaks h2c as well as
// HTTP/1.1: the Sender reaches a plain-http proxy over h2c.
type recorder struct {
	*httptest.Server
	mu      sync.Mutex
	headers []http.Header
	bodies  []string
}

func newRecorder(t *testing.T, respond func(w http.ResponseWriter, n int)) *recorder {
	t.Helper()
	r := &recorder{}
	r.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		b, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		r.headers, r.bodies = append(r.headers, req.Header.Clone()), append(r.bodies, string(b))
		n := len(r.headers)
		r.mu.Unlock()
		respond(w, n)
	}))
	r.Config.Protocols = new(http.Protocols)
	r.Config.Protocols.SetHTTP1(true)
	r.Config.Protocols.SetUnencryptedHTTP2(true)
	r.Start()
	t.Cleanup(r.Close)
	return r
}

func (r *recorder) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.headers)
}

func (r *recorder) header(i int) http.Header {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.headers[i]
}

func (r *recorder) body(i int) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.bodies[i]
}

func accepted(w http.ResponseWriter, _ int) { w.WriteHeader(http.StatusAccepted) }

// replyEvent answers as a sink replying with an event, in binary mode,
// relayed by the proxy as it came.
func replyEvent(w http.ResponseWriter, _ int) {
	h := w.Header()
	h.Set("Ce-Id", "reply-1")
	h.Set("Ce-Source", "/sink")
	h.Set("Ce-Type", "dev.example.reply")
	h.Set("Ce-Specversion", "1.0")
	h.Set("Content-Type", "application/json")
	_, _ = io.WriteString(w, `{"pong":true}`)
}

// newSender returns a Sender forwarding everything to proxy; to none
// when proxy is nil.
func newSender(t *testing.T, proxy *recorder) *adapter.Sender {
	t.Helper()
	s := adapter.NewSender(adapter.SenderParams{})
	t.Cleanup(s.CloseIdleConnections)
	if proxy != nil {
		u, err := url.Parse(proxy.URL)
		if err != nil {
			t.Fatal(err)
		}
		s.SetForwarding(config.Forwarding{ProxyURL: u, Threshold: 0})
	}
	return s
}

func newClient(t *testing.T, target string, s *adapter.Sender, with ...forwarding.Setting) cloudevents.Client {
	t.Helper()
	c, err := cloudevents.NewClientHTTP(cehttp.WithTarget(target), forwarding.Option(s, with...))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func testEvent() event.Event {
	e := cloudevents.NewEvent()
	e.SetID("e-1")
	e.SetSource("/apis/v1/namespaces/tenant/pingsources/p")
	e.SetType("dev.knative.sources.ping")
	_ = e.SetData("application/json", map[string]string{"hello": "world"})
	return e
}

func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestSendThroughProxy(t *testing.T) {
	proxy := newRecorder(t, accepted)
	sink := newRecorder(t, accepted)
	c := newClient(t, sink.URL, newSender(t, proxy))
	if res := c.Send(ctxFor(t), testEvent()); !cloudevents.IsACK(res) {
		t.Fatalf("Send: %v, want ACK on the proxy's 202", res)
	}
	if proxy.count() != 1 || sink.count() != 0 {
		t.Fatalf("proxy %d, sink %d; want the proxy only", proxy.count(), sink.count())
	}
	h := proxy.header(0)
	// Binary mode: the attributes in Ce-* headers, the data as the body.
	want := map[string]string{
		delivery.HeaderForwardTo: sink.URL, delivery.HeaderPrefer: delivery.PreferRespondAsync,
		"Ce-Id": "e-1", "Ce-Specversion": "1.0", "Ce-Type": "dev.knative.sources.ping", "Content-Type": "application/json",
	}
	for k, v := range want {
		if h.Get(k) != v {
			t.Errorf("%s: %q, want %q", k, h.Get(k), v)
		}
	}
	if b := proxy.body(0); b != `{"hello":"world"}` {
		t.Errorf("body %q", b)
	}
}

func TestSendDirectWhenOff(t *testing.T) {
	sink := newRecorder(t, accepted)
	c := newClient(t, sink.URL, newSender(t, nil))
	if res := c.Send(ctxFor(t), testEvent()); !cloudevents.IsACK(res) {
		t.Fatalf("Send: %v", res)
	}
	if sink.count() != 1 {
		t.Fatalf("the sink got %d events, want 1", sink.count())
	}
	if h := sink.header(0); h.Get("Ce-Id") != "e-1" || h.Get(delivery.HeaderForwardTo) != "" {
		t.Errorf("the sink got Ce-Id %q, Kn-Forward-To %q", h.Get("Ce-Id"), h.Get(delivery.HeaderForwardTo))
	}
}

func TestRequestSyncReply(t *testing.T) {
	tests := []struct {
		name string
		ctx  func(context.Context) context.Context
		with []forwarding.Setting
	}{
		{name: "WithSync", ctx: forwarding.WithSync},
		{name: "Sync setting", ctx: func(ctx context.Context) context.Context { return ctx }, with: []forwarding.Setting{forwarding.Sync()}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			proxy := newRecorder(t, replyEvent)
			sink := newRecorder(t, accepted)
			c := newClient(t, sink.URL, newSender(t, proxy), tc.with...)
			reply, res := c.Request(tc.ctx(ctxFor(t)), testEvent())
			if !cloudevents.IsACK(res) {
				t.Fatalf("Request: %v", res)
			}
			if reply == nil || reply.ID() != "reply-1" || string(reply.Data()) != `{"pong":true}` {
				t.Fatalf("reply %v, want the sink's reply-1", reply)
			}
			if proxy.count() != 1 || sink.count() != 0 {
				t.Errorf("proxy %d, sink %d; want the proxy only", proxy.count(), sink.count())
			}
			if p := proxy.header(0).Get(delivery.HeaderPrefer); p != "" {
				t.Errorf("Prefer %q: a sync call must be held, not handed off", p)
			}
		})
	}
}

// TestSDKRetriesSyncFailures: the sink's failure comes back for the SDK's
// own retries, and only those: the proxy sees each of them once.
func TestSDKRetriesSyncFailures(t *testing.T) {
	proxy := newRecorder(t, func(w http.ResponseWriter, n int) {
		if n < 3 {
			w.Header().Set(delivery.HeaderForwardError, "unreachable")
			w.WriteHeader(http.StatusBadGateway)
			return
		}
		replyEvent(w, n)
	})
	sink := newRecorder(t, accepted)
	c := newClient(t, sink.URL, newSender(t, proxy))
	ctx := cecontext.WithRetriesExponentialBackoff(forwarding.WithSync(ctxFor(t)), 10*time.Millisecond, 3)
	reply, res := c.Request(ctx, testEvent())
	if !cloudevents.IsACK(res) {
		t.Fatalf("Request: %v, want ACK on the third call", res)
	}
	if reply == nil || reply.ID() != "reply-1" {
		t.Errorf("reply %v", reply)
	}
	if proxy.count() != 3 || sink.count() != 0 {
		t.Errorf("proxy %d, sink %d; want 3 calls to the proxy, the SDK's", proxy.count(), sink.count())
	}
}

func TestSendProxyDownReachesSink(t *testing.T) {
	gone := newRecorder(t, accepted)
	gone.Close()
	sink := newRecorder(t, accepted)
	c := newClient(t, sink.URL, newSender(t, gone))
	if res := c.Send(ctxFor(t), testEvent()); !cloudevents.IsACK(res) {
		t.Fatalf("Send: %v", res)
	}
	if sink.count() != 1 || sink.header(0).Get("Ce-Id") != "e-1" {
		t.Errorf("the sink got %d events, want e-1 once", sink.count())
	}
}
