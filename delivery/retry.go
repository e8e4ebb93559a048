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
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Backoff decides how long to wait before each retry: exponential from
// Delay, capped at Max, with jitter, and never shorter than what the
// destination asked for with Retry-After (up to MaxRetryAfter).
type Backoff struct {
	// Retries is how many times a failed call is tried again.
	// If zero, it is not retried. (int32: a held async event keeps a
	// Backoff, packed with the two flags below.)
	Retries int32
	// Linear makes retry n wait n times Delay instead of 2^(n-1) times
	// (a Knative delivery spec's backoffPolicy: linear).
	Linear bool
	// IgnoreRetryAfter makes Retry-After answers count for nothing (a
	// Knative delivery spec's retryAfterMax: PT0S).
	IgnoreRetryAfter bool
	// Delay is the wait before the first retry; it doubles with each
	// further one, or with Linear grows by itself. If zero, 500 ms.
	Delay time.Duration
	// Max caps the wait. If zero, 1 minute.
	Max time.Duration
	// MaxRetryAfter caps how long a Retry-After answer can make the caller
	// wait. If zero, DefaultMaxRetryAfter.
	MaxRetryAfter time.Duration
	// Rand returns a number in [0, n) and drives the jitter.
	// If nil, math/rand/v2.Int64N.
	Rand func(n int64) int64
}

// Wait returns how long to wait before retry number attempt (1 for the
// first retry). The wait is drawn uniformly from its upper half so that
// senders that failed together do not retry together; retryAfter, when
// positive and not ignored, is a floor.
func (b Backoff) Wait(attempt int, retryAfter time.Duration) time.Duration {
	base, ceiling := b.Delay, b.Max
	if base <= 0 {
		base = 500 * time.Millisecond
	}
	if ceiling <= 0 {
		ceiling = time.Minute
	}
	d := base
	switch {
	case b.Linear && attempt > 1 && base > ceiling/time.Duration(attempt):
		d = ceiling // attempt times base would pass the cap (or overflow)
	case b.Linear && attempt > 1:
		d = base * time.Duration(attempt)
	case !b.Linear:
		for i := 1; i < attempt && d < ceiling; i++ {
			if d > ceiling/2 { // doubling would pass the cap (or overflow)
				d = ceiling
				break
			}
			d *= 2
		}
	}
	d = min(d, ceiling)
	if half := int64(d / 2); half > 0 {
		rnd := b.Rand
		if rnd == nil {
			rnd = rand.Int64N
		}
		d = time.Duration(half + rnd(half+1))
	}
	if retryAfter > 0 && !b.IgnoreRetryAfter {
		d = max(d, min(retryAfter, b.RetryAfterCap()))
	}
	return d
}

// DefaultMaxRetryAfter is Backoff's cap on Retry-After when MaxRetryAfter
// is zero.
const DefaultMaxRetryAfter = 5 * time.Minute

// RetryAfterCap is the longest a Retry-After answer can make the caller
// wait: MaxRetryAfter, or DefaultMaxRetryAfter if it is zero.
func (b Backoff) RetryAfterCap() time.Duration {
	if b.MaxRetryAfter <= 0 {
		return DefaultMaxRetryAfter
	}
	return b.MaxRetryAfter
}

// RetryableAsync reports whether an asynchronous call that ended with resp
// or err is worth another try: network failures, 404 (a revision not yet
// routable), 408, 409, 429 and every 5xx. Anything else is final.
func RetryableAsync(resp *http.Response, err error) bool {
	if err != nil {
		return true
	}
	switch c := resp.StatusCode; c {
	case http.StatusNotFound, http.StatusRequestTimeout,
		http.StatusConflict, http.StatusTooManyRequests:
		return true
	default:
		return c >= 500
	}
}

// RetryAfter reads a Retry-After header given in seconds or as an HTTP
// date relative to now. It returns zero when the header is absent, invalid
// or in the past.
func RetryAfter(h http.Header, now time.Time) time.Duration {
	v := strings.TrimSpace(h.Get(HeaderRetryAfter))
	if v == "" {
		return 0
	}
	if secs, err := strconv.ParseInt(v, 10, 64); err == nil {
		if secs <= 0 || secs > int64(24*time.Hour/time.Second) {
			return 0
		}
		return time.Duration(secs) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}
