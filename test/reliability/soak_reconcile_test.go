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

package reliability

import (
	"fmt"
	"sort"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
)

// reconcile checks that every event is accounted for exactly once, by its
// caller, its sinks, the proxy's logs and the proxy's metrics, and prints
// the tally.
func reconcile(t *testing.T, sp *soakProxy, l *ledger, events []*event) {
	t.Helper()
	failedLogs := map[string]int{}
	for _, e := range sp.logs.FilterMessage("Async delivery failed").All() {
		failedLogs[fmt.Sprint(e.ContextMap()["ceId"])]++
	}
	if n := sp.logs.FilterMessage("Abandoned async event at shutdown").Len(); n != 0 {
		t.Errorf("%d async events abandoned at a shutdown that waited for all of them", n)
	}
	tally := map[string]int{}
	byKind := map[string]map[string]int{}
	proxyReasons := map[string]int{}
	var asyncDelivered, asyncFailed, delivered int
	for _, e := range events {
		c := e.class()
		accepted, failed := l.acceptedCount(e.id), failedLogs[e.id]
		switch c {
		case "accepted":
			switch {
			case accepted == 1 && failed == 0:
				c = "delivered: async"
				asyncDelivered++
			case accepted == 0 && failed == 1:
				c = "failed: async, logged"
				asyncFailed++
			default:
				t.Errorf("%s (%s): accepted by its sink %d times and logged as failed %d times, want exactly one of them once",
					e.id, e.kind.name, accepted, failed)
			}
		case "delivered: sync":
			if accepted != 1 || failed != 0 {
				t.Errorf("%s (%s): its caller got %d but its sink accepted it %d times", e.id, e.kind.name, e.status, accepted)
			}
		case "no answer":
			t.Errorf("%s (%s): no answer and no reason: %v", e.id, e.kind.name, e.err)
		default:
			if accepted != 0 || failed != 0 {
				t.Errorf("%s (%s): %s, yet its sink accepted it %d times and %d failures were logged", e.id, e.kind.name, c, accepted, failed)
			}
		}
		if strings.HasPrefix(c, "delivered") {
			delivered++
		}
		if e.reason != "" {
			proxyReasons[e.reason]++
		}
		tally[c]++
		if byKind[e.kind.name] == nil {
			byKind[e.kind.name] = map[string]int{}
		}
		byKind[e.kind.name][c]++
	}
	var logged, sinkAccepted int
	for _, n := range failedLogs {
		logged += n
	}
	for _, n := range l.accepted {
		sinkAccepted += n
	}
	if logged != asyncFailed || sinkAccepted != delivered {
		t.Errorf("%d failure lines for %d failed async events; %d acceptances at the sinks for %d delivered events",
			logged, asyncFailed, sinkAccepted, delivered)
	}
	printTally(t, len(events), tally, byKind)

	fams, err := sp.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]*dto.MetricFamily{}
	for _, f := range fams {
		m[f.GetName()] = f
	}
	sum := func(name, label, value string) int {
		return int(metricSum(m[name], label, value))
	}
	want := map[string]int{
		"forwarded": tally["delivered: sync"] + countPrefix(tally, "failed: destination answered"),
		"accepted":  tally["accepted"] + asyncDelivered + asyncFailed,
		"rejected":  countPrefix(tally, "refused: "),
		"failed":    countPrefix(tally, "failed: proxy answered") + tally["failed: answer broke off"],
		"canceled":  tally["canceled by its caller"],
	}
	for outcome, n := range want {
		if got := sum("kn_forward_requests_total", "outcome", outcome); got != n {
			t.Errorf("kn_forward_requests_total{outcome=%q} = %d, the callers saw %d", outcome, got, n)
		}
	}
	for reason, n := range proxyReasons {
		if got := sum("kn_forward_rejected_total", "reason", reason); got != n {
			t.Errorf("kn_forward_rejected_total{reason=%q} = %d, the callers saw %d", reason, got, n)
		}
	}
	for outcome, n := range map[string]int{"delivered": asyncDelivered, "failed": asyncFailed, "abandoned": 0} {
		if got := sum("kn_forward_async_deliveries_total", "outcome", outcome); got != n {
			t.Errorf("kn_forward_async_deliveries_total{outcome=%q} = %d, want %d", outcome, got, n)
		}
	}
	for _, gauge := range []string{"kn_forward_active_requests", "kn_forward_tenant_active_requests", "kn_forward_async_pending"} {
		if got := sum(gauge, "", ""); got != 0 {
			t.Errorf("%s = %d after every call ended, want 0", gauge, got)
		}
	}
	if n := sp.Limiter.Inflight(); n != 0 {
		t.Errorf("the limiter holds %d calls after every call ended", n)
	}
}

// metricSum adds the samples of f whose label has value (all if label is
// empty).
func metricSum(f *dto.MetricFamily, label, value string) float64 {
	if f == nil {
		return 0
	}
	var total float64
	for _, m := range f.Metric {
		match := label == ""
		for _, l := range m.Label {
			if l.GetName() == label && l.GetValue() == value {
				match = true
			}
		}
		if match {
			total += m.GetCounter().GetValue() + m.GetGauge().GetValue()
		}
	}
	return total
}

func countPrefix(tally map[string]int, prefix string) int {
	n := 0
	for k, v := range tally {
		if strings.HasPrefix(k, prefix) {
			n += v
		}
	}
	return n
}

// printTally logs where the events ended, overall and by kind.
func printTally(t *testing.T, total int, tally map[string]int, byKind map[string]map[string]int) {
	t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "tally of %d events:\n", total)
	sum := 0
	for _, k := range sortedKeys(tally) {
		if k == "accepted" {
			continue // resolved into delivered or failed
		}
		fmt.Fprintf(&b, "  %-44s %5d\n", k, tally[k])
		sum += tally[k]
	}
	fmt.Fprintf(&b, "  %-44s %5d\n", "total", sum)
	b.WriteString("by kind:\n")
	for _, k := range sortedKeys(byKind) {
		fmt.Fprintf(&b, "  %-36s", k)
		for _, c := range sortedKeys(byKind[k]) {
			fmt.Fprintf(&b, "  %s=%d", c, byKind[k][c])
		}
		b.WriteString("\n")
	}
	t.Log(b.String())
	if sum != total {
		t.Errorf("the tally adds up to %d events, %d were sent", sum, total)
	}
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
