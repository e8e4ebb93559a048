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

package delivery

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"
)

// ErrBreakerOpen is wrapped by every dial refused because the destination's
// circuit is open: it failed to connect too many times in a row, and the
// call is refused at once instead of waiting for another failure.
var ErrBreakerOpen = errors.New("destination circuit open")

// BreakerOpenError is a dial refused by an open circuit; it wraps
// ErrBreakerOpen and says when the circuit lets a probe through again.
type BreakerOpenError struct {
	Addr     string
	Failures int
	// RetryIn is the cool-down left; zero while a probe is in flight (the
	// circuit opens or closes as soon as it ends).
	RetryIn time.Duration
}

func (e *BreakerOpenError) Error() string {
	if e.RetryIn > 0 {
		return fmt.Sprintf("%v: %s failed to connect %d times in a row; next try in %s",
			ErrBreakerOpen, e.Addr, e.Failures, e.RetryIn.Round(time.Millisecond))
	}
	return fmt.Sprintf("%v: %s failed to connect %d times in a row; a probe is in flight", ErrBreakerOpen, e.Addr, e.Failures)
}

func (e *BreakerOpenError) Unwrap() error { return ErrBreakerOpen }

// BreakerParams configure the circuit breaker kept for each destination
// (host:port as dialed).
type BreakerParams struct {
	// Failures is the number of connect failures in a row (DNS, TCP
	// connect or its timeout) that opens a destination's circuit. If zero,
	// the breaker is off.
	Failures int
	// Window bounds a streak: a failure more than Window after the previous
	// one starts a new count. If zero, 10 s.
	Window time.Duration
	// Cooldown is how long an open circuit refuses every dial before it lets
	// one probe through (half-open). If zero, 5 s.
	Cooldown time.Duration
	// MaxTracked bounds the destinations with failures on record; beyond
	// it, failures of new destinations are not tracked. If zero, 10000.
	MaxTracked int
	// Now is the clock. If nil, time.Now.
	Now func() time.Time
}

// Breakers keeps one circuit per destination. Only destinations that failed
// recently are remembered: a successful connect forgets the destination.
// It is safe for concurrent use.
type Breakers struct {
	p     BreakerParams
	mu    sync.Mutex
	hosts map[string]*circuit
}

// circuit is the state of one destination: closed while failures < the
// threshold, open until openUntil, then half-open with one probe in flight.
type circuit struct {
	failures  int
	last      time.Time // last failure
	openUntil time.Time // zero while closed
	probing   bool
}

// NewBreakers returns the breakers configured by p.
func NewBreakers(p BreakerParams) *Breakers {
	if p.Window <= 0 {
		p.Window = 10 * time.Second
	}
	if p.Cooldown <= 0 {
		p.Cooldown = 5 * time.Second
	}
	if p.MaxTracked <= 0 {
		p.MaxTracked = 10000
	}
	if p.Now == nil {
		p.Now = time.Now
	}
	return &Breakers{p: p, hosts: map[string]*circuit{}}
}

// DialFunc is the shape of net.Dialer.DialContext.
type DialFunc func(ctx context.Context, network, addr string) (net.Conn, error)

// Dial wraps dial: a destination whose circuit is open is refused at once
// with an error wrapping ErrBreakerOpen, without dialing; every other dial
// goes through and its outcome is recorded. With Failures zero, dial comes
// back unchanged.
func (b *Breakers) Dial(dial DialFunc) DialFunc {
	if b == nil || b.p.Failures <= 0 {
		return dial
	}
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		probe, err := b.allow(addr)
		if err != nil {
			return nil, err
		}
		conn, err := dial(ctx, network, addr)
		b.record(addr, probe, dialVerdict(ctx, err))
		return conn, err
	}
}

// verdict is what one dial says of its destination.
type verdict int

const (
	neutral verdict = iota // says nothing: the caller left, or the policy refused
	healthy
	failing
)

func dialVerdict(ctx context.Context, err error) verdict {
	switch {
	case err == nil:
		return healthy
	case ctx.Err() != nil, errors.Is(err, ErrDestinationDenied), errors.Is(err, context.Canceled):
		return neutral
	default:
		return failing
	}
}

// allow says whether addr may be dialed now, and whether that dial is the
// half-open probe.
func (b *Breakers) allow(addr string) (probe bool, err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	c := b.hosts[addr]
	if c == nil || c.openUntil.IsZero() {
		return false, nil
	}
	now := b.p.Now()
	switch {
	case now.Before(c.openUntil):
		return false, &BreakerOpenError{Addr: addr, Failures: c.failures, RetryIn: c.openUntil.Sub(now)}
	case c.probing:
		return false, &BreakerOpenError{Addr: addr, Failures: c.failures}
	default:
		c.probing = true
		return true, nil
	}
}

func (b *Breakers) record(addr string, probe bool, v verdict) {
	b.mu.Lock()
	defer b.mu.Unlock()
	c := b.hosts[addr]
	switch v {
	case healthy:
		delete(b.hosts, addr)
		return
	case neutral:
		if probe && c != nil {
			c.probing = false
		}
		return
	}
	now := b.p.Now()
	if c == nil {
		if len(b.hosts) >= b.p.MaxTracked && !b.prune(now) {
			return
		}
		c = &circuit{}
		b.hosts[addr] = c
	}
	if c.openUntil.IsZero() && now.Sub(c.last) > b.p.Window {
		c.failures = 0
	}
	c.failures++
	c.last = now
	if probe || c.failures >= b.p.Failures {
		c.openUntil = now.Add(b.p.Cooldown)
		c.probing = false
	}
}

// prune forgets the closed circuits whose last failure is older than the
// window and the open ones nobody called for a window after their
// cool-down, and reports whether room was made.
func (b *Breakers) prune(now time.Time) bool {
	for addr, c := range b.hosts {
		closedAndOld := c.openUntil.IsZero() && now.Sub(c.last) > b.p.Window
		openButForgotten := !c.openUntil.IsZero() && !c.probing && now.Sub(c.openUntil) > b.p.Window
		if closedAndOld || openButForgotten {
			delete(b.hosts, addr)
		}
	}
	return len(b.hosts) < b.p.MaxTracked
}

// Tracked returns how many destinations have failures on record.
func (b *Breakers) Tracked() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.hosts)
}

// dialFailed reports whether err is a failure to connect (DNS included),
// as opposed to a failure after the connection was made.
func dialFailed(err error) bool {
	var op *net.OpError
	var dns *net.DNSError
	return errors.As(err, &op) && op.Op == "dial" || errors.As(err, &dns)
}
