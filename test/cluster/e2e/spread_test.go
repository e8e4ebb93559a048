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
	"slices"
	"strings"
	"testing"
	"time"
)

// heldPerPod is the calls each ready pod of p holds now, by pod name.
func (p proxyInstance) heldPerPod(ctx context.Context, t testing.TB) map[string]float64 {
	t.Helper()
	held := map[string]float64{}
	for _, pod := range p.pods(ctx, t) {
		if ready(pod) {
			held[pod.Name] = sum(scrape(ctx, t, pod, proxyMetrics), "kn_forward_active_requests", nil)
		}
	}
	return held
}

// spread is the calls each ready pod held, by pod name, the least and
// the most; after is when watchSpread saw it, from its start.
type spread struct {
	held     map[string]float64
	min, max float64
	after    time.Duration
}

func (s spread) String() string {
	var pods []string
	for name, n := range s.held {
		pods = append(pods, fmt.Sprintf("%s %.0f", name[strings.LastIndex(name, "-")+1:], n))
	}
	slices.Sort(pods)
	out := fmt.Sprintf("%s (min %.0f, max %.0f)", strings.Join(pods, ", "), s.min, s.max)
	if s.after > 0 {
		out += fmt.Sprintf(" after %v", s.after)
	}
	return out
}

// spread is the calls each ready pod of p holds now.
func (p proxyInstance) spread(ctx context.Context, t testing.TB) spread {
	t.Helper()
	s := spread{held: p.heldPerPod(ctx, t), min: -1}
	for _, n := range s.held {
		s.max = max(s.max, n)
		if s.min < 0 || n < s.min {
			s.min = n
		}
	}
	return s
}

// watchSpread polls the calls each ready pod of p holds every 5 s, for d
// at most, and logs them; it returns once at least pods are ready and
// the least busy holds half the mean or more. The ingress's reused
// connections reach a pod added under load only through the proxy's own
// spreading (FORWARD_SPREAD_ABOVE).
func (p proxyInstance) watchSpread(ctx context.Context, t testing.TB, d time.Duration, pods int) spread {
	t.Helper()
	start := time.Now()
	var s spread
	for {
		s = p.spread(ctx, t)
		s.after = time.Since(start).Round(time.Second)
		t.Logf("held calls per proxy pod: %v", s)
		if len(s.held) >= pods && s.min >= sumHeld(s.held)/float64(len(s.held))/2 || time.Since(start) > d {
			return s
		}
		time.Sleep(5 * time.Second)
	}
}

// sumHeld is the calls all pods of held hold.
func sumHeld(held map[string]float64) float64 {
	total := 0.0
	for _, n := range held {
		total += n
	}
	return total
}
