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
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"knative.dev/event-forwarding-proxy/delivery"
)

// FuzzRetryAfter: a destination's Retry-After, whatever it says, gives a
// wait that is never negative, honours whole seconds up to a day, and, as
// a floor of the backoff, never makes an async retry wait longer than the
// configured caps.
func FuzzRetryAfter(f *testing.F) {
	for _, s := range []string{"", "0", "1", "120", "86400", "86401", "-1", "+5", " 7 ", "1.5", "9999999999999999999",
		"Wed, 21 Oct 2065 07:28:00 GMT", "Wed, 21 Oct 2015 07:28:00 GMT", "Sunday, 06-Nov-94 08:49:37 GMT", "0x10"} {
		f.Add(s, uint8(3), uint32(500), uint32(60000))
	}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, v string, attempt uint8, delayMs, maxMs uint32) {
		d := delivery.RetryAfter(http.Header{delivery.HeaderRetryAfter: {v}}, now)
		if d < 0 {
			t.Fatalf("RetryAfter(%q) = %s, negative", v, d)
		}
		if secs, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64); err == nil {
			want := time.Duration(0)
			if secs > 0 && secs <= 86400 {
				want = time.Duration(secs) * time.Second
			}
			if d != want {
				t.Fatalf("RetryAfter(%q) = %s, want %s", v, d, want)
			}
		}
		b := delivery.Backoff{Delay: time.Duration(delayMs) * time.Millisecond, Max: time.Duration(maxMs) * time.Millisecond,
			MaxRetryAfter: 5 * time.Minute}
		ceiling := b.Max
		if ceiling <= 0 {
			ceiling = time.Minute
		}
		w := b.Wait(int(attempt)+1, d)
		if w < 0 || w > max(ceiling, b.MaxRetryAfter) {
			t.Fatalf("Wait(%d, %s) = %s with Delay %s Max %s: outside [0, %s]", attempt+1, d, w, b.Delay, b.Max, max(ceiling, b.MaxRetryAfter))
		}
	})
}
