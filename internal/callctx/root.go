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

package callctx

import (
	"context"
	"sync"
	"time"
)

// Root is a context that ends only when Cancel is called: the parent of
// the many Contexts a process starts over its life (the async
// deliveries). What derives from it, and context.AfterFunc on it, costs a
// small record each, not package context's afterFuncCtx and its entry in
// the parent's map of children.
type Root struct {
	mu    sync.Mutex
	done  chan struct{}
	err   error
	hooks hook // a ring of the funcs to run at the end, through this sentinel
}

var _ context.Context = (*Root)(nil)

// hook is one func Root.AfterFunc registered; unlinked, its next is nil.
type hook struct {
	r          *Root
	f          func()
	prev, next *hook
}

// NewRoot returns a Root that has not ended.
func NewRoot() *Root {
	r := &Root{done: make(chan struct{})}
	r.hooks.prev, r.hooks.next = &r.hooks, &r.hooks
	return r
}

func (r *Root) Deadline() (time.Time, bool) { return time.Time{}, false }

func (r *Root) Done() <-chan struct{} { return r.done }

func (r *Root) Err() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.err
}

func (r *Root) Value(any) any { return nil }

// AfterFunc arranges for f to run on a goroutine of its own once r ends,
// as context.AfterFunc does; stop undoes it and reports whether it did.
func (r *Root) AfterFunc(f func()) (stop func() bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.err != nil {
		go f()
		return func() bool { return false }
	}
	h := &hook{r: r, f: f, prev: r.hooks.prev, next: &r.hooks}
	h.prev.next = h
	r.hooks.prev = h
	return h.stop
}

func (h *hook) stop() bool {
	r := h.r
	r.mu.Lock()
	defer r.mu.Unlock()
	if h.next == nil {
		return false
	}
	h.prev.next, h.next.prev = h.next, h.prev
	h.prev, h.next = nil, nil
	return true
}

// Cancel ends r with context.Canceled, once, and starts what AfterFunc
// registered, each on a goroutine of its own.
func (r *Root) Cancel() {
	r.mu.Lock()
	if r.err != nil {
		r.mu.Unlock()
		return
	}
	r.err = context.Canceled
	close(r.done)
	var fs []func()
	for h := r.hooks.next; h != &r.hooks; {
		next := h.next
		fs = append(fs, h.f)
		h.prev, h.next = nil, nil
		h = next
	}
	r.hooks.prev, r.hooks.next = &r.hooks, &r.hooks
	r.mu.Unlock()
	for _, f := range fs {
		go f()
	}
}
