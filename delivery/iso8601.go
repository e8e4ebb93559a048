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
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// ErrBadDuration is wrapped by every ParseDuration error.
var ErrBadDuration = errors.New("not an ISO-8601 duration")

// ParseDuration parses an ISO-8601 duration of the forms Knative uses for
// delivery settings: PnW, PnD and the time part TnHnMnS, where only the
// seconds may carry a fraction ("PT0.5S", "PT10M", "P1DT2H"). Years and
// months are refused: their length depends on the calendar. Negative
// durations are refused.
func ParseDuration(s string) (time.Duration, error) {
	rest, ok := strings.CutPrefix(s, "P")
	if !ok || rest == "" || rest == "T" {
		return 0, fmt.Errorf("%w: %q", ErrBadDuration, s)
	}
	var total float64
	inTime := false
	last := -1 // rank of the previous unit: units must come largest first
	for rest != "" {
		if rest[0] == 'T' {
			if inTime {
				return 0, fmt.Errorf("%w: %q has two T", ErrBadDuration, s)
			}
			inTime = true
			rest = rest[1:]
			if rest == "" {
				return 0, fmt.Errorf("%w: %q ends after T", ErrBadDuration, s)
			}
			continue
		}
		i := 0
		for i < len(rest) && (rest[i] >= '0' && rest[i] <= '9' || rest[i] == '.') {
			i++
		}
		if i == 0 || i == len(rest) {
			return 0, fmt.Errorf("%w: %q", ErrBadDuration, s)
		}
		num, unit := rest[:i], rest[i]
		rest = rest[i+1:]
		v, err := strconv.ParseFloat(num, 64)
		if err != nil {
			return 0, fmt.Errorf("%w: %q", ErrBadDuration, s)
		}
		if strings.Contains(num, ".") && !(inTime && unit == 'S') {
			return 0, fmt.Errorf("%w: %q: only seconds may have a fraction", ErrBadDuration, s)
		}
		var (
			scale time.Duration
			rank  int
		)
		switch {
		case !inTime && unit == 'W':
			scale, rank = 7*24*time.Hour, 0
		case !inTime && unit == 'D':
			scale, rank = 24*time.Hour, 1
		case inTime && unit == 'H':
			scale, rank = time.Hour, 2
		case inTime && unit == 'M':
			scale, rank = time.Minute, 3
		case inTime && unit == 'S':
			scale, rank = time.Second, 4
		case !inTime && (unit == 'Y' || unit == 'M'):
			return 0, fmt.Errorf("%w: %q: years and months have no fixed length", ErrBadDuration, s)
		default:
			return 0, fmt.Errorf("%w: %q: unknown unit %q", ErrBadDuration, s, unit)
		}
		if rank <= last {
			return 0, fmt.Errorf("%w: %q: units repeated or out of order", ErrBadDuration, s)
		}
		last = rank
		total += v * float64(scale)
		// float64(math.MaxInt64) rounds up to 2^63, which does not fit
		// in a Duration: refuse it too rather than wrap to negative.
		if total >= math.MaxInt64 {
			return 0, fmt.Errorf("%w: %q is too long", ErrBadDuration, s)
		}
	}
	return time.Duration(total), nil
}

// FormatDuration renders d as an ISO-8601 time duration ("PT1.5S",
// "PT10M"). Negative durations are rendered as zero.
func FormatDuration(d time.Duration) string {
	if d <= 0 {
		return "PT0S"
	}
	var b strings.Builder
	b.WriteString("PT")
	if h := d / time.Hour; h > 0 {
		b.WriteString(strconv.FormatInt(int64(h), 10))
		b.WriteByte('H')
		d %= time.Hour
	}
	if m := d / time.Minute; m > 0 {
		b.WriteString(strconv.FormatInt(int64(m), 10))
		b.WriteByte('M')
		d %= time.Minute
	}
	if d > 0 {
		b.WriteString(strconv.FormatFloat(d.Seconds(), 'f', -1, 64))
		b.WriteByte('S')
	}
	return b.String()
}
