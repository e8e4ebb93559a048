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

// Package proxy is the inbound side of the event-forwarding proxy: the
// handler chain that takes a request naming its destination in
// Kn-Forward-To, admits or refuses it, and forwards it synchronously or
// hands it off asynchronously.
package proxy

import (
	"encoding/json"
	"net/http"
	"strconv"
	"time"

	"knative.dev/event-forwarding-proxy/delivery"
)

// Reason is the machine-readable cause of an answer the proxy makes itself.
// The values are a contract (see docs/configuration.md): never rename.
type Reason string

// Reasons of the wire contract, with the status each is answered with.
const (
	ReasonMissingDestination Reason = "missing_destination" // 400
	ReasonBadDestination     Reason = "bad_destination"     // 400
	ReasonBadRequest         Reason = "bad_request"         // 400: malformed Kn-Forward-Timeout, -Retry, -Backoff-Delay or body
	ReasonUnauthenticated    Reason = "unauthenticated"     // 401
	ReasonDestinationDenied  Reason = "destination_denied"  // 403
	ReasonLoopDetected       Reason = "loop_detected"       // 403
	ReasonBodyTooLarge       Reason = "body_too_large"      // 413
	ReasonTenantLimited      Reason = "tenant_limited"      // 429
	ReasonOverloaded         Reason = "overloaded"          // 503
	ReasonDestinationBusy    Reason = "destination_busy"    // 503
	ReasonDraining           Reason = "draining"            // 503
	ReasonUnreachable        Reason = "unreachable"         // 502
	ReasonTimeout            Reason = "timeout"             // 504
)

// Status returns the HTTP status a reason is answered with.
func (r Reason) Status() int {
	switch r {
	case ReasonMissingDestination, ReasonBadDestination, ReasonBadRequest:
		return http.StatusBadRequest
	case ReasonUnauthenticated:
		return http.StatusUnauthorized
	case ReasonDestinationDenied, ReasonLoopDetected:
		return http.StatusForbidden
	case ReasonBodyTooLarge:
		return http.StatusRequestEntityTooLarge
	case ReasonTenantLimited:
		return http.StatusTooManyRequests
	case ReasonOverloaded, ReasonDestinationBusy, ReasonDraining:
		return http.StatusServiceUnavailable
	case ReasonUnreachable:
		return http.StatusBadGateway
	case ReasonTimeout:
		return http.StatusGatewayTimeout
	default:
		return http.StatusInternalServerError
	}
}

// retryAfter is the Retry-After sent with 429 and 503 answers: short, since
// Knative sends the retry to another pod or the load passes quickly.
const retryAfter = time.Second

// writeError answers a request with the proxy's own error: the
// Kn-Forward-Error header and a small JSON body. Retryable refusals (429,
// 503) carry Retry-After.
func writeError(w http.ResponseWriter, reason Reason, message string) {
	writeErrorRetryIn(w, reason, message, retryAfter)
}

// writeErrorRetryIn is writeError with the Retry-After of a retryable
// refusal set to retryIn, rounded up to whole seconds (at least one).
func writeErrorRetryIn(w http.ResponseWriter, reason Reason, message string, retryIn time.Duration) {
	if sw, ok := w.(*statusWriter); ok {
		sw.reason, sw.message = reason, message
	}
	h := w.Header()
	h.Set(delivery.HeaderForwardError, string(reason))
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	status := reason.Status()
	if status == http.StatusTooManyRequests || status == http.StatusServiceUnavailable {
		h.Set(delivery.HeaderRetryAfter, strconv.FormatInt(int64(max(retryIn+time.Second-1, time.Second)/time.Second), 10))
	}
	body, _ := json.Marshal(errorBody{Reason: reason, Message: message})
	body = append(body, '\n')
	h.Set("Content-Length", strconv.Itoa(len(body)))
	// An HTTP/2 caller that does not read (a zero flow-control window)
	// must not keep the goroutine that answers it: the answer is small,
	// so its write gets stalledWriteGrace, and the stream is cut after
	// that. The deadline goes once the write returns, for the next
	// request on the connection. (An HTTP/1.1 answer is written once the
	// handler returns, on the connection's own goroutine, so that the
	// call is recorded before its caller has the answer.)
	rc := http.NewResponseController(w)
	_ = rc.SetWriteDeadline(time.Now().Add(stalledWriteGrace))
	w.WriteHeader(status)
	_, _ = w.Write(body)
	_ = rc.SetWriteDeadline(time.Time{})
}

// errorBody is the JSON body of the proxy's own answers.
type errorBody struct {
	Reason  Reason `json:"reason"`
	Message string `json:"message"`
}
