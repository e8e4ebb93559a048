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

package h2server

import (
	"context"
	"sync"
	"time"
)

// requestState is what a request's context (requestContext) holds.
type requestState struct {
	mu     sync.Mutex
	done   chan struct{} // made by the first Done
	err    error
	afters []func() // AfterFunc's; nil where stopped
}

// requestContext is a request's context: the stream itself, ended with
// the stream. A context.WithCancel child of the connection's context
// would do the same, but keeps what derives from it (the call's deadline)
// in a map of its own and sits in the connection's; this one implements
// the AfterFunc method package context uses instead when a context has it,
// which saves a held call about 0.2 KB of heap.
// Its values and deadline are the connection's context's; so is its
// context.Cause (package context finds causes through a key of its own),
// which the proxy reads only on contexts it makes itself.
type requestContext stream

var _ context.Context = (*requestContext)(nil)

func (r *requestContext) Deadline() (time.Time, bool) { return r.c.ctx.Deadline() }

func (r *requestContext) Value(key any) any { return r.c.ctx.Value(key) }

func (r *requestContext) Done() <-chan struct{} {
	s := &r.rctx
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.done == nil {
		s.done = make(chan struct{})
		if s.err != nil {
			close(s.done)
		}
	}
	return s.done
}

func (r *requestContext) Err() error {
	s := &r.rctx
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// AfterFunc arranges for f to run once the request's context ends, as
// context.AfterFunc does (package context calls it for the contexts derived
// from this one); stop undoes it, and reports whether it did.
func (r *requestContext) AfterFunc(f func()) (stop func() bool) {
	s := &r.rctx
	s.mu.Lock()
	if s.err != nil {
		s.mu.Unlock()
		go f()
		return func() bool { return false }
	}
	i := len(s.afters)
	s.afters = append(s.afters, f)
	s.mu.Unlock()
	return func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.err != nil || s.afters[i] == nil {
			return false
		}
		s.afters[i] = nil
		return true
	}
}

// cancelRequest ends the request's context, once, with context.Canceled;
// c.mu must not be held.
func (st *stream) cancelRequest() { st.endRequest(context.Canceled) }

// endRequest ends the request's context with err, once.
// What AfterFunc registered runs here: package context's own callbacks
// only cancel the derived contexts, and context.AfterFunc's start their
// func on a goroutine of its own.
func (st *stream) endRequest(err error) {
	s := &st.rctx
	s.mu.Lock()
	if s.err != nil {
		s.mu.Unlock()
		return
	}
	s.err = err
	if s.done != nil {
		close(s.done)
	}
	afters := s.afters
	s.afters = nil
	s.mu.Unlock()
	for _, f := range afters {
		if f != nil {
			f()
		}
	}
}

// cancelRequests ends every request of the connection once its base
// context ends, with its error.
func (c *conn) cancelRequests() {
	err := c.ctx.Err()
	c.mu.Lock()
	c.ctxDone = true
	streams := make([]*stream, 0, len(c.streams))
	for _, st := range c.streams {
		streams = append(streams, st)
	}
	c.mu.Unlock()
	for _, st := range streams {
		st.endRequest(err)
	}
}
