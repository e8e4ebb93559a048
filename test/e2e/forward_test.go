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
	"bytes"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	"github.com/cloudevents/sdk-go/v2/binding"
	cehttp "github.com/cloudevents/sdk-go/v2/protocol/http"
	"github.com/google/go-cmp/cmp"

	"knative.dev/event-forwarding-proxy/test/testproc"
)

func newEvent(t *testing.T, id string) cloudevents.Event {
	t.Helper()
	ev := cloudevents.NewEvent()
	ev.SetID(id)
	ev.SetSource("/apis/v1/namespaces/tenant-a/pingsources/p1")
	ev.SetType("dev.knative.sources.ping")
	ev.SetTime(time.Date(2026, 11, 30, 5, 0, 0, 0, time.UTC))
	ev.SetExtension("knnamespace", "tenant-a")
	if err := ev.SetData(cloudevents.ApplicationJSON, map[string]any{"message": "Hello, héllo \u2603", "n": 42}); err != nil {
		t.Fatal(err)
	}
	return ev
}

// ceHeaders keeps the CloudEvents and content headers of h, the part of a
// request that must arrive unchanged.
func ceHeaders(h http.Header) http.Header {
	out := http.Header{}
	for k, v := range h {
		if strings.HasPrefix(k, "Ce-") || k == "Content-Type" || k == "Content-Length" || k == "X-Custom" {
			out[k] = v
		}
	}
	return out
}

// TestForwardCloudEventsByteForByte sends the same events straight to one
// sink and through the proxy to another, over HTTP/1.1 and h2c (callers to
// the proxy, the proxy to the sink: FORWARD_H2C_HOSTS names it), in
// binary, structured and batch mode; both sinks must see the same bytes.
func TestForwardCloudEventsByteForByte(t *testing.T) {
	for _, tc := range []struct {
		name  string
		h2c   bool
		env   []string
		proto int
	}{
		{name: "http1", h2c: false, proto: 1},
		{name: "h2c", h2c: true, env: []string{"FORWARD_H2C_HOSTS=127.0.0.1"}, proto: 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := startProxy(t, tc.env...)
			direct := testproc.NewSink(t, &testproc.SinkOptions{H2C: true})
			proxied := testproc.NewSink(t, &testproc.SinkOptions{H2C: true})
			client := http.DefaultClient
			if tc.h2c {
				client = testproc.H2CClient(t, 0)
			}
			send := func(c cloudevents.Client, ctxMode string, ev cloudevents.Event) {
				ctx := ctxFor(t, 10*time.Second)
				if ctxMode == "structured" {
					ctx = binding.WithForceStructured(ctx)
				}
				if res := c.Send(ctx, ev); !cloudevents.IsACK(res) {
					t.Fatalf("send %s: %v", ctxMode, res)
				}
			}
			newClient := func(target string, extra ...cehttp.Option) cloudevents.Client {
				opts := append([]cehttp.Option{cehttp.WithTarget(target), cehttp.WithClient(*client)}, extra...)
				c, err := cloudevents.NewClientHTTP(opts...)
				if err != nil {
					t.Fatal(err)
				}
				return c
			}
			directClient := newClient(direct.URL + "/events?x=1")
			proxyClient := newClient(p.URL, cehttp.WithHeader("Kn-Forward-To", proxied.URL+"/events?x=1"),
				cehttp.WithHeader("Kn-Forward-Timeout", "PT30S"))
			for _, mode := range []string{"binary", "structured"} {
				ev := newEvent(t, "ev-"+mode)
				send(directClient, mode, ev)
				send(proxyClient, mode, ev)
			}
			batch := `[{"specversion":"1.0","id":"b1","source":"/s","type":"t","data":{"a":1}},` +
				`{"specversion":"1.0","id":"b2","source":"/s","type":"t","data_base64":"AAEC/w=="}]`
			for _, target := range []struct {
				url string
				hdr []string
			}{{direct.URL + "/events?x=1", nil}, {p.URL, []string{"Kn-Forward-To", proxied.URL + "/events?x=1"}}} {
				req, _ := http.NewRequest(http.MethodPost, target.url, strings.NewReader(batch))
				req.Header.Set("Content-Type", "application/cloudevents-batch+json")
				req.Header.Set("X-Custom", "kept")
				for i := 0; i < len(target.hdr); i += 2 {
					req.Header.Set(target.hdr[i], target.hdr[i+1])
				}
				resp, err := client.Do(req)
				if err != nil || resp.StatusCode != http.StatusOK {
					t.Fatalf("batch: %v %v", resp, err)
				}
				resp.Body.Close()
			}

			want, got := direct.Requests(), proxied.Requests()
			if len(got) != 3 || len(want) != 3 {
				t.Fatalf("direct sink saw %d requests, proxied sink %d; want 3 each", len(want), len(got))
			}
			for i := range want {
				if got[i].Method != want[i].Method || got[i].RequestURI != want[i].RequestURI {
					t.Errorf("request %d: %s %s through the proxy, %s %s direct", i, got[i].Method, got[i].RequestURI, want[i].Method, want[i].RequestURI)
				}
				if !bytes.Equal(got[i].Body, want[i].Body) {
					t.Errorf("request %d body differs:\nproxied %q\ndirect  %q", i, got[i].Body, want[i].Body)
				}
				if diff := cmp.Diff(ceHeaders(want[i].Header), ceHeaders(got[i].Header)); diff != "" {
					t.Errorf("request %d headers differ (-direct +proxied):\n%s", i, diff)
				}
				for k := range got[i].Header {
					if strings.HasPrefix(k, "Kn-Forward-") {
						t.Errorf("request %d: %s reached the destination", i, k)
					}
				}
				if got[i].Proto != tc.proto {
					t.Errorf("request %d reached the destination over HTTP/%d, want HTTP/%d", i, got[i].Proto, tc.proto)
				}
			}
			evs, err := cehttp.NewEventsFromHTTPRequest(&http.Request{Header: got[2].Header, Body: io.NopCloser(bytes.NewReader(got[2].Body))})
			if err != nil || len(evs) != 2 || evs[0].ID() != "b1" || evs[1].ID() != "b2" {
				t.Errorf("the forwarded batch decodes to %v, %v; want events b1 and b2", evs, err)
			}
		})
	}
}

// TestReplyEventComesBack has the destination answer with a reply event,
// which must come back to the caller unchanged.
func TestReplyEventComesBack(t *testing.T) {
	p := startProxy(t)
	reply := newEvent(t, "reply-1")
	reply.SetType("dev.example.reply")
	dest := testproc.NewSink(t, &testproc.SinkOptions{Respond: func(w http.ResponseWriter, r *http.Request, _ int) {
		w.Header().Set("Ce-Specversion", "1.0")
		w.Header().Set("Ce-Id", reply.ID())
		w.Header().Set("Ce-Source", reply.Source())
		w.Header().Set("Ce-Type", reply.Type())
		w.Header().Set("Ce-Time", reply.Time().Format(time.RFC3339))
		w.Header().Set("Ce-Knnamespace", "tenant-a")
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Reply", "yes")
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write(reply.Data())
	}})
	c, err := cloudevents.NewClientHTTP(cehttp.WithTarget(p.URL), cehttp.WithHeader("Kn-Forward-To", dest.URL))
	if err != nil {
		t.Fatal(err)
	}
	got, res := c.Request(ctxFor(t, 10*time.Second), newEvent(t, "req-1"))
	if !cloudevents.IsACK(res) {
		t.Fatalf("request: %v", res)
	}
	var httpRes *cehttp.Result
	if !cloudevents.ResultAs(res, &httpRes) || httpRes.StatusCode != http.StatusCreated {
		t.Errorf("result %v, want the destination's 201", res)
	}
	if got == nil {
		t.Fatal("no reply event came back")
	}
	if diff := cmp.Diff(reply.String(), got.String()); diff != "" {
		t.Errorf("reply event differs (-sent +received):\n%s", diff)
	}
}

// TestH2CCallerReachesHTTP1Sink: a caller on h2c (as queue-proxy and the
// sender are) reaches a sink that speaks only HTTP/1.1 over HTTP/1.1, and
// the sink sees the events and no other request (a net/http HTTP/1.1
// server runs its handler for the HTTP/2 preface, "PRI *"); a sink that
// FORWARD_H2C_HOSTS names gets h2c, one that speaks h2c but is not named
// gets HTTP/1.1.
func TestH2CCallerReachesHTTP1Sink(t *testing.T) {
	client := testproc.H2CClient(t, 0)
	for _, tc := range []struct {
		name      string
		sinkH2C   bool
		env       []string
		wantProto int
	}{
		{name: "HTTP/1.1-only sink", sinkH2C: false, wantProto: 1},
		{name: "h2c sink not named", sinkH2C: true, wantProto: 1},
		{name: "h2c sink in FORWARD_H2C_HOSTS", sinkH2C: true, env: []string{"FORWARD_H2C_HOSTS=127.0.0.1"}, wantProto: 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := startProxy(t, tc.env...)
			dest := testproc.NewSink(t, &testproc.SinkOptions{H2C: tc.sinkH2C})
			for i := range 3 {
				req, _ := http.NewRequest(http.MethodPost, p.URL, strings.NewReader("event"))
				req.Header.Set("Kn-Forward-To", dest.URL)
				resp, err := client.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					t.Fatalf("call %d: status %d (%s)", i, resp.StatusCode, resp.Header.Get("Kn-Forward-Error"))
				}
			}
			reqs := dest.Requests()
			for _, r := range reqs {
				if r.Method != http.MethodPost || r.Proto != tc.wantProto || string(r.Body) != "event" {
					t.Errorf("the sink got %s over HTTP/%d %q, want POST over HTTP/%d %q", r.Method, r.Proto, r.Body, tc.wantProto, "event")
				}
			}
			if len(reqs) != 3 {
				t.Errorf("the sink got %d requests for 3 events", len(reqs))
			}
		})
	}
}
