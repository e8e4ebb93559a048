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
	"errors"
	"testing"
	"time"
)

type valueKey struct{}

func TestContextEnds(t *testing.T) {
	type endCase struct {
		name    string
		timeout time.Duration
		end     func(c *Context, cancelParent context.CancelFunc)
		want    error
	}
	tests := []endCase{
		{name: "deadline", timeout: time.Millisecond, end: func(*Context, context.CancelFunc) {}, want: context.DeadlineExceeded},
		{name: "cancel", timeout: time.Hour, end: func(c *Context, _ context.CancelFunc) { c.Cancel() }, want: context.Canceled},
		{name: "parent ends", timeout: time.Hour, end: func(_ *Context, cancel context.CancelFunc) { cancel() }, want: context.Canceled},
	}
	// run checks one context of tt. It reports false, having checked
	// nothing more, when the context had ended before the test could look
	// at it and its timeout had passed by then: a slow machine.
	run := func(t *testing.T, tt endCase) bool {
		parent, cancel := context.WithCancel(context.WithValue(context.Background(), valueKey{}, "v"))
		defer cancel()
		var c Context
		started := time.Now()
		c.Start(parent, tt.timeout)
		defer c.Cancel()
		ran := make(chan struct{})
		AfterFunc(&c, func() { close(ran) })
		child, stopChild := context.WithCancel(&c)
		defer stopChild()
		if err := c.Err(); err != nil {
			if time.Since(started) >= tt.timeout {
				return false
			}
			t.Fatalf("Err before the end = %v", err)
		}
		tt.end(&c, cancel)
		for _, ch := range []<-chan struct{}{c.Done(), ran, child.Done()} {
			select {
			case <-ch:
			case <-time.After(10 * time.Second):
				t.Fatal("the context, its AfterFunc or its child did not end")
			}
		}
		if !errors.Is(c.Err(), tt.want) {
			t.Errorf("Err = %v, want %v", c.Err(), tt.want)
		}
		if got := c.Value(valueKey{}); got != "v" {
			t.Errorf("Value = %v, want the parent's", got)
		}
		return true
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for !run(t, tt) {
				if tt.timeout >= 10*time.Second {
					t.Fatalf("the context ended before the test could look at it, every time up to a timeout of %v", tt.timeout)
				}
				t.Logf("the context's %v had passed before the test could look at it: again, with twice the time", tt.timeout)
				tt.timeout *= 2
			}
		})
	}
}

// TestDeadlineIsTheEarlier: a parent with an earlier deadline keeps it.
func TestDeadlineIsTheEarlier(t *testing.T) {
	parent, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var c Context
	c.Start(parent, time.Hour)
	defer c.Cancel()
	want, _ := parent.Deadline()
	if got, ok := c.Deadline(); !ok || !got.Equal(want) {
		t.Errorf("Deadline = %v %v, want the parent's %v", got, ok, want)
	}
}

// TestAfterFuncStop: a stopped AfterFunc never runs, beneath added values
// too; one registered after the end runs at once.
func TestAfterFuncStop(t *testing.T) {
	var c Context
	c.Start(context.Background(), time.Hour)
	ran := make(chan string, 3)
	stop := AfterFunc(context.WithValue(&c, valueKey{}, "span"), func() { ran <- "stopped" })
	if !stop() {
		t.Error("stop reported the func already started")
	}
	AfterFunc(&c, func() { ran <- "kept" })
	c.Cancel()
	AfterFunc(&c, func() { ran <- "late" })
	got := map[string]bool{}
	for range 2 {
		select {
		case s := <-ran:
			got[s] = true
		case <-time.After(10 * time.Second):
			t.Fatal("an AfterFunc did not run")
		}
	}
	if !got["kept"] || !got["late"] || got["stopped"] {
		t.Errorf("ran %v, want kept and late", got)
	}
	if stop() {
		t.Error("a second stop reported it stopped the func")
	}
}

// TestRoot: a Root's AfterFunc funcs run once it is cancelled, unless
// stopped; Contexts started under it and contexts derived from it end
// with it.
func TestRoot(t *testing.T) {
	r := NewRoot()
	var c Context
	c.Start(r, time.Hour)
	defer c.Cancel()
	derived, cancel := context.WithCancel(r)
	defer cancel()
	ran := make(chan string, 4)
	stop := context.AfterFunc(r, func() { ran <- "stopped" })
	context.AfterFunc(r, func() { ran <- "kept" })
	if !stop() || stop() {
		t.Error("stop did not report one stop")
	}
	if r.Err() != nil {
		t.Fatalf("Err before Cancel = %v", r.Err())
	}
	r.Cancel()
	r.Cancel()
	for _, ch := range []<-chan struct{}{r.Done(), c.Done(), derived.Done()} {
		select {
		case <-ch:
		case <-time.After(10 * time.Second):
			t.Fatal("the root, its Context or a derived context did not end")
		}
	}
	select {
	case s := <-ran:
		if s != "kept" {
			t.Errorf("ran %q, want kept", s)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the AfterFunc did not run")
	}
	if !errors.Is(c.Err(), context.Canceled) || !errors.Is(r.Err(), context.Canceled) {
		t.Errorf("Err = %v and %v, want Canceled", c.Err(), r.Err())
	}
	late := make(chan struct{})
	r.AfterFunc(func() { close(late) })
	select {
	case <-late:
	case <-time.After(10 * time.Second):
		t.Fatal("an AfterFunc registered after the end did not run")
	}
}
