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

package testproc

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// scrapeClient bounds a scrape: a process that stopped answering fails
// the poll that reads it rather than hanging it.
var scrapeClient = &http.Client{Timeout: 10 * time.Second}

// Scrape reads the metrics a process serves at url (Prometheus text).
func Scrape(url string) (map[string]*dto.MetricFamily, error) {
	resp, err := scrapeClient.Get(url)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	return parser.TextToMetricFamilies(resp.Body)
}

// Value sums the samples of family name whose labels include want: 0 when
// there is no such family.
func Value(fams map[string]*dto.MetricFamily, name string, want map[string]string) float64 {
	var sum float64
	f := fams[name]
	if f == nil {
		return 0
	}
next:
	for _, m := range f.Metric {
		for k, v := range want {
			found := false
			for _, l := range m.Label {
				if l.GetName() == k && l.GetValue() == v {
					found = true
				}
			}
			if !found {
				continue next
			}
		}
		switch {
		case m.Gauge != nil:
			sum += m.Gauge.GetValue()
		case m.Counter != nil:
			sum += m.Counter.GetValue()
		case m.Untyped != nil:
			sum += m.Untyped.GetValue()
		}
	}
	return sum
}

// AwaitCollections waits up to d until the Go runtime of the process whose
// metrics are at metricsURL has finished n more garbage collections
// (go_gc_duration_seconds' count), failing the test after d. Goroutines
// that ended keep their stacks cached until a collection frees them: a
// reading of go_memstats_stack_inuse_bytes after two counts only the
// goroutines alive. Each scrape allocates in the process, so the polling
// itself brings collections on, well before the runtime's forced one (at
// most two minutes apart).
func AwaitCollections(tb testing.TB, metricsURL string, n uint64, d time.Duration) {
	tb.Helper()
	count := func() (uint64, bool) {
		fams, err := Scrape(metricsURL)
		if err != nil {
			return 0, false
		}
		f := fams["go_gc_duration_seconds"]
		if f == nil || len(f.Metric) != 1 || f.Metric[0].Summary == nil {
			return 0, false
		}
		return f.Metric[0].Summary.GetSampleCount(), true
	}
	var start uint64
	Eventually(tb, d, "the metrics' collection count", func() (ok bool) {
		start, ok = count()
		return ok
	})
	Eventually(tb, d, fmt.Sprintf("%d garbage collections", n), func() bool {
		c, ok := count()
		return ok && c >= start+n
	})
}
