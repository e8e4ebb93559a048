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

// Package proxytest holds the fakes that the proxy package's tests share: a
// recording destination server, a hold that keeps calls open until told
// otherwise, and a deadline-bounded poll. It does not import proxy, so the
// proxy package's internal tests can use it.
package proxytest

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"
)

// Request is what a Destination saw of one request.
type Request struct {
	Method     string
	RequestURI string
	Proto      string // "HTTP/1.1", "HTTP/2.0"
	Host       string
	ProtoMajor int
	Header     http.Header
	Body       []byte
	BodyErr    error // the error reading the body, nil when it arrived whole
}

// Reply answers the n-th request (1-based) a Destination received. The
// body has been read already (see Request.Body). A Reply may block; it
// should then also watch r.Context().
type Reply func(w http.ResponseWriter, r *http.Request, n int)

// Destination is a real loopback HTTP server that records every request
// before answering it with its Reply.
type Destination struct {
	*httptest.Server

	mu   sync.Mutex
	reqs []Request
	// arrived receives each request once recorded.
	arrived chan Request
}

// NewDestination starts an HTTP/1.1 destination answering with reply (200
// and no body if nil). It is closed when the test ends.
func NewDestination(t testing.TB, reply Reply) *Destination {
	t.Helper()
	d := newDestination(reply)
	d.Start()
	t.Cleanup(d.Close)
	return d
}

// NewH2CDestination starts a destination that speaks HTTP/1.1 and h2c
// (HTTP/2 with prior knowledge) on the same port.
func NewH2CDestination(t testing.TB, reply Reply) *Destination {
	t.Helper()
	d := newDestination(reply)
	d.Config.Protocols = new(http.Protocols)
	d.Config.Protocols.SetHTTP1(true)
	d.Config.Protocols.SetUnencryptedHTTP2(true)
	d.Start()
	t.Cleanup(d.Close)
	return d
}

// NewH2CDestinationAt is NewH2CDestination listening on host (an address
// such as 127.0.0.2), so that a host pattern can tell it from
// destinations on 127.0.0.1.
func NewH2CDestinationAt(t testing.TB, host string, reply Reply) *Destination {
	t.Helper()
	ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		t.Fatalf("listening on %s: %v", host, err)
	}
	d := newDestination(reply)
	_ = d.Listener.Close()
	d.Listener = ln
	d.Config.Protocols = new(http.Protocols)
	d.Config.Protocols.SetHTTP1(true)
	d.Config.Protocols.SetUnencryptedHTTP2(true)
	d.Start()
	t.Cleanup(d.Close)
	return d
}

func newDestination(reply Reply) *Destination {
	if reply == nil {
		reply = func(http.ResponseWriter, *http.Request, int) {}
	}
	d := &Destination{arrived: make(chan Request, 1024)}
	d.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		rec := Request{
			Method: r.Method, RequestURI: r.RequestURI, Proto: r.Proto, Host: r.Host, ProtoMajor: r.ProtoMajor,
			Header: r.Header.Clone(), Body: body, BodyErr: err,
		}
		d.mu.Lock()
		d.reqs = append(d.reqs, rec)
		n := len(d.reqs)
		d.mu.Unlock()
		select {
		case d.arrived <- rec:
		default: // nobody is reading Next: Count and Requests still see it
		}
		if err != nil {
			return
		}
		reply(w, r, n)
	}))
	return d
}

// Count returns how many requests arrived so far.
func (d *Destination) Count() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.reqs)
}

// Requests returns a copy of the requests received so far.
func (d *Destination) Requests() []Request {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]Request(nil), d.reqs...)
}

// Next returns the next request to arrive, failing the test if none
// arrives within 5 s.
func (d *Destination) Next(t testing.TB) Request {
	t.Helper()
	select {
	case r := <-d.arrived:
		return r
	case <-time.After(5 * time.Second):
		t.Fatalf("no request reached the destination within 5s (%d so far)", d.Count())
		return Request{}
	}
}

// Hold keeps the requests it answers open until Release, until their
// request context ends, or until the test ends (so that servers can close
// in cleanup), then answers 200 "released".
type Hold struct {
	t       testing.TB
	release chan struct{}
	once    sync.Once
	// Cancelled receives one value for each held request whose context
	// ended before it was released.
	Cancelled chan struct{}
}

// NewHold returns a Hold for the test t.
func NewHold(t testing.TB) *Hold {
	return &Hold{t: t, release: make(chan struct{}), Cancelled: make(chan struct{}, 1024)}
}

// Release lets every held request, and every later one, answer.
func (h *Hold) Release() { h.once.Do(func() { close(h.release) }) }

// Reply is the Hold's Reply.
func (h *Hold) Reply(w http.ResponseWriter, r *http.Request, _ int) {
	select {
	case <-h.release:
		_, _ = io.WriteString(w, "released")
	case <-r.Context().Done():
		h.Cancelled <- struct{}{}
	case <-h.t.Context().Done():
	}
}

// WaitCancelled fails the test unless a held request's context ends
// within 5 s.
func (h *Hold) WaitCancelled(t testing.TB) {
	t.Helper()
	select {
	case <-h.Cancelled:
	case <-time.After(5 * time.Second):
		t.Fatal("the destination's request context was not cancelled within 5s")
	}
}

// Eventually polls cond every few milliseconds until it holds, failing the
// test with msg if it does not within timeout.
func Eventually(t testing.TB, timeout time.Duration, cond func() bool, msg string) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after %s: %s", timeout, msg)
		}
		time.Sleep(2 * time.Millisecond)
	}
}
