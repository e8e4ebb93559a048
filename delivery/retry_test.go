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
	"errors"
	"net/http"
	"strconv"
	"testing"
	"time"

	"knative.dev/event-forwarding-proxy/delivery"
)

// lowest and highest are jitter sources that pick either end of [0, n).
func lowest(int64) int64    { return 0 }
func highest(n int64) int64 { return n - 1 }

// noRand fails the test if the jitter source is consulted.
func noRand(t *testing.T) func(int64) int64 {
	return func(n int64) int64 {
		t.Errorf("Rand(%d) called, want no jitter", n)
		return 0
	}
}

func TestBackoffWait(t *testing.T) {
	const hugeMax = 2562047 * time.Hour // the largest time.ParseDuration accepts in hours
	tests := []struct {
		name       string
		b          delivery.Backoff
		attempt    int
		retryAfter time.Duration
		// low and high are the waits with the lowest and the highest jitter.
		low, high time.Duration
	}{
		{name: "defaults first retry", attempt: 1, low: 250 * time.Millisecond, high: 500 * time.Millisecond},
		{name: "attempt zero is the first", attempt: 0, low: 250 * time.Millisecond, high: 500 * time.Millisecond},
		{name: "negative attempt is the first", attempt: -3, low: 250 * time.Millisecond, high: 500 * time.Millisecond},
		{name: "first retry", b: delivery.Backoff{Delay: time.Second}, attempt: 1, low: 500 * time.Millisecond, high: time.Second},
		{name: "second retry doubles", b: delivery.Backoff{Delay: time.Second}, attempt: 2, low: time.Second, high: 2 * time.Second},
		{name: "third retry doubles again", b: delivery.Backoff{Delay: time.Second}, attempt: 3, low: 2 * time.Second, high: 4 * time.Second},
		{name: "capped at Max", b: delivery.Backoff{Delay: time.Second, Max: 5 * time.Second}, attempt: 4, low: 2500 * time.Millisecond, high: 5 * time.Second},
		{name: "stays capped", b: delivery.Backoff{Delay: time.Second, Max: 5 * time.Second}, attempt: 1000, low: 2500 * time.Millisecond, high: 5 * time.Second},
		{name: "default Max is a minute", b: delivery.Backoff{Delay: time.Second}, attempt: 10, low: 30 * time.Second, high: time.Minute},
		{name: "Delay above Max", b: delivery.Backoff{Delay: 10 * time.Second, Max: 2 * time.Second}, attempt: 1, low: time.Second, high: 2 * time.Second},
		{name: "odd delay", b: delivery.Backoff{Delay: 3 * time.Nanosecond}, attempt: 1, low: time.Nanosecond, high: 2 * time.Nanosecond},
		{name: "Retry-After is a floor", b: delivery.Backoff{Delay: time.Second}, attempt: 1, retryAfter: 10 * time.Second, low: 10 * time.Second, high: 10 * time.Second},
		{name: "Retry-After ignored", b: delivery.Backoff{Delay: time.Second, IgnoreRetryAfter: true}, attempt: 1, retryAfter: 10 * time.Second, low: 500 * time.Millisecond, high: time.Second},
		{name: "linear first retry", b: delivery.Backoff{Delay: time.Second, Linear: true}, attempt: 1, low: 500 * time.Millisecond, high: time.Second},
		{name: "linear third retry", b: delivery.Backoff{Delay: time.Second, Linear: true}, attempt: 3, low: 1500 * time.Millisecond, high: 3 * time.Second},
		{name: "linear capped at Max", b: delivery.Backoff{Delay: time.Second, Max: 5 * time.Second, Linear: true}, attempt: 6, low: 2500 * time.Millisecond, high: 5 * time.Second},
		{name: "linear far past Max", b: delivery.Backoff{Delay: time.Hour, Max: 2 * time.Hour, Linear: true}, attempt: 1 << 40, low: time.Hour, high: 2 * time.Hour},
		{name: "short Retry-After leaves jitter", b: delivery.Backoff{Delay: time.Second}, attempt: 1, retryAfter: 700 * time.Millisecond, low: 700 * time.Millisecond, high: time.Second},
		{name: "Retry-After capped by MaxRetryAfter", b: delivery.Backoff{Delay: time.Second, MaxRetryAfter: 3 * time.Second}, attempt: 1, retryAfter: 10 * time.Second, low: 3 * time.Second, high: 3 * time.Second},
		{name: "capped Retry-After below backoff", b: delivery.Backoff{Delay: 8 * time.Second, MaxRetryAfter: 3 * time.Second}, attempt: 1, retryAfter: time.Hour, low: 4 * time.Second, high: 8 * time.Second},
		{name: "default MaxRetryAfter is five minutes", b: delivery.Backoff{Delay: time.Second}, attempt: 1, retryAfter: time.Hour, low: 5 * time.Minute, high: 5 * time.Minute},
		{name: "negative Retry-After ignored", b: delivery.Backoff{Delay: time.Second}, attempt: 1, retryAfter: -time.Hour, low: 500 * time.Millisecond, high: time.Second},
		// Regression: with a Max near the largest duration, doubling
		// overflowed and Wait returned negative or zero waits.
		{name: "huge Max, attempt 35", b: delivery.Backoff{Delay: 500 * time.Millisecond, Max: hugeMax}, attempt: 35, low: 8589934592 * time.Second / 2, high: 8589934592 * time.Second},
		{name: "huge Max, attempt 36", b: delivery.Backoff{Delay: 500 * time.Millisecond, Max: hugeMax}, attempt: 36, low: hugeMax / 2, high: hugeMax},
		{name: "huge Max, attempt 64", b: delivery.Backoff{Delay: 500 * time.Millisecond, Max: hugeMax}, attempt: 64, low: hugeMax / 2, high: hugeMax},
		{name: "largest Max, attempt 1000", b: delivery.Backoff{Delay: time.Second, Max: time.Duration(1<<63 - 1)}, attempt: 1000, low: time.Duration(1<<63-1) / 2, high: time.Duration(1<<63-1) - 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, pick := range []struct {
				name string
				rand func(int64) int64
				want time.Duration
			}{{"lowest", lowest, tt.low}, {"highest", highest, tt.high}} {
				b := tt.b
				b.Rand = pick.rand
				if got := b.Wait(tt.attempt, tt.retryAfter); got != pick.want {
					t.Errorf("%+v.Wait(%d, %v) with %s jitter = %v, want %v", tt.b, tt.attempt, tt.retryAfter, pick.name, got, pick.want)
				}
			}
		})
	}
}

func TestBackoffWaitRandRange(t *testing.T) {
	var gotN []int64
	b := delivery.Backoff{Delay: time.Second, Rand: func(n int64) int64 { gotN = append(gotN, n); return 0 }}
	b.Wait(1, 0)
	b.Wait(3, 0)
	// The jitter is drawn from [d/2, d]: Rand must be asked for [0, d/2+1).
	want := []int64{int64(500*time.Millisecond) + 1, int64(2*time.Second) + 1}
	if len(gotN) != len(want) || gotN[0] != want[0] || gotN[1] != want[1] {
		t.Errorf("Rand called with %v, want %v", gotN, want)
	}
}

func TestBackoffWaitNoJitterBelowTwoNanoseconds(t *testing.T) {
	b := delivery.Backoff{Delay: time.Nanosecond, Max: time.Nanosecond, Rand: noRand(t)}
	if got := b.Wait(5, 0); got != time.Nanosecond {
		t.Errorf("Wait = %v, want 1ns", got)
	}
}

func TestBackoffWaitDefaultRandWithinBounds(t *testing.T) {
	b := delivery.Backoff{Delay: 100 * time.Millisecond, Max: 3 * time.Second}
	seen := map[time.Duration]bool{}
	for attempt := 1; attempt <= 8; attempt++ {
		d := min(100*time.Millisecond<<(attempt-1), 3*time.Second)
		for range 50 {
			got := b.Wait(attempt, 0)
			if got < d/2 || got > d {
				t.Fatalf("Wait(%d, 0) = %v, want within [%v, %v]", attempt, got, d/2, d)
			}
			seen[got] = true
		}
	}
	// 400 draws over ranges of millions of nanoseconds: without jitter
	// there would be at most 8 distinct values.
	if len(seen) < 100 {
		t.Errorf("only %d distinct waits in 400 draws: jitter looks absent", len(seen))
	}
}

func TestRetryableAsync(t *testing.T) {
	tests := []struct {
		name string
		code int
		err  error
		want bool
	}{
		{name: "200", code: 200, want: false},
		{name: "201", code: 201, want: false},
		{name: "202", code: 202, want: false},
		{name: "302", code: 302, want: false},
		{name: "400", code: 400, want: false},
		{name: "401", code: 401, want: false},
		{name: "403", code: 403, want: false},
		{name: "404 revision not yet routable", code: 404, want: true},
		{name: "408", code: 408, want: true},
		{name: "409", code: 409, want: true},
		{name: "413", code: 413, want: false},
		{name: "422", code: 422, want: false},
		{name: "429", code: 429, want: true},
		{name: "500", code: 500, want: true},
		{name: "501", code: 501, want: true},
		{name: "502", code: 502, want: true},
		{name: "503", code: 503, want: true},
		{name: "504", code: 504, want: true},
		{name: "network error", err: errors.New("connection reset by peer"), want: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var resp *http.Response
			if tt.err == nil {
				resp = &http.Response{StatusCode: tt.code}
			}
			if got := delivery.RetryableAsync(resp, tt.err); got != tt.want {
				t.Errorf("RetryableAsync(%d, %v) = %v, want %v", tt.code, tt.err, got, tt.want)
			}
		})
	}
}

func TestRetryAfter(t *testing.T) {
	now := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
	tests := []struct {
		name   string
		header []string // nil: absent
		want   time.Duration
	}{
		{name: "absent"},
		{name: "empty", header: []string{""}},
		{name: "seconds", header: []string{"120"}, want: 2 * time.Minute},
		{name: "seconds with spaces", header: []string{" 5 "}, want: 5 * time.Second},
		{name: "a day", header: []string{strconv.Itoa(24 * 60 * 60)}, want: 24 * time.Hour},
		{name: "more than a day", header: []string{strconv.Itoa(24*60*60 + 1)}},
		{name: "zero", header: []string{"0"}},
		{name: "negative", header: []string{"-5"}},
		{name: "fraction", header: []string{"1.5"}},
		{name: "garbage", header: []string{"soon"}},
		{name: "overflowing integer", header: []string{"99999999999999999999"}},
		{name: "HTTP-date in the future", header: []string{now.Add(90 * time.Second).Format(http.TimeFormat)}, want: 90 * time.Second},
		{name: "RFC 850 date in the future", header: []string{now.Add(time.Hour).Format(time.RFC850)}, want: time.Hour},
		{name: "HTTP-date now", header: []string{now.Format(http.TimeFormat)}},
		{name: "HTTP-date in the past", header: []string{now.Add(-time.Hour).Format(http.TimeFormat)}},
		{name: "first value wins", header: []string{"7", "9"}, want: 7 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := http.Header{}
			for _, v := range tt.header {
				h.Add(delivery.HeaderRetryAfter, v)
			}
			if got := delivery.RetryAfter(h, now); got != tt.want {
				t.Errorf("RetryAfter(%q) = %v, want %v", tt.header, got, tt.want)
			}
		})
	}
}
