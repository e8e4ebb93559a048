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

package result

import (
	"math"
	"slices"
	"time"
)

// Percentile returns the p-th percentile (0 < p <= 100) of sorted by the
// nearest-rank method: the smallest value with at least p % of the values
// at or below it. It is 0 for no values.
func Percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	rank := int(math.Ceil(p / 100 * float64(len(sorted))))
	rank = min(max(rank, 1), len(sorted))
	return sorted[rank-1]
}

// Summarize sorts ds and returns their count, p50, p99 and max in
// milliseconds, with errors recorded as given.
func Summarize(ds []time.Duration, errors int) Latency {
	slices.Sort(ds)
	l := Latency{Count: len(ds), Errors: errors}
	if len(ds) == 0 {
		return l
	}
	l.P50 = ms(Percentile(ds, 50))
	l.P99 = ms(Percentile(ds, 99))
	l.Max = ms(ds[len(ds)-1])
	return l
}

// Minus returns ds each less base, never below zero: the latency a hop
// adds when base is what the same call costs without it.
func Minus(ds []time.Duration, base time.Duration) []time.Duration {
	out := make([]time.Duration, len(ds))
	for i, d := range ds {
		out[i] = max(d-base, 0)
	}
	return out
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
