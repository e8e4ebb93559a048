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

package h2server_test

import (
	"context"
	"net/http"
	"runtime"
	"testing"
	"time"

	"golang.org/x/net/http2"

	"knative.dev/event-forwarding-proxy/internal/h2raw"
	"knative.dev/event-forwarding-proxy/proxy/internal/h2server"
)

// TestRequestContext: a request's context carries the connection's values
// (net/http's server),
// derives contexts without a goroutine each (package context's AfterFunc
// protocol), ends them when the caller resets the stream, and a context
// derived after that is born ended; context.AfterFunc on it runs.
func TestRequestContext(t *testing.T) {
	type seen struct {
		value          any
		extra          int
		derivedErr     error
		lateErr, after bool
	}
	result, started := make(chan seen, 1), make(chan struct{})
	f := startServer(t, &h2server.Server{}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(started)
		ctx := r.Context()
		var s seen
		s.value = ctx.Value(http.ServerContextKey)
		before := runtime.NumGoroutine()
		var cancels []context.CancelFunc
		for range 100 {
			_, cancel := context.WithTimeout(ctx, time.Hour)
			cancels = append(cancels, cancel)
		}
		derived, cancel := context.WithTimeout(ctx, time.Hour)
		defer cancel()
		ran := make(chan struct{})
		context.AfterFunc(ctx, func() { close(ran) })
		s.extra = runtime.NumGoroutine() - before
		for _, c := range cancels {
			c() // stopped: never run at the end
		}
		<-derived.Done() // the caller resets the stream
		s.derivedErr = derived.Err()
		late, lateCancel := context.WithCancel(ctx)
		defer lateCancel()
		s.lateErr = late.Err() != nil
		<-ran
		s.after = true
		result <- s
	}))
	c := h2raw.Connect(t, f.addr)
	c.Request(1, "POST", "/ctx", false)
	// Reset only once the handler runs: a stream reset in the burst that
	// opened it never gets one.
	recv(t, started, "the handler")
	blockedIn(t, "h2server_test.TestRequestContext.func")
	c.Check(c.Framer.WriteRSTStream(1, http2.ErrCodeCancel))
	s := recv(t, result, "the handler to see its derived context end")
	if s.value != f.hs {
		t.Errorf("the request's context gives %v for http.ServerContextKey, want the connection's server", s.value)
	}
	if s.extra > 10 {
		t.Errorf("deriving 101 contexts and an AfterFunc from a request's context started %d goroutines", s.extra)
	}
	if s.derivedErr == nil || !s.lateErr || !s.after {
		t.Errorf("after the reset: derived context error %v, a later child ended %v, AfterFunc ran %v", s.derivedErr, s.lateErr, s.after)
	}
}
