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
	"strings"
	"time"

	"knative.dev/event-forwarding-proxy/delivery"
)

// retryOptions are the parts of a Knative delivery spec an async call's
// headers may carry beside its retries and first delay: how the delay
// grows (Kn-Forward-Backoff-Policy) and how long a destination's
// Retry-After may delay a retry (Kn-Forward-Retry-After-Max).
type retryOptions struct {
	linear bool
	// retryAfterMax caps Retry-After when positive; ignoreRetryAfter (PT0S)
	// makes it count for nothing.
	retryAfterMax    time.Duration
	ignoreRetryAfter bool
}

// parseRetryOptions reads h's retry options. The destination handler
// refuses a call whose options do not parse (400), so that the async
// handler, which reads them again, meets only valid ones.
func parseRetryOptions(h http.Header) (retryOptions, error) {
	var o retryOptions
	if v := h.Get(delivery.HeaderForwardBackoffPolicy); v != "" {
		switch strings.ToLower(strings.TrimSpace(v)) {
		case "linear":
			o.linear = true
		case "exponential":
		default:
			return o, errors.New(delivery.HeaderForwardBackoffPolicy + " is neither linear nor exponential")
		}
	}
	if v := h.Get(delivery.HeaderForwardRetryAfterMax); v != "" {
		d, err := delivery.ParseDuration(strings.TrimSpace(v))
		if err != nil || d < 0 {
			return o, errors.New(delivery.HeaderForwardRetryAfterMax + " is not an ISO-8601 duration such as PT30S (PT0S ignores Retry-After)")
		}
		o.retryAfterMax, o.ignoreRetryAfter = d, d == 0
	}
	return o, nil
}

// apply sets o on b, whose cap on Retry-After is the install's: a call may
// lower it, not raise it.
func (o retryOptions) apply(b *delivery.Backoff) {
	b.Linear, b.IgnoreRetryAfter = o.linear, o.ignoreRetryAfter
	if o.retryAfterMax > 0 {
		b.MaxRetryAfter = min(o.retryAfterMax, b.RetryAfterCap())
	}
}
