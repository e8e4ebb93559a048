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
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

// arrival is one event as a sink got it.
type arrival struct {
	ID            string
	ViaProxy      bool // the proxy marks what it forwards with CDN-Loop
	Namespace     string
	Authorization string
}

// sink records every event it gets (HTTP/1.1 and h2c) and answers 200.
type sink struct {
	*httptest.Server
	mu       sync.Mutex
	arrivals []arrival
}

func newSink(tb testing.TB) *sink {
	tb.Helper()
	s := &sink{}
	s.Server = httptest.NewUnstartedServer(http.HandlerFunc(s.serve))
	s.Config.Protocols = new(http.Protocols)
	s.Config.Protocols.SetHTTP1(true)
	s.Config.Protocols.SetUnencryptedHTTP2(true)
	s.Start()
	tb.Cleanup(s.Close)
	return s
}

func (s *sink) serve(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	a := arrival{
		ID: r.Header.Get("Ce-Id"), ViaProxy: r.Header.Get("Cdn-Loop") != "",
		Namespace: r.Header.Get("Kn-Namespace"), Authorization: r.Header.Get("Authorization"),
	}
	s.mu.Lock()
	s.arrivals = append(s.arrivals, a)
	s.mu.Unlock()
}

func (s *sink) all() []arrival {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]arrival(nil), s.arrivals...)
}

func (s *sink) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.arrivals)
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

// holdingSink holds every call until release, then answers 200.
type holdingSink struct {
	*httptest.Server
	mu      sync.Mutex
	held    int
	done    chan struct{}
	release func()
}

func newHoldingSink(tb testing.TB) *holdingSink {
	tb.Helper()
	s := &holdingSink{done: make(chan struct{})}
	var once sync.Once
	s.release = func() { once.Do(func() { close(s.done) }) }
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		s.mu.Lock()
		s.held++
		s.mu.Unlock()
		<-s.done
	}))
	tb.Cleanup(s.Close)
	tb.Cleanup(s.release) // runs first: Close waits for the handlers
	return s
}

func (s *holdingSink) holding() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.held
}

func (s *holdingSink) url(tb testing.TB) *url.URL { return mustURL(tb, s.URL) }
