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

package reliability

import (
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"knative.dev/event-forwarding-proxy/proxy/proxytest"
)

// ledger records, by CloudEvent id, the events a sink accepted (answered
// 2xx to).
type ledger struct {
	mu       sync.Mutex
	accepted map[string]int
	attempts map[string]int           // requests seen, accepted or not
	arrived  map[string]chan struct{} // closed at the first attempt
}

func newLedger() *ledger {
	return &ledger{accepted: map[string]int{}, attempts: map[string]int{}, arrived: map[string]chan struct{}{}}
}

// seen counts an attempt of id and returns how many came before.
func (l *ledger) seen(id string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.attempts[id]++
	if l.attempts[id] == 1 {
		close(l.arrivedLocked(id))
	}
	return l.attempts[id] - 1
}

// arrival returns a channel closed once id reached a sink.
func (l *ledger) arrival(id string) <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.arrivedLocked(id)
}

func (l *ledger) arrivedLocked(id string) chan struct{} {
	ch, ok := l.arrived[id]
	if !ok {
		ch = make(chan struct{})
		l.arrived[id] = ch
	}
	return ch
}

func (l *ledger) accept(id string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.accepted[id]++
}

func (l *ledger) acceptedCount(id string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.accepted[id]
}

// sinks are the soak's destinations, each a kind of fault.
type sinks struct {
	good, flaky, failing, slow, holding, truncated, down, resetting, latent string
}

// h2cSinkHost is where the sinks that speak h2c listen; the soak's proxy
// speaks h2c to it (FORWARD_H2C_HOSTS), HTTP/1.1 to the others.
const h2cSinkHost = "127.0.0.2"

// onEvent wraps a sink's reply: only the soak's events count.
func onEvent(reply func(w http.ResponseWriter, r *http.Request)) proxytest.Reply {
	return func(w http.ResponseWriter, r *http.Request, _ int) {
		if r.Method == http.MethodPost && r.Header.Get("Ce-Id") != "" {
			reply(w, r)
		}
	}
}

// newSinks starts the soak's destinations; every one records into l.
func newSinks(t *testing.T, l *ledger) sinks {
	accept := func(w http.ResponseWriter, r *http.Request) {
		l.accept(r.Header.Get("Ce-Id"))
		_, _ = io.WriteString(w, "ok")
	}
	good := proxytest.NewH2CDestinationAt(t, h2cSinkHost, onEvent(func(w http.ResponseWriter, r *http.Request) {
		l.seen(r.Header.Get("Ce-Id"))
		accept(w, r)
	}))
	flaky := proxytest.NewDestination(t, onEvent(func(w http.ResponseWriter, r *http.Request) {
		if l.seen(r.Header.Get("Ce-Id")) == 0 {
			w.Header().Set("Retry-After", "0")
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		accept(w, r)
	}))
	failing := proxytest.NewDestination(t, onEvent(func(w http.ResponseWriter, r *http.Request) {
		l.seen(r.Header.Get("Ce-Id"))
		w.WriteHeader(http.StatusInternalServerError)
	}))
	slow := proxytest.NewH2CDestinationAt(t, h2cSinkHost, onEvent(func(w http.ResponseWriter, r *http.Request) {
		l.seen(r.Header.Get("Ce-Id"))
		select {
		case <-time.After(30 * time.Millisecond):
			accept(w, r)
		case <-r.Context().Done():
		}
	}))
	holding := proxytest.NewDestination(t, onEvent(func(_ http.ResponseWriter, r *http.Request) {
		l.seen(r.Header.Get("Ce-Id"))
		<-r.Context().Done() // never answers
	}))
	truncated := proxytest.NewDestination(t, onEvent(func(w http.ResponseWriter, r *http.Request) {
		l.seen(r.Header.Get("Ce-Id"))
		w.Header().Set("Content-Length", "4096")
		_, _ = io.WriteString(w, strings.Repeat("t", 1024))
		http.NewResponseController(w).Flush()
		panic(http.ErrAbortHandler)
	}))
	down := "http://" + proxytest.NewRefusingAddr(t) + "/"
	unreached := proxytest.NewDestination(t, onEvent(func(w http.ResponseWriter, r *http.Request) {
		l.seen(r.Header.Get("Ce-Id"))
		accept(w, r)
	}))
	resetting := proxytest.NewToxic(t, strings.TrimPrefix(unreached.URL, "http://"))
	resetting.Add(t, "reset_peer", "upstream", map[string]any{"timeout": 0})
	latent := proxytest.NewToxic(t, strings.TrimPrefix(good.URL, "http://"))
	latent.Add(t, "latency", "downstream", map[string]any{"latency": 20, "jitter": 10})
	return sinks{
		good: good.URL + "/", flaky: flaky.URL + "/", failing: failing.URL + "/", slow: slow.URL + "/",
		holding: holding.URL + "/", truncated: truncated.URL + "/", down: down,
		resetting: resetting.URL, latent: latent.URL,
	}
}

// kind is one way an event goes through the proxy.
type kind struct {
	name    string
	weight  int
	dest    func(sinks) string
	async   bool
	headers []string // extra header name, value pairs
	cancel  bool     // the caller gives up once its call reached the destination
	cut     bool     // the destination breaks its answer off: the caller may get no answer at all
	size    int      // body bytes; if zero, a small event
}

// soakKinds is the soak's mix.
func soakKinds() []kind {
	return []kind{
		{name: "sync to a good sink", weight: 20, dest: func(s sinks) string { return s.good }},
		{name: "async to a good sink", weight: 15, dest: func(s sinks) string { return s.good }, async: true},
		{name: "async to a sink that fails once", weight: 8, dest: func(s sinks) string { return s.flaky }, async: true},
		{name: "sync to a sink that fails once", weight: 4, dest: func(s sinks) string { return s.flaky }},
		{name: "async to a failing sink", weight: 5, dest: func(s sinks) string { return s.failing }, async: true},
		{name: "sync to a sink that is down", weight: 5, dest: func(s sinks) string { return s.down }},
		{name: "async to a sink that is down", weight: 4, dest: func(s sinks) string { return s.down }, async: true},
		{name: "sync, caller gives up", weight: 4, dest: func(s sinks) string { return s.holding }, cancel: true},
		{name: "sync past its deadline", weight: 4, dest: func(s sinks) string { return s.holding }, headers: []string{"Kn-Forward-Timeout", "PT0.05S"}},
		{name: "sync to a slow sink", weight: 12, dest: func(s sinks) string { return s.slow }},
		{name: "sync, connection reset", weight: 3, dest: func(s sinks) string { return s.resetting }},
		{name: "async, connection reset", weight: 3, dest: func(s sinks) string { return s.resetting }, async: true},
		{name: "sync, answer cut short", weight: 3, dest: func(s sinks) string { return s.truncated }, cut: true},
		{name: "malformed Kn-Forward-Timeout", weight: 2, dest: func(s sinks) string { return s.good }, headers: []string{"Kn-Forward-Timeout", "soon"}},
		{name: "body too large", weight: 2, dest: func(s sinks) string { return s.good }, size: 5000},
		{name: "async past its deadline", weight: 3, dest: func(s sinks) string { return s.holding }, async: true, headers: []string{"Kn-Forward-Timeout", "PT0.05S", "Kn-Forward-Retry", "1"}},
		{name: "sync through network latency", weight: 3, dest: func(s sinks) string { return s.latent }},
	}
}
