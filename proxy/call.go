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
	"net/http"
	"net/url"
	"time"
)

// call is what the handler chain learns about one request, built once by
// the destination handler and read by the handlers after it.
//
// A held call keeps it for minutes: its one-byte fields sit together, so
// that it fits a 256-byte allocation.
type call struct {
	dest      *url.URL      // validated destination
	destKey   string        // host:port, the per-destination limit's key
	namespace string        // destination namespace, "" when not a cluster service
	tenant    string        // whom fairness counts this call against
	timeout   time.Duration // deadline of the call to the destination

	async         bool  // Prefer: respond-async
	phase         phase // who ends the call (see phase); the chain's goroutine only
	authenticated bool  // a verified caller (auth on)
	probe         bool  // a probe, or an offer declined (Spreader): not counted
	spread        bool  // async: another pod took it (Spreader)

	offeredBy int32         // async: another pod offered it, holding this many calls
	retries   int32         // async only: retries after the first attempt
	backoff   time.Duration // async only: first retry delay

	body   *guardedBody // the request body, read on the caller's behalf
	ticket Ticket       // admission slot
	memory reservation  // what the call keeps of the memory budget; released with the slot

	held *observation // an HTTP/2 request, whose chain may outlive it (observeHandler.hold)
	// brokeOff: the destination's answer broke off after its head went to
	// the caller, which gets it aborted (forwarder.answer); set and read
	// on the goroutine that writes the answer.
	brokeOff error

	caller        Identity // who, when authenticated
	onlyNamespace string   // a caller that may reach only this namespace

	metrics *Metrics  // nil records nothing
	start   time.Time // arrival
}

// hold counts the admitted call as held until release, with the bytes
// reserved for it.
func (c *call) hold(t Ticket, m reservation) {
	c.ticket, c.memory = t, m
	c.metrics.held(c.namespace, c.tenant, 1)
}

// release gives the admission slot and the call's bytes of the memory
// budget back; exactly once per hold.
func (c *call) release() {
	c.memory.release()
	c.ticket.Release()
	c.metrics.held(c.namespace, c.tenant, -1)
}

// releaseIfInChain releases c's slot when the handler that admitted it
// returns, unless the call left the chain with it.
func (c *call) releaseIfInChain() {
	if c.phase == inChain {
		c.release()
	}
}

// leave hands c's end from the chain to whoever p names. Once it has left,
// the chain's handlers neither release its slot nor end its request.
func (c *call) leave(p phase) { c.phase = p }

// phase says who ends a call: who gives its admission slot back, records
// its outcome and ends its request. It starts inChain and leaves it at
// most once, always on the goroutine that runs the chain, before the new
// owner can run; so it needs no lock.
//
//	inChain    the chain: the handlers return, admission releases the slot,
//	           the observe handler records the call and ends the request.
//	delivering async: the request ends with the 202 as inChain; the
//	           delivery goroutine owns the slot and releases it (Async.finish).
//	suspended  an HTTP/2 caller's call out to an h2c destination, with no
//	           goroutine of its own: the transport's callback writes the
//	           answer and ends everything (forwarding.resumed, observation.resumed).
//	handedOff  an HTTP/2 caller's call to an HTTP/1.1 destination: once the
//	           chain is done, a fresh goroutine runs it (observeHandler.settle)
//	           and ends everything as suspended does.
type phase uint8

const (
	inChain phase = iota
	delivering
	suspended
	handedOff
)

// outlivesChain reports whether the call's request ends after the chain,
// by whoever took it over.
func (p phase) outlivesChain() bool { return p == suspended || p == handedOff }

type callKey struct{}

func withCall(ctx context.Context, c *call) context.Context {
	return context.WithValue(ctx, callKey{}, c)
}

// callOf returns the call of r, which came with w: the one the observe
// handler keeps with its writer, or else (a handler used on its own) the
// one in r's context. Keeping it with the writer spares every call a copy
// of its request (WithContext) for as long as it is held.
func callOf(w http.ResponseWriter, r *http.Request) *call {
	if sw, ok := w.(*statusWriter); ok && sw.c != nil {
		return sw.c
	}
	return callFrom(r.Context())
}

func callFrom(ctx context.Context) *call {
	c, _ := ctx.Value(callKey{}).(*call)
	return c
}
