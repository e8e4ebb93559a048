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
	"errors"
	"net/http"
	"time"
)

// NewAdmissionHandler admits a call on arrival, before its body is read or
// anything is dialed, or refuses it at once: 503 overloaded or
// destination_busy, 429 tenant_limited, each with Retry-After. A refused
// request reaches no destination, so the caller's retry cannot duplicate an
// event. Beyond a slot of l, an admitted call reserves in b (nil: no
// budget) the bytes it keeps while held: its headers, and an async call's
// body of declared length; a call they do not fit in is refused 503
// overloaded too. An async body of unknown length reserves as it is read
// (Async). A synchronous call streams its body to the destination and
// keeps none of it, so it reserves its headers only. The slot and the
// bytes are released when the call ends, or by the async worker that
// takes it over.
func NewAdmissionHandler(l *Limiter, b *MemoryBudget, next http.Handler) http.Handler {
	return &admissionHandler{l: l, b: b, next: next}
}

type admissionHandler struct {
	l    *Limiter
	b    *MemoryBudget
	next http.Handler
}

func (h *admissionHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	c := callOf(w, r)
	if !h.admit(w, c, reserveOnArrival(r, c)) {
		return
	}
	defer c.releaseIfInChain()
	h.next.ServeHTTP(w, r)
}

// admit takes c's slot and bytes of the memory budget, or refuses c.
func (h *admissionHandler) admit(w http.ResponseWriter, c *call, bytes int64) bool {
	if c.offeredBy > 0 && declinesOffer(h.l.Inflight(), c.offeredBy) {
		// The offering pod keeps the call: no refusal of a call to count.
		c.probe = true
		writeError(w, ReasonOverloaded, "this pod holds as many calls as the one that offered this call")
		return false
	}
	t, err := h.l.Acquire(c.tenant, c.destKey)
	m := reservation{b: h.b}
	if err == nil {
		if err = m.grow(bytes); err != nil {
			t.Release()
		}
	}
	if !c.start.IsZero() {
		c.metrics.admitted(time.Since(c.start).Seconds())
	}
	if err != nil {
		writeError(w, admissionReason(err), err.Error())
		return false
	}
	c.hold(t, m)
	return true
}

// reserveOnArrival is what call c of r reserves of the memory budget on
// arrival: its headers, and the body of an async call when its length is
// declared (the destination handler refused one over the event size
// already).
func reserveOnArrival(r *http.Request, c *call) int64 {
	n := headerBytes(r)
	if c.async && r.ContentLength > 0 {
		n += r.ContentLength
	}
	return n
}

func admissionReason(err error) Reason {
	switch {
	case errors.Is(err, ErrClosed):
		return ReasonDraining
	case errors.Is(err, ErrDestinationBusy):
		return ReasonDestinationBusy
	case errors.Is(err, ErrTenantLimited):
		return ReasonTenantLimited
	case errors.Is(err, ErrMemoryBudget):
		return ReasonOverloaded
	default:
		return ReasonOverloaded
	}
}
