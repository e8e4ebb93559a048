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

package delivery_test

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"knative.dev/event-forwarding-proxy/delivery"
)

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// starterFunc is a Starter that answers with its result at once.
type starterFunc struct {
	roundTripFunc
	started chan *http.Request
}

func (s starterFunc) Go(r *http.Request, done func(*http.Response, error)) {
	s.started <- r
	resp, err := s.roundTripFunc(r)
	go done(resp, err)
}

// TestStart: Start uses a Starter's own Go, and runs any other
// RoundTripper on a goroutine; done gets the answer or the error; through
// TraceTransport, the client span carries the outcome and ends when done is
// called.
func TestStart(t *testing.T) {
	errDown := errors.New("down")
	answer := func(r *http.Request) (*http.Response, error) {
		if r.URL.Path == "/down" {
			return nil, errDown
		}
		return &http.Response{StatusCode: http.StatusBadGateway, Status: "502 Bad Gateway", Header: http.Header{}, Body: http.NoBody, Request: r}, nil
	}
	starter := starterFunc{roundTripFunc: answer, started: make(chan *http.Request, 4)}
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	for _, tt := range []struct {
		name            string
		rt              http.RoundTripper
		starter, traced bool
	}{
		{"round tripper", roundTripFunc(answer), false, false},
		{"starter", starter, true, false},
		{"traced round tripper", delivery.TraceTransport(roundTripFunc(answer), tp, nil), false, true},
		{"traced starter", delivery.TraceTransport(starter, tp, nil), true, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			spans.Reset()
			for _, path := range []string{"/", "/down"} {
				req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, "http://sink.test"+path, nil)
				if err != nil {
					t.Fatal(err)
				}
				type outcome struct {
					resp *http.Response
					err  error
				}
				got := make(chan outcome, 2)
				delivery.Start(tt.rt, req, func(resp *http.Response, err error) { got <- outcome{resp, err} })
				var o outcome
				select {
				case o = <-got:
				case <-time.After(5 * time.Second):
					t.Fatalf("%s: done was not called", path)
				}
				switch {
				case path == "/down" && !errors.Is(o.err, errDown):
					t.Errorf("%s: error %v, want %v", path, o.err, errDown)
				case path == "/" && (o.err != nil || o.resp.StatusCode != http.StatusBadGateway):
					t.Errorf("%s: %v %v, want 502", path, o.resp, o.err)
				}
				if tt.starter {
					select {
					case <-starter.started:
					default:
						t.Errorf("%s: the Starter's Go was not used", path)
					}
				}
			}
			if !tt.traced {
				return
			}
			ended := spans.Ended()
			if len(ended) != 2 {
				t.Fatalf("%d spans ended, want 2", len(ended))
			}
			for i, s := range ended {
				if s.SpanKind() != trace.SpanKindClient || s.Status().Code != codes.Error {
					t.Errorf("span %d: kind %v status %v, want a client span with an error status (502, then down)", i, s.SpanKind(), s.Status())
				}
			}
		})
	}
}
