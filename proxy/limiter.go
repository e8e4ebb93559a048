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
	"sync"
)

// Sentinel errors of Limiter.Acquire; the admission handler maps each to
// its reason with errors.Is.
var (
	// ErrOverloaded: the pod holds as many calls as it may.
	ErrOverloaded = errors.New("the pod holds its maximum of calls")
	// ErrDestinationBusy: the destination holds as many calls as it may.
	ErrDestinationBusy = errors.New("the destination holds its maximum of calls")
	// ErrTenantLimited: the tenant holds its share of the pod.
	ErrTenantLimited = errors.New("the tenant holds its share of the pod")
	// ErrClosed: the pod is draining and admits nothing new.
	ErrClosed = errors.New("the proxy is shutting down")
)

// LimiterParams are the admission limits of one pod.
type LimiterParams struct {
	// MaxInflight is the most calls the pod holds, sync and async together.
	// If zero, nothing is admitted.
	MaxInflight int
	// MaxPerDestination is the most calls one destination host holds.
	// If zero, MaxInflight.
	MaxPerDestination int
	// MaxPerTenant is the most calls one tenant holds. If zero, MaxInflight.
	MaxPerTenant int
	// Reserve is the number of the pod's last free slots that only a tenant
	// below its fair share may take; the fair share is MaxInflight divided
	// by one more than the number of tenants holding calls, so there is
	// always room for a newcomer. If zero, no slot is reserved.
	Reserve int
}

// Limiter admits a call on arrival or refuses it at once: it never queues.
// It is safe for concurrent use.
type Limiter struct {
	p LimiterParams

	mu      sync.Mutex
	total   int
	dests   map[string]int
	tenants map[string]int
	idle    chan struct{} // closed while total == 0
	closed  bool
}

// NewLimiter returns a Limiter with the given limits.
func NewLimiter(p LimiterParams) *Limiter {
	if p.MaxPerDestination <= 0 {
		p.MaxPerDestination = p.MaxInflight
	}
	if p.MaxPerTenant <= 0 {
		p.MaxPerTenant = p.MaxInflight
	}
	idle := make(chan struct{})
	close(idle)
	return &Limiter{p: p, dests: map[string]int{}, tenants: map[string]int{}, idle: idle}
}

// Capacity returns the pod's admission limit.
func (l *Limiter) Capacity() int { return l.p.MaxInflight }

// Ticket is one admitted call. Release it exactly once.
type Ticket struct {
	l            *Limiter
	tenant, dest string
}

// Acquire admits a call of tenant to dest, or returns ErrClosed,
// ErrOverloaded, ErrDestinationBusy or ErrTenantLimited, checked in that
// order.
func (l *Limiter) Acquire(tenant, dest string) (Ticket, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	t := l.tenants[tenant]
	switch {
	case l.closed:
		return Ticket{}, ErrClosed
	case l.total >= l.p.MaxInflight:
		return Ticket{}, ErrOverloaded
	case l.dests[dest] >= l.p.MaxPerDestination:
		return Ticket{}, ErrDestinationBusy
	case t >= l.p.MaxPerTenant:
		return Ticket{}, ErrTenantLimited
	case l.total >= l.p.MaxInflight-l.p.Reserve && t >= max(1, l.p.MaxInflight/(len(l.tenants)+1)):
		return Ticket{}, ErrTenantLimited
	}
	if l.total == 0 {
		l.idle = make(chan struct{})
	}
	l.total++
	l.dests[dest]++
	l.tenants[tenant] = t + 1
	return Ticket{l: l, tenant: tenant, dest: dest}, nil
}

// Release gives the ticket's slot back.
func (t Ticket) Release() {
	l := t.l
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.total--
	decr(l.dests, t.dest)
	decr(l.tenants, t.tenant)
	if l.total == 0 {
		close(l.idle)
	}
}

func decr(m map[string]int, k string) {
	if m[k] <= 1 {
		delete(m, k)
	} else {
		m[k]--
	}
}

// Close makes every later Acquire fail with ErrClosed, so that once
// WaitIdle returns after Close, nothing is held and nothing can start.
func (l *Limiter) Close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.closed = true
}

// Inflight returns the number of calls held now.
func (l *Limiter) Inflight() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.total
}

// WaitIdle returns when no call is held, or with ctx's error.
func (l *Limiter) WaitIdle(ctx context.Context) error {
	for {
		l.mu.Lock()
		idle, total := l.idle, l.total
		l.mu.Unlock()
		if total == 0 {
			return nil
		}
		select {
		case <-idle:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
