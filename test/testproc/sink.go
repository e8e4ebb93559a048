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

package testproc

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"
)

// Request is one request as a Sink saw it.
type Request struct {
	Method     string
	RequestURI string // path and query, as the caller sent them
	Proto      int    // the major version: 1, or 2 over h2c
	Header     http.Header
	Body       []byte
	At         time.Time // when the whole body had arrived
}

// SinkOptions shape a Sink; nil records every request and answers 200
// with no body, over HTTP/1.1.
type SinkOptions struct {
	// Respond answers request n (counting from 1) once it is recorded
	// and, if held, released; r's body can be read again. If nil, 200
	// with no body.
	Respond func(w http.ResponseWriter, r *http.Request, n int)
	// Hold picks the requests that wait for Release before Respond
	// answers them; one whose context ends first goes unanswered. If
	// nil, none waits.
	Hold func(r *http.Request, n int) bool
	// H2C serves h2c (HTTP/2 with prior knowledge) beside HTTP/1.1 on
	// the same port. If false, HTTP/1.1 only: the HTTP/2 preface, "PRI *",
	// is then a request the sink records.
	H2C bool
}

// HoldAll is a Hold that holds every request.
func HoldAll(*http.Request, int) bool { return true }

// Sink is a destination on loopback that records every request it gets.
type Sink struct {
	*httptest.Server
	opts        SinkOptions
	released    chan struct{}
	releaseOnce sync.Once

	mu   sync.Mutex
	reqs []Request // guarded by mu
}

// NewSink starts a sink, closed when the test ends. Its holds are
// released first: Close waits for every handler.
func NewSink(tb testing.TB, opts *SinkOptions) *Sink {
	s := &Sink{released: make(chan struct{})}
	if opts != nil {
		s.opts = *opts
	}
	s.Server = httptest.NewUnstartedServer(http.HandlerFunc(s.serve))
	if s.opts.H2C {
		s.Config.Protocols = new(http.Protocols)
		s.Config.Protocols.SetHTTP1(true)
		s.Config.Protocols.SetUnencryptedHTTP2(true)
	}
	s.Start()
	tb.Cleanup(func() {
		s.Release()
		s.Close()
	})
	return s
}

func (s *Sink) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(body))
	s.mu.Lock()
	s.reqs = append(s.reqs, Request{r.Method, r.URL.RequestURI(), r.ProtoMajor, r.Header.Clone(), body, time.Now()})
	n := len(s.reqs)
	s.mu.Unlock()
	if s.opts.Hold != nil && s.opts.Hold(r, n) {
		select {
		case <-s.released:
		case <-r.Context().Done():
			return
		}
	}
	if s.opts.Respond != nil {
		s.opts.Respond(w, r, n)
	}
}

// Release answers every request held, and every later one at once.
func (s *Sink) Release() { s.releaseOnce.Do(func() { close(s.released) }) }

// Requests returns the requests received so far, in order of arrival.
func (s *Sink) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.reqs...)
}

// Count is the number of requests received so far.
func (s *Sink) Count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.reqs)
}
