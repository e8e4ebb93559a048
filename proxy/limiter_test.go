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

package proxy

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// step is one limiter operation: acquire for tenant and dest expecting
// want, or, when release is set, release the ticket of the step numbered
// release-1 (1-based, so that the zero value means "acquire").
type step struct {
	tenant, dest string
	want         error
	release      int
}

func acq(tenant, dest string, want error) step { return step{tenant: tenant, dest: dest, want: want} }
func rel(stepIndex int) step                   { return step{release: stepIndex + 1} }

// repeat returns n copies of s.
func repeat(n int, s step) []step {
	out := make([]step, n)
	for i := range out {
		out[i] = s
	}
	return out
}

func seq(parts ...[]step) []step {
	var out []step
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

func TestLimiterAcquire(t *testing.T) {
	tests := []struct {
		name  string
		p     LimiterParams
		steps []step
	}{{
		name: "the fourth call is refused at MaxInflight 3, and admitted after a release",
		p:    LimiterParams{MaxInflight: 3},
		steps: seq(repeat(3, acq("a", "x", nil)), []step{
			acq("a", "x", ErrOverloaded), acq("b", "y", ErrOverloaded),
			rel(0), acq("b", "y", nil), acq("c", "z", ErrOverloaded),
		}),
	}, {
		name:  "zero MaxInflight admits nothing",
		p:     LimiterParams{},
		steps: []step{acq("a", "x", ErrOverloaded)},
	}, {
		name: "per-destination cap",
		p:    LimiterParams{MaxInflight: 5, MaxPerDestination: 2},
		steps: []step{
			acq("a", "x", nil), acq("b", "x", nil), acq("c", "x", ErrDestinationBusy),
			acq("c", "y", nil), rel(1), acq("c", "x", nil), acq("a", "x", ErrDestinationBusy),
		},
	}, {
		name: "per-tenant cap",
		p:    LimiterParams{MaxInflight: 5, MaxPerTenant: 2},
		steps: []step{
			acq("a", "x", nil), acq("a", "y", nil), acq("a", "z", ErrTenantLimited),
			acq("b", "z", nil), rel(0), acq("a", "z", nil), acq("a", "w", ErrTenantLimited),
		},
	}, {
		name: "overloaded is checked before destination and tenant",
		p:    LimiterParams{MaxInflight: 2, MaxPerDestination: 1, MaxPerTenant: 1},
		steps: []step{
			acq("a", "x", nil), acq("b", "y", nil), acq("a", "x", ErrOverloaded),
		},
	}, {
		name: "destination busy is checked before the tenant",
		p:    LimiterParams{MaxInflight: 4, MaxPerDestination: 1, MaxPerTenant: 1},
		steps: []step{
			acq("a", "x", nil), acq("a", "x", ErrDestinationBusy), acq("a", "y", ErrTenantLimited),
		},
	}, {
		// MaxInflight 10, Reserve 2: the rule applies from 8 held calls on.
		// The fair share is 10/(tenants+1): 5 with one tenant holding, 3 with
		// two, 2 with three.
		name: "reserve: a tenant over its fair share is refused, a newcomer admitted",
		p:    LimiterParams{MaxInflight: 10, Reserve: 2},
		steps: seq(
			repeat(8, acq("a", "x", nil)), // a holds 8: below the reserve it may go past its share
			[]step{
				acq("a", "x", ErrTenantLimited), // 8 held, a holds 8 >= 5
				acq("b", "x", nil),              // newcomer: 0 < 5
				acq("b", "x", nil),              // b holds 1 < 10/3
				acq("c", "x", ErrOverloaded),    // 10 held
				rel(0),                          // 9 held, a holds 7
				acq("a", "x", ErrTenantLimited), // a holds 7 >= 3
				acq("c", "x", nil),              // newcomer
			},
		),
	}, {
		name: "reserve: the fair share shrinks as tenants arrive",
		p:    LimiterParams{MaxInflight: 10, Reserve: 5},
		steps: seq(
			repeat(5, acq("a", "x", nil)),
			[]step{
				acq("a", "x", ErrTenantLimited), // 5 held, a holds 5 >= 10/2
				acq("b", "x", nil),              // b holds 0
				acq("b", "x", nil),              // b holds 1 < 10/3
				acq("b", "x", nil),              // b holds 2 < 3
				acq("b", "x", ErrTenantLimited), // b holds 3 >= 3
				acq("c", "x", nil),              // newcomer, 9 held
				acq("a", "x", ErrTenantLimited), // a holds 5 >= 10/4
				acq("c", "x", nil),              // c holds 1 < 10/4
				acq("c", "x", ErrOverloaded),    // 10 held
			},
		),
	}, {
		name:  "without reserve a tenant may fill the pod",
		p:     LimiterParams{MaxInflight: 4},
		steps: seq(repeat(4, acq("a", "x", nil)), []step{acq("b", "y", ErrOverloaded)}),
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := NewLimiter(tt.p)
			tickets := make([]Ticket, len(tt.steps))
			held := 0
			for i, s := range tt.steps {
				if s.release > 0 {
					tickets[s.release-1].Release()
					held--
				} else {
					tk, err := l.Acquire(s.tenant, s.dest)
					if !errors.Is(err, s.want) || (s.want == nil) != (err == nil) {
						t.Fatalf("step %d: Acquire(%q, %q) = %v, want %v", i, s.tenant, s.dest, err, s.want)
					}
					if err == nil {
						tickets[i] = tk
						held++
					}
				}
				if got := l.Inflight(); got != held {
					t.Fatalf("step %d: Inflight() = %d, want %d", i, got, held)
				}
			}
		})
	}
}

func TestTicketReleaseZero(t *testing.T) {
	l := NewLimiter(LimiterParams{MaxInflight: 1})
	var zero Ticket
	zero.Release() // a refused Acquire's ticket: releasing it must not free a slot
	if _, err := l.Acquire("a", "x"); err != nil {
		t.Fatal(err)
	}
	Ticket{}.Release()
	if got := l.Inflight(); got != 1 {
		t.Errorf("Inflight() = %d after releasing a zero Ticket, want 1", got)
	}
}

func TestLimiterCapacity(t *testing.T) {
	if got := NewLimiter(LimiterParams{MaxInflight: 7}).Capacity(); got != 7 {
		t.Errorf("Capacity() = %d, want 7", got)
	}
}

// TestLimiterConcurrent hammers the limiter from many goroutines: it never
// admits more than its limits, and every slot comes back.
func TestLimiterConcurrent(t *testing.T) {
	const max, perDest = 8, 3
	l := NewLimiter(LimiterParams{MaxInflight: max, MaxPerDestination: perDest, Reserve: 2})
	var (
		wg      sync.WaitGroup
		held    atomic.Int32
		dests   [4]atomic.Int32
		over    atomic.Bool
		granted atomic.Int32
	)
	for g := range 16 {
		wg.Go(func() {
			for i := range 500 {
				d := (g + i) % len(dests)
				tk, err := l.Acquire("t"+strconv.Itoa(g%5), "d"+strconv.Itoa(d))
				if err != nil {
					continue
				}
				granted.Add(1)
				if held.Add(1) > max || dests[d].Add(1) > perDest {
					over.Store(true)
				}
				dests[d].Add(-1)
				held.Add(-1)
				tk.Release()
			}
		})
	}
	wg.Wait()
	if over.Load() {
		t.Error("more calls admitted than the limits allow")
	}
	if granted.Load() == 0 {
		t.Error("nothing was admitted")
	}
	if got := l.Inflight(); got != 0 {
		t.Errorf("Inflight() = %d after every release, want 0", got)
	}
}

func TestLimiterWaitIdle(t *testing.T) {
	t.Run("idle returns at once, even with a done context", func(t *testing.T) {
		l := NewLimiter(LimiterParams{MaxInflight: 2})
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		if err := l.WaitIdle(ctx); err != nil {
			t.Errorf("WaitIdle on an idle limiter = %v, want nil", err)
		}
	})

	t.Run("blocks until the last release", func(t *testing.T) {
		l := NewLimiter(LimiterParams{MaxInflight: 2})
		t1, _ := l.Acquire("a", "x")
		t2, _ := l.Acquire("b", "y")
		done := make(chan error, 1)
		go func() { done <- l.WaitIdle(t.Context()) }()
		t1.Release()
		select {
		case err := <-done:
			t.Fatalf("WaitIdle returned %v with a call still held", err)
		case <-time.After(50 * time.Millisecond):
		}
		t2.Release()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("WaitIdle = %v, want nil", err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("WaitIdle did not return after the last release")
		}
	})

	t.Run("returns the context's error", func(t *testing.T) {
		l := NewLimiter(LimiterParams{MaxInflight: 1})
		if _, err := l.Acquire("a", "x"); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- l.WaitIdle(ctx) }()
		cancel()
		select {
		case err := <-done:
			if !errors.Is(err, context.Canceled) {
				t.Errorf("WaitIdle = %v, want context.Canceled", err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("WaitIdle did not return after its context ended")
		}
	})

	t.Run("busy again after idle blocks again", func(t *testing.T) {
		l := NewLimiter(LimiterParams{MaxInflight: 1})
		tk, _ := l.Acquire("a", "x")
		tk.Release()
		if _, err := l.Acquire("a", "x"); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(t.Context(), 20*time.Millisecond)
		defer cancel()
		if err := l.WaitIdle(ctx); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("WaitIdle with a call held = %v, want context.DeadlineExceeded", err)
		}
	})
}

func BenchmarkLimiter(b *testing.B) {
	l := NewLimiter(LimiterParams{MaxInflight: 1 << 20, MaxPerDestination: 1 << 20, MaxPerTenant: 1 << 20, Reserve: 1 << 10})
	var next atomic.Int64
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		n := next.Add(1)
		tenant, dest := "tenant-"+strconv.FormatInt(n%8, 10), "sink-"+strconv.FormatInt(n%32, 10)+".ns.svc:80"
		for pb.Next() {
			tk, err := l.Acquire(tenant, dest)
			if err != nil {
				b.Error(err)
				return
			}
			tk.Release()
		}
	})
}

// TestLimiterClosedAdmitsNothing pins the drain race: a request that passed
// the drain check just before Drain must not be admitted after WaitIdle
// has returned.
func TestLimiterClosedAdmitsNothing(t *testing.T) {
	l := NewLimiter(LimiterParams{MaxInflight: 2})
	held, err := l.Acquire("t", "d")
	if err != nil {
		t.Fatal(err)
	}
	l.Close()
	if _, err := l.Acquire("t", "d"); !errors.Is(err, ErrClosed) {
		t.Fatalf("Acquire after Close = %v, want ErrClosed", err)
	}
	if got := admissionReason(ErrClosed); got != ReasonDraining {
		t.Errorf("ErrClosed maps to %q, want %q", got, ReasonDraining)
	}
	held.Release()
	if err := l.WaitIdle(t.Context()); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Acquire("t", "d"); !errors.Is(err, ErrClosed) {
		t.Fatalf("Acquire after WaitIdle = %v, want ErrClosed", err)
	}
}
