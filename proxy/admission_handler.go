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
// event. The slot is released when the call ends, or by the async worker
// that takes it over.
func NewAdmissionHandler(l *Limiter, next http.Handler) http.Handler {
	return &admissionHandler{l: l, next: next}
}

type admissionHandler struct {
	l    *Limiter
	next http.Handler
}

func (h *admissionHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	c := callOf(w, r)
	if !h.admit(w, c) {
		return
	}
	defer c.releaseIfInChain()
	h.next.ServeHTTP(w, r)
}

// admit takes c's slot, or refuses c.
func (h *admissionHandler) admit(w http.ResponseWriter, c *call) bool {
	t, err := h.l.Acquire(c.tenant, c.destKey)
	if !c.start.IsZero() {
		c.metrics.admitted(time.Since(c.start).Seconds())
	}
	if err != nil {
		writeError(w, admissionReason(err), err.Error())
		return false
	}
	c.hold(t)
	return true
}

func admissionReason(err error) Reason {
	switch {
	case errors.Is(err, ErrClosed):
		return ReasonDraining
	case errors.Is(err, ErrDestinationBusy):
		return ReasonDestinationBusy
	case errors.Is(err, ErrTenantLimited):
		return ReasonTenantLimited
	default:
		return ReasonOverloaded
	}
}
