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
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"
	"go.uber.org/zap/zaptest/observer"

	"knative.dev/event-forwarding-proxy/adapter"
)

// driver sends numbered events through a Sender to one target and keeps
// what each send returned, so that a test can account for every event.
type driver struct {
	tb     testing.TB
	s      *adapter.Sender
	target adapter.Target
	prefix string

	mu   sync.Mutex
	n    int
	sent map[string]*adapter.Result
}

func newDriver(tb testing.TB, s *adapter.Sender, target adapter.Target, prefix string) *driver {
	return &driver{tb: tb, s: s, target: target, prefix: prefix, sent: map[string]*adapter.Result{}}
}

func pingEvent(id string) event.Event {
	e := event.New()
	e.SetID(id)
	e.SetType("dev.knative.sources.ping")
	e.SetSource("/apis/v1/namespaces/tenant/pingsources/test")
	_ = e.SetData("application/json", map[string]string{"body": "ping"})
	return e
}

// send sends the next event and fails the test if it is not delivered.
func (d *driver) send() (string, *adapter.Result) {
	d.tb.Helper()
	id, res, err := d.trySend()
	if err != nil {
		d.tb.Fatalf("event %s not delivered: %v (result %+v)", id, err, res)
	}
	return id, res
}

// trySend sends the next event and returns its id, result and error.
func (d *driver) trySend() (string, *adapter.Result, error) {
	d.mu.Lock()
	d.n++
	id := d.prefix + "-" + strconv.Itoa(d.n)
	d.mu.Unlock()
	res, err := d.s.Send(ctxFor(d.tb, time.Minute), d.target, pingEvent(id))
	if err == nil {
		d.mu.Lock()
		d.sent[id] = res
		d.mu.Unlock()
	}
	return id, res, err
}

// sendUntil sends an event every 20 ms until one takes route want, and
// returns how long that took; the test fails past within.
func (d *driver) sendUntil(want adapter.Route, within time.Duration) time.Duration {
	d.tb.Helper()
	start := time.Now()
	pace := time.NewTicker(20 * time.Millisecond)
	defer pace.Stop()
	for {
		if _, res := d.send(); res.Route == want && !res.Fallback {
			return time.Since(start)
		}
		if time.Since(start) > within {
			d.tb.Fatalf("sends still not %s after %s", want, within)
		}
		<-pace.C
	}
}

// delivered returns the results of the events delivered so far, by id.
func (d *driver) delivered() map[string]*adapter.Result {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make(map[string]*adapter.Result, len(d.sent))
	for k, v := range d.sent {
		out[k] = v
	}
	return out
}

// checkArrivals waits until every delivered event arrived at s, each once
// and by the route its result names.
func (d *driver) checkArrivals(s *sink) {
	d.tb.Helper()
	sent := d.delivered()
	eventually(d.tb, 30*time.Second, "every delivered event arrives at the sink", func() bool {
		got := s.byID()
		for id := range sent {
			if got[id] == 0 {
				return false
			}
		}
		return true
	})
	for _, a := range s.all() {
		res, ok := sent[a.ID]
		switch {
		case !ok:
			continue // another driver's
		case s.byID()[a.ID] != 1:
			d.tb.Errorf("event %s arrived %d times", a.ID, s.byID()[a.ID])
		case a.ViaProxy != (res.Route == adapter.RouteProxy):
			d.tb.Errorf("event %s: the sender says %s, the sink saw it via the proxy: %v", a.ID, res.Route, a.ViaProxy)
		}
	}
}

// waitLogged waits until logs hold an entry with message msg whose
// resourceVersion is rv, and returns it.
func waitLogged(tb testing.TB, logs *observer.ObservedLogs, msg, rv string) observer.LoggedEntry {
	tb.Helper()
	var found observer.LoggedEntry
	eventually(tb, 30*time.Second, "the sender logs "+msg+" for resourceVersion "+rv, func() bool {
		for _, e := range logs.FilterMessage(msg).All() {
			if e.ContextMap()["resourceVersion"] == rv {
				found = e
				return true
			}
		}
		return false
	})
	return found
}
