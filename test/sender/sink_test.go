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

package sender

import (
	"net/url"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"knative.dev/event-forwarding-proxy/test/testproc"
)

// arrival is one event as a sink got it.
type arrival struct {
	ID            string
	ViaProxy      bool // the proxy marks what it forwards with CDN-Loop
	Namespace     string
	Authorization string
}

// sink records every event it gets (HTTP/1.1 and h2c) and answers 200.
type sink struct{ *testproc.Sink }

func newSink(tb testing.TB) *sink {
	return &sink{testproc.NewSink(tb, &testproc.SinkOptions{H2C: true})}
}

// all returns the events received, in order of arrival.
func (s *sink) all() []arrival {
	reqs := s.Requests()
	out := make([]arrival, len(reqs))
	for i, r := range reqs {
		out[i] = arrival{
			ID: r.Header.Get("Ce-Id"), ViaProxy: r.Header.Get("Cdn-Loop") != "",
			Namespace: r.Header.Get("Kn-Namespace"), Authorization: r.Header.Get("Authorization"),
		}
	}
	return out
}

// byID counts the arrivals of each event id.
func (s *sink) byID() map[string]int {
	out := map[string]int{}
	for _, a := range s.all() {
		out[a.ID]++
	}
	return out
}

func (s *sink) url(tb testing.TB) *url.URL { return mustURL(tb, s.URL) }

// testLogger keeps the entries for assertions, and prints them when the
// test fails (never into the test's log from a goroutine that may outlive
// it).
func testLogger(tb testing.TB) (*zap.SugaredLogger, *observer.ObservedLogs) {
	core, logs := observer.New(zap.InfoLevel)
	tb.Cleanup(func() {
		if tb.Failed() {
			for _, e := range logs.All() {
				tb.Logf("sender log: %s %s %v", e.Level, e.Message, e.ContextMap())
			}
		}
	})
	return zap.New(core).Sugar(), logs
}
