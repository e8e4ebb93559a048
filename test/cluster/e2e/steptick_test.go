//go:build cluster

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

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"
)

// tickedSources are PingSources whose ticks are counted by step: those
// whose CloudEvents source holds name, sources of them, each firing every
// every.
type tickedSources struct {
	name    string
	sources int
	every   time.Duration
}

// stepCount is what the sink got of the ticks due during one step.
type stepCount struct {
	step              string
	due, fired, twice int
}

// checkStepTicks logs the ticks of src since start by step, and fails
// the test on a tick fired twice. It marks the end of the last step.
func checkStepTicks(ctx context.Context, t testing.TB, s *sink, src tickedSources, steps *stepLog, start time.Time) []stepCount {
	t.Helper()
	steps.mark("end")
	// Every tick due up to the last one the sink got: the last step's
	// checks wait for its ticks to arrive.
	rs := s.records(ctx, t)
	end := lastTick(rs, src)
	counts := stepTicks(rs, src, steps, start.Truncate(src.every).Add(src.every), end)
	logStepTicks(t, src, counts)
	for _, c := range counts {
		if c.twice > 0 {
			t.Errorf("%s: %d ticks fired twice", c.step, c.twice)
		}
	}
	return counts
}

// lastTick is the latest tick of src the sink got.
func lastTick(rs []record, src tickedSources) time.Time {
	var last time.Time
	for _, r := range rs {
		if !strings.Contains(r.Source, src.name) {
			continue
		}
		if tk, err := time.Parse(time.RFC3339Nano, r.EventTime); err == nil && tk.After(last) {
			last = tk.Truncate(src.every)
		}
	}
	return last
}

// stepTicks counts the ticks of src from first to last by the step they
// fell in.
func stepTicks(rs []record, src tickedSources, steps *stepLog, first, last time.Time) []stepCount {
	seen := map[string]map[int64]int{} // by source, then tick (Unix seconds)
	for _, r := range rs {
		if !strings.Contains(r.Source, src.name) {
			continue
		}
		tk, err := time.Parse(time.RFC3339Nano, r.EventTime)
		if err != nil {
			continue
		}
		if seen[r.Source] == nil {
			seen[r.Source] = map[int64]int{}
		}
		seen[r.Source][tk.Truncate(src.every).Unix()]++
	}
	var out []stepCount
	for tk := first; !tk.After(last); tk = tk.Add(src.every) {
		name := steps.last(tk)
		if len(out) == 0 || out[len(out)-1].step != name {
			out = append(out, stepCount{step: name})
		}
		c := &out[len(out)-1]
		c.due += src.sources
		for _, ticks := range seen {
			if n := ticks[tk.Unix()]; n > 0 {
				c.fired++
				c.twice += n - 1
			}
		}
	}
	return out
}

func logStepTicks(t testing.TB, src tickedSources, counts []stepCount) {
	t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "%d PingSources, every %v:\n| step | due | fired | missed | twice |\n|---|---|---|---|---|\n", src.sources, src.every)
	for _, c := range counts {
		fmt.Fprintf(&b, "| %s | %d | %d | %d | %d |\n", c.step, c.due, c.fired, c.due-c.fired, c.twice)
	}
	t.Log(b.String())
}
