//go:build integration

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

package mtping

import (
	"math"
	"testing"

	"knative.dev/event-forwarding-proxy/test/bench/report"
)

// TestSeedQuantile pins BenchmarkSeed's estimate of the tick lateness
// percentiles from the adapter's histogram buckets.
func TestSeedQuantile(t *testing.T) {
	bucket := func(le string, n float64) promSample {
		return promSample{name: latenessMetric + "_bucket", labels: `otel_scope_name="x",le="` + le + `"`, value: n}
	}
	tests := []struct {
		name  string
		page  promText
		q     float64
		want  float64
		empty bool
	}{{
		name: "inside a bucket", q: 0.5, want: 0.3, // rank 50 of 100: 20 % into (0.25, 0.5]
		page: promText{bucket("0.1", 0), bucket("0.25", 40), bucket("0.5", 90), bucket("+Inf", 100)},
	}, {
		name: "first bucket from zero", q: 0.5, want: 0.05,
		page: promText{bucket("0.1", 10), bucket("+Inf", 10)},
	}, {
		name: "in +Inf: the highest finite bound", q: 0.99, want: 60,
		page: promText{bucket("30", 0), bucket("60", 10), bucket("+Inf", 100)},
	}, {
		name: "series summed", q: 0.5, want: 0.5,
		page: promText{bucket("0.5", 1), bucket("1", 2), bucket("+Inf", 2), bucket("0.5", 1), bucket("1", 2), bucket("+Inf", 2)},
	}, {
		name: "other metrics ignored", q: 0.5, empty: true,
		page: promText{{name: "kn_forward_sender_handoff_duration_seconds_bucket", labels: `le="1"`, value: 5}},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := tc.page.quantile(latenessMetric, tc.q)
			if ok == tc.empty || !tc.empty && math.Abs(got-tc.want) > 1e-9 {
				t.Errorf("quantile(%g) = %g, %t; want %g, %t", tc.q, got, ok, tc.want, !tc.empty)
			}
		})
	}
}

// TestReplaceSeedBlock: BenchmarkSeed rewrites only its block of
// docs/benchmarks.md, and appends the section when the block is missing.
func TestReplaceSeedBlock(t *testing.T) {
	begin, end := report.MtpingSeedBegin, report.MtpingSeedEnd
	block := begin + "\nnew\n" + end
	tests := []struct{ name, doc, want string }{{
		name: "replaced between the markers",
		doc:  "# B\n\n" + seedHeading + "\n\n" + begin + "\nold\nlines\n" + end + "\n\n## After\n",
		want: "# B\n\n" + seedHeading + "\n\n" + block + "\n\n## After\n",
	}, {
		name: "appended when missing",
		doc:  "# B\n\ntext\n\n\n",
		want: "# B\n\ntext\n\n" + seedHeading + "\n\n" + block + "\n",
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := string(replaceSeedBlock([]byte(tc.doc), "new")); got != tc.want {
				t.Errorf("got\n%q\nwant\n%q", got, tc.want)
			}
		})
	}
}
