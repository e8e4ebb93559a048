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

// Package callctx is the context of one call held for minutes: its
// parent's, with a deadline of its own, at a fraction of what
// context.WithTimeout and context.AfterFunc cost a held call. Those keep
// a timerCtx, a Done channel in it and in its parent, a map of the
// children of each, and an afterFuncCtx for every hook; this one keeps
// its hooks in a slice and makes its Done channel only when asked.
package callctx

import (
	"context"
	"sync"
	"time"
)

// Context is a call's context. Its zero value is not usable: Start it,
// then Cancel it once the call is over, which frees its timer and its
// hook in the parent. It may live inside a larger record.
type Context struct {
	parent     context.Context
	deadline   time.Time
	timer      *time.Timer
	stopParent func() bool // unhooks it from parent; nil without a hook

	mu     sync.Mutex    // guards done, err and afters
	done   chan struct{} // made by the first Done
	err    error
	afters []func() // AfterFunc's; nil where stopped
}

var _ context.Context = (*Context)(nil)

// afterFuncer is a context that runs a func once it ends, as package
// context looks for it (h2server's request context is one).
type afterFuncer interface {
	AfterFunc(f func()) (stop func() bool)
}

// Start makes c a child of parent that ends after timeout at the latest,
// with context.DeadlineExceeded, as context.WithTimeout would.
func (c *Context) Start(parent context.Context, timeout time.Duration) {
	c.parent = parent
	c.deadline = time.Now().Add(timeout)
	if d, ok := parent.Deadline(); ok && d.Before(c.deadline) {
		c.deadline = d
	}
	if a, ok := parent.(afterFuncer); ok {
		c.stopParent = a.AfterFunc(c.parentEnded)
	} else if parent.Done() != nil {
		c.stopParent = context.AfterFunc(parent, c.parentEnded)
	}
	c.timer = time.AfterFunc(time.Until(c.deadline), c.expired)
}

// Cancel ends c with context.Canceled, unless it ended already, and frees
// its timer and its hook in the parent.
func (c *Context) Cancel() {
	c.end(context.Canceled)
	c.timer.Stop()
	if c.stopParent != nil {
		c.stopParent()
	}
}

func (c *Context) parentEnded() { c.end(c.parent.Err()) }

func (c *Context) expired() { c.end(context.DeadlineExceeded) }

// end ends c with err, once, and starts what AfterFunc registered, each on
// a goroutine of its own, as context.AfterFunc does.
func (c *Context) end(err error) {
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		return
	}
	c.err = err
	if c.done != nil {
		close(c.done)
	}
	afters := c.afters
	c.afters = nil
	c.mu.Unlock()
	for _, f := range afters {
		if f != nil {
			go f()
		}
	}
}

func (c *Context) Deadline() (time.Time, bool) { return c.deadline, true }

func (c *Context) Done() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.done == nil {
		c.done = make(chan struct{})
		if c.err != nil {
			close(c.done)
		}
	}
	return c.done
}

func (c *Context) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// Value is the parent's, except that c answers for itself under key, for
// AfterFunc to find it beneath the values added to it.
func (c *Context) Value(k any) any {
	if k == (key{}) {
		return c
	}
	return c.parent.Value(k)
}

type key struct{}

// AfterFunc arranges for f to run on a goroutine of its own once c ends,
// as context.AfterFunc does; stop undoes it and reports whether it did.
// Package context uses it for the contexts derived from c.
func (c *Context) AfterFunc(f func()) (stop func() bool) {
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		go f()
		return func() bool { return false }
	}
	i := len(c.afters)
	c.afters = append(c.afters, f)
	c.mu.Unlock()
	return func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.err != nil || c.afters[i] == nil {
			return false
		}
		c.afters[i] = nil
		return true
	}
}

// AfterFunc is context.AfterFunc, cheaper for a Context, or a context that
// only adds values to one (a span's): what a held call's stream needs to
// be reset when its call ends.
func AfterFunc(ctx context.Context, f func()) (stop func() bool) {
	if c, ok := ctx.(*Context); ok {
		return c.AfterFunc(f)
	}
	if c, ok := ctx.Value(key{}).(*Context); ok && ctx.Done() == c.Done() {
		return c.AfterFunc(f)
	}
	return context.AfterFunc(ctx, f)
}
