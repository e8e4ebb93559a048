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
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"

	"knative.dev/event-forwarding-proxy/config"
)

// seen is one request as a test server saw it.
type seen struct {
	Method string
	Header http.Header
	Body   []byte
	Proto  int    // major version
	HTTP   string // "HTTP/1.1", "HTTP/2.0"
}

// server is a loopback HTTP server (HTTP/1.1, and h2c unless h1Only) that
// records every request its handler sees (an HTTP/1-only net/http server
// runs it for a "PRI *" request too), counts new connections and answers
// through respond (200 when nil). n counts requests from 1.
type server struct {
	*httptest.Server
	mu      sync.Mutex
	reqs    []seen
	conns   atomic.Int64
	respond func(w http.ResponseWriter, r *http.Request, n int)
}

func newServer(t testing.TB, respond func(w http.ResponseWriter, r *http.Request, n int)) *server {
	return newServerProto(t, false, respond)
}

func newServerProto(t testing.TB, h1Only bool, respond func(w http.ResponseWriter, r *http.Request, n int)) *server {
	t.Helper()
	s := &server{respond: respond}
	s.Server = httptest.NewUnstartedServer(http.HandlerFunc(s.serve))
	s.Config.Protocols = new(http.Protocols)
	s.Config.Protocols.SetHTTP1(true)
	s.Config.Protocols.SetUnencryptedHTTP2(!h1Only)
	s.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			s.conns.Add(1)
		}
	}
	s.Start()
	t.Cleanup(s.Close)
	return s
}

func (s *server) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	s.mu.Lock()
	s.reqs = append(s.reqs, seen{Method: r.Method, Header: r.Header.Clone(), Body: body, Proto: r.ProtoMajor, HTTP: r.Proto})
	n := len(s.reqs)
	s.mu.Unlock()
	if s.respond != nil {
		s.respond(w, r, n)
	}
}

func (s *server) requests() []seen {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]seen(nil), s.reqs...)
}

func (s *server) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.reqs)
}

func (s *server) url(t testing.TB) *url.URL { return mustParse(t, s.URL) }

func mustParse(t testing.TB, raw string) *url.URL {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// statuses answers request n with codes[n-1] (the last one repeats), and
// with the headers given for that code.
func statuses(codes []int, headers map[int]http.Header) func(w http.ResponseWriter, r *http.Request, n int) {
	return func(w http.ResponseWriter, _ *http.Request, n int) {
		c := codes[min(n, len(codes))-1]
		for k, v := range headers[c] {
			w.Header()[k] = v
		}
		w.WriteHeader(c)
	}
}

// fakeClock is a settable clock whose Sleep records the wait and advances
// time at once, so retry tests run in microseconds and see every wait.
type fakeClock struct {
	mu     sync.Mutex
	now    time.Time
	sleeps []time.Duration
}

func newFakeClock() *fakeClock {
	return &fakeClock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func (c *fakeClock) Sleep(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.sleeps = append(c.sleeps, d)
	c.now = c.now.Add(d)
	return nil
}

func (c *fakeClock) Sleeps() []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]time.Duration(nil), c.sleeps...)
}

// maxJitter makes Backoff.Wait return the top of its range: exact waits.
func maxJitter(n int64) int64 { return n - 1 }

// testSender returns a sender on the fake clock with exact backoff waits.
func testSender(p SenderParams, clock *fakeClock) *Sender {
	p.Now, p.Sleep, p.Rand = clock.Now, clock.Sleep, maxJitter
	return NewSender(p)
}

// forwardingTo is a configuration that forwards everything to proxy.
func forwardingTo(t testing.TB, proxy *server) config.Forwarding {
	return config.Forwarding{ProxyURL: proxy.url(t), Threshold: 0}
}

func testEvent(id string) event.Event {
	e := event.New()
	e.SetID(id)
	e.SetSource("/apis/v1/namespaces/tenant/pingsources/p")
	e.SetType("dev.knative.sources.ping")
	_ = e.SetData("application/json", map[string]string{"hello": "world"})
	return e
}

func ctxFor(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}
