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

package delivery_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"knative.dev/event-forwarding-proxy/delivery"
)

// fakeClock is a clock the test moves by hand.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// scriptedDial fails or succeeds as told and counts its calls.
type scriptedDial struct {
	calls atomic.Int64
	fail  atomic.Bool
	err   error // the failure; if nil, connection refused
}

var errRefused = &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}

func (d *scriptedDial) dial(ctx context.Context, _, _ string) (net.Conn, error) {
	d.calls.Add(1)
	switch {
	case ctx.Err() != nil:
		return nil, ctx.Err()
	case d.fail.Load() && d.err != nil:
		return nil, d.err
	case d.fail.Load():
		return nil, errRefused
	}
	c1, c2 := net.Pipe()
	_ = c2.Close()
	return c1, nil
}

// step is one dial of a breaker scenario.
type step struct {
	wait     time.Duration // clock moves first
	fail     bool          // the destination is down
	addr     string        // if empty, "a:80"
	wantOpen bool          // refused at once with ErrBreakerOpen, without dialing
}

func TestBreakers(t *testing.T) {
	p := delivery.BreakerParams{Failures: 3, Window: 10 * time.Second, Cooldown: 5 * time.Second}
	down := step{fail: true}
	open := step{fail: true, wantOpen: true}
	tests := []struct {
		name  string
		p     delivery.BreakerParams
		steps []step
	}{
		{name: "opens after Failures in a row", p: p, steps: []step{down, down, down, open, open}},
		{name: "a success resets the count", p: p, steps: []step{down, down, {}, down, down, down, open}},
		{name: "failures further apart than the window do not add up", p: p,
			steps: []step{down, down, {wait: 11 * time.Second, fail: true}, down, down, open}},
		{name: "failures exactly the window apart add up", p: p,
			steps: []step{down, {wait: 10 * time.Second, fail: true}, {wait: 10 * time.Second, fail: true}, open}},
		{name: "still open just before the cool-down ends", p: p,
			steps: []step{down, down, down, {wait: 5*time.Second - time.Millisecond, fail: true, wantOpen: true}}},
		{name: "half-open probe fails: open again for a cool-down", p: p,
			steps: []step{down, down, down, {wait: 5 * time.Second, fail: true}, open, {wait: 4 * time.Second, wantOpen: true}, {wait: time.Second}}},
		{name: "half-open probe succeeds: closed", p: p,
			steps: []step{down, down, down, {wait: 5 * time.Second}, {}, {}, down, down, down, open}},
		{name: "one circuit per destination", p: p,
			steps: []step{down, down, down, open, {addr: "b:80"}, {addr: "a:81"}, open}},
		{name: "a threshold of one", p: delivery.BreakerParams{Failures: 1, Cooldown: time.Second},
			steps: []step{down, open, {wait: time.Second}, {}}},
		{name: "zero Failures: never opens", p: delivery.BreakerParams{},
			steps: []step{down, down, down, down, down, down, down, down, down, down, down}},
		{name: "defaults: window 10s, cool-down 5s", p: delivery.BreakerParams{Failures: 2},
			steps: []step{down, {wait: 10 * time.Second, fail: true}, open, {wait: 5*time.Second - time.Nanosecond, wantOpen: true}, {wait: time.Nanosecond}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clock := &fakeClock{now: time.Unix(1000, 0)}
			tt.p.Now = clock.Now
			d := &scriptedDial{}
			dial := delivery.NewBreakers(tt.p).Dial(d.dial)
			for i, s := range tt.steps {
				clock.advance(s.wait)
				d.fail.Store(s.fail)
				addr := s.addr
				if addr == "" {
					addr = "a:80"
				}
				before := d.calls.Load()
				conn, err := dial(context.Background(), "tcp", addr)
				if conn != nil {
					_ = conn.Close()
				}
				dialed := d.calls.Load() - before
				switch {
				case s.wantOpen && (!errors.Is(err, delivery.ErrBreakerOpen) || dialed != 0):
					t.Fatalf("step %d: err %v after %d dials, want ErrBreakerOpen without dialing", i, err, dialed)
				case !s.wantOpen && errors.Is(err, delivery.ErrBreakerOpen):
					t.Fatalf("step %d: refused (%v), want a dial", i, err)
				case !s.wantOpen && (s.fail != (err != nil)):
					t.Fatalf("step %d: err %v, want failure %v", i, err, s.fail)
				}
			}
		})
	}
}

// TestBreakerIgnores: what says nothing about the destination's health
// neither opens a circuit nor keeps a half-open one busy.
func TestBreakerIgnores(t *testing.T) {
	tests := []struct {
		name string
		err  error
		ctx  func() context.Context
	}{
		{name: "the caller left", ctx: func() context.Context {
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			return ctx
		}},
		{name: "the call's deadline passed", ctx: func() context.Context {
			ctx, cancel := context.WithDeadline(context.Background(), time.Unix(1, 0))
			cancel() // already past its deadline: cancelling changes nothing
			return ctx
		}},
		{name: "the destination policy refused the address", err: fmt.Errorf("dial: %w", delivery.ErrDestinationDenied)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clock := &fakeClock{now: time.Unix(1000, 0)}
			b := delivery.NewBreakers(delivery.BreakerParams{Failures: 1, Cooldown: time.Second, Now: clock.Now})
			d := &scriptedDial{err: tt.err}
			d.fail.Store(true)
			dial := b.Dial(d.dial)
			ctx := context.Background()
			if tt.ctx != nil {
				ctx = tt.ctx()
			}
			for range 3 {
				if _, err := dial(ctx, "tcp", "a:80"); errors.Is(err, delivery.ErrBreakerOpen) {
					t.Fatalf("the circuit opened on %v", err)
				}
			}
			if d.calls.Load() != 3 {
				t.Errorf("%d dials, want 3", d.calls.Load())
			}
		})
	}
}

// TestBreakerHalfOpenLetsOneProbe: after the cool-down, of many dials at
// once exactly one goes through while it lasts; the others are refused.
func TestBreakerHalfOpenLetsOneProbe(t *testing.T) {
	clock := &fakeClock{now: time.Unix(1000, 0)}
	b := delivery.NewBreakers(delivery.BreakerParams{Failures: 1, Cooldown: time.Second, Now: clock.Now})
	release, entered := make(chan struct{}), make(chan struct{}, 32)
	var dials atomic.Int64
	dial := b.Dial(func(ctx context.Context, _, _ string) (net.Conn, error) {
		switch dials.Add(1) {
		case 1:
			return nil, errRefused
		case 2: // the probe: held until the others have tried
			entered <- struct{}{}
			<-release
		}
		c1, c2 := net.Pipe()
		_ = c2.Close()
		return c1, nil
	})
	if _, err := dial(context.Background(), "tcp", "a:80"); err == nil {
		t.Fatal("the first dial succeeded")
	}
	clock.advance(time.Second)
	var wg sync.WaitGroup
	var refused atomic.Int64
	probe := make(chan error, 1)
	go func() {
		conn, err := dial(context.Background(), "tcp", "a:80")
		if conn != nil {
			_ = conn.Close()
		}
		probe <- err
	}()
	<-entered // the probe is dialing
	for range 20 {
		wg.Go(func() {
			if _, err := dial(context.Background(), "tcp", "a:80"); errors.Is(err, delivery.ErrBreakerOpen) {
				refused.Add(1)
			}
		})
	}
	wg.Wait()
	close(release)
	if err := <-probe; err != nil {
		t.Errorf("the probe failed: %v", err)
	}
	if refused.Load() != 20 || dials.Load() != 2 {
		t.Errorf("%d refused and %d dials while the probe was in flight, want 20 and 2", refused.Load(), dials.Load())
	}
	if b.Tracked() != 0 {
		t.Errorf("%d destinations tracked after a successful probe, want 0", b.Tracked())
	}
}

// TestBreakerMemoryBounded: failures of many distinct destinations keep at
// most MaxTracked of them, and old ones make room.
func TestBreakerMemoryBounded(t *testing.T) {
	clock := &fakeClock{now: time.Unix(1000, 0)}
	b := delivery.NewBreakers(delivery.BreakerParams{Failures: 2, Window: time.Second, MaxTracked: 100, Now: clock.Now})
	d := &scriptedDial{}
	d.fail.Store(true)
	dial := b.Dial(d.dial)
	for i := range 1000 {
		_, _ = dial(context.Background(), "tcp", fmt.Sprintf("h%d:80", i))
	}
	if n := b.Tracked(); n > 100 {
		t.Fatalf("%d destinations tracked, want at most 100", n)
	}
	clock.advance(2 * time.Second)
	for i := range 50 {
		_, _ = dial(context.Background(), "tcp", fmt.Sprintf("new%d:80", i))
	}
	if n := b.Tracked(); n != 50 {
		t.Errorf("%d destinations tracked after the old ones aged out, want 50", n)
	}
}
