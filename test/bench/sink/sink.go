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

// Package sink is the destination of the scenario bench: a slow path that
// holds every call for a while (or until released) and a fast path that
// answers at once, over HTTP/1.1 and h2c on one port.
package sink

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/http2"

	"knative.dev/event-forwarding-proxy/test/bench/h2cserver"
)

// Paths the sink serves.
const (
	// PathHold holds a call for ?d= (a Go duration), the sink's default
	// hold if absent, or until Release.
	PathHold = "/hold"
	// PathFast answers at once.
	PathFast = "/fast"
	// PathStats answers Stats as JSON.
	PathStats = "/stats"
	// PathRelease ends every call held now.
	PathRelease = "/release"
)

// Params configure a Sink.
type Params struct {
	// Hold is how long a held call lasts when it names no duration.
	// If zero, 60 s.
	Hold time.Duration
	// MaxConcurrentStreams is advertised to HTTP/2 clients; the Go client
	// opens another connection every that many streams. If zero, 100000.
	MaxConcurrentStreams int
}

// Stats are the sink's counters.
type Stats struct {
	// Held is the number of calls held now; Served the calls answered.
	Held   int64 `json:"held"`
	Served int64 `json:"served"`
}

// Sink is the bench's destination. It is safe for concurrent use.
type Sink struct {
	p      Params
	held   atomic.Int64
	served atomic.Int64

	mu      sync.Mutex
	release chan struct{} // closed by Release, then replaced
}

// New returns a sink.
func New(p Params) *Sink {
	if p.Hold <= 0 {
		p.Hold = time.Minute
	}
	if p.MaxConcurrentStreams <= 0 {
		p.MaxConcurrentStreams = 100000
	}
	return &Sink{p: p, release: make(chan struct{})}
}

// Stats returns the counters now.
func (s *Sink) Stats() Stats { return Stats{Held: s.held.Load(), Served: s.served.Load()} }

// Release ends every call held now.
func (s *Sink) Release() {
	s.mu.Lock()
	close(s.release)
	s.release = make(chan struct{})
	s.mu.Unlock()
}

func (s *Sink) releaseChan() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.release
}

var reply = []byte(`{"ok":true}`)

// ServeHTTP serves the sink's paths.
func (s *Sink) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	switch r.URL.Path {
	case PathHold:
		s.hold(w, r)
	case PathFast:
		s.answer(w)
	case PathStats:
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(s.Stats())
	case PathRelease:
		s.Release()
		w.WriteHeader(http.StatusNoContent)
	default:
		http.NotFound(w, r)
	}
}

func (s *Sink) hold(w http.ResponseWriter, r *http.Request) {
	d := s.p.Hold
	if v := r.URL.Query().Get("d"); v != "" {
		if pd, err := time.ParseDuration(v); err == nil && pd >= 0 {
			d = pd
		}
	}
	rel := s.releaseChan()
	s.held.Add(1)
	t := time.NewTimer(d)
	select {
	case <-t.C:
	case <-rel:
	case <-r.Context().Done():
	}
	t.Stop()
	s.held.Add(-1)
	s.answer(w)
}

func (s *Sink) answer(w http.ResponseWriter) {
	s.served.Add(1)
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(reply)
}

// Serve serves s on ln, HTTP/1.1 and h2c with prior knowledge, until ctx
// ends, then closes every connection. HTTP/2 uses the random write
// scheduler (see h2cserver), so that a sink holding 100,000 calls on one
// connection does not slow down the peer's other calls: the bench
// measures the peer, not the sink.
func Serve(ctx context.Context, ln net.Listener, s *Sink) error {
	h1 := &http.Server{Handler: s, ReadHeaderTimeout: 30 * time.Second, IdleTimeout: 5 * time.Minute}
	h2 := &http2.Server{
		MaxConcurrentStreams:         uint32(s.p.MaxConcurrentStreams),
		NewWriteScheduler:            h2cserver.RandomScheduler,
		MaxUploadBufferPerConnection: 4 << 20,
		IdleTimeout:                  5 * time.Minute,
	}
	return h2cserver.Serve(ctx, ln, h1, h2)
}
