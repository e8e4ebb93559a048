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
	"fmt"
	"slices"
	"testing"
)

func TestSharePlan(t *testing.T) {
	tests := []struct {
		name string
		view shareView
		me   string
		mine int
		want sharePlan
	}{
		{name: "alone: every bucket", me: "a", view: shareView{buckets: 10, members: []string{"a"}, free: 10},
			want: sharePlan{target: 10}},
		{name: "even: stand for up to the ceiling", me: "a", mine: 3,
			view: shareView{buckets: 10, members: []string{"a", "b", "c"}, held: map[string]int{"b": 3, "c": 3}, free: 1},
			want: sharePlan{target: 4}},
		{name: "above the ceiling: give up the excess", me: "a", mine: 10,
			view: shareView{buckets: 10, members: []string{"a", "b", "c"}},
			want: sharePlan{target: 4, release: 6}},
		{name: "a newcomer below the floor: leave it the free buckets", me: "b", mine: 3,
			view: shareView{buckets: 10, members: []string{"a", "b", "c", "d"}, held: map[string]int{"a": 3, "c": 3}, free: 1},
			want: sharePlan{target: 2}},
		{name: "a newcomer below the floor: the first donor gives one", me: "a", mine: 3,
			view: shareView{buckets: 10, members: []string{"a", "b", "c", "d"}, held: map[string]int{"b": 3, "c": 3}, free: 1},
			want: sharePlan{target: 2, release: 1}},
		{name: "free buckets fill the deficit: nobody gives up", me: "a", mine: 3,
			view: shareView{buckets: 10, members: []string{"a", "b", "c", "d"}, held: map[string]int{"b": 3, "c": 2}, free: 2},
			want: sharePlan{target: 2}},
		{name: "donors: the fullest first", me: "c", mine: 3,
			view: shareView{buckets: 10, members: []string{"a", "b", "c", "d"}, held: map[string]int{"a": 4, "b": 3}},
			want: sharePlan{target: 2}},
		{name: "donors: ties by name", me: "b", mine: 3,
			view: shareView{buckets: 10, members: []string{"a", "b", "c", "d"}, held: map[string]int{"a": 4, "c": 3}},
			want: sharePlan{target: 2, release: 1}},
		{name: "more replicas than buckets", me: "c", mine: 0,
			view: shareView{buckets: 2, members: []string{"a", "b", "c"}, held: map[string]int{"a": 1, "b": 1}},
			want: sharePlan{target: 1}},
		{name: "buckets held by a replica that is no member (upstream's adapter)", me: "a", mine: 0,
			view: shareView{buckets: 10, members: []string{"a", "b"}, held: map[string]int{"upstream": 10}},
			want: sharePlan{target: 5}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.view.plan(tc.me, tc.mine); got != tc.want {
				t.Errorf("plan = %+v, want %+v", got, tc.want)
			}
		})
	}
}

// TestSharesConverge plays the replicas' rounds with every replica seeing
// the same view, from every replica holding everything it can take in
// turn: shares end within one bucket of even, and no bucket moves but
// those that end with another holder, each once.
func TestSharesConverge(t *testing.T) {
	for _, tc := range []struct{ buckets, from, to int }{
		{10, 1, 3}, {10, 3, 4}, {10, 4, 2}, {10, 3, 1}, {7, 2, 5}, {3, 1, 5}, {10, 10, 9},
	} {
		t.Run(fmt.Sprintf("%d buckets, %d to %d replicas", tc.buckets, tc.from, tc.to), func(t *testing.T) {
			owner := make([]string, tc.buckets)
			names := func(n int) []string {
				var ms []string
				for i := range n {
					ms = append(ms, fmt.Sprintf("r%d", i))
				}
				return ms
			}
			settle(t, owner, names(tc.from))
			before := slices.Clone(owner)
			moves := settle(t, owner, names(tc.to))
			changed := 0
			for i := range owner {
				if owner[i] != before[i] {
					changed++
				}
			}
			if moves != changed {
				t.Errorf("%d moves for %d buckets that changed hands: %v to %v", moves, changed, before, owner)
			}
			count := map[string]int{}
			for _, o := range owner {
				count[o]++
			}
			r := tc.to
			for _, m := range names(r) {
				if n := count[m]; n < tc.buckets/r || n > (tc.buckets+r-1)/r {
					t.Errorf("%s holds %d of %d buckets with %d replicas: %v", m, n, tc.buckets, r, count)
				}
			}
		})
	}
}

// settle plays rounds until no bucket moves, returning how many moved:
// in each round every replica releases what its plan says, then takes
// free buckets up to its target, in name order.
func settle(t *testing.T, owner []string, members []string) int {
	t.Helper()
	for i, o := range owner {
		if !slices.Contains(members, o) {
			owner[i] = "" // a departed replica's Leases expire
		}
	}
	view := func() shareView {
		v := shareView{buckets: len(owner), members: members, held: map[string]int{}}
		for _, o := range owner {
			if o == "" {
				v.free++
			} else {
				v.held[o]++
			}
		}
		return v
	}
	moves := 0
	for round := range 50 {
		changed := false
		v := view()
		for _, m := range members {
			p := v.plan(m, v.held[m])
			for i := len(owner) - 1; i >= 0 && p.release > 0; i-- {
				if owner[i] == m {
					owner[i], p.release, changed = "", p.release-1, true
				}
			}
		}
		for _, m := range members {
			for i := range owner {
				v := view()
				if owner[i] == "" && v.held[m] < v.plan(m, v.held[m]).target {
					owner[i], changed = m, true
					moves++
				}
			}
		}
		if !changed {
			t.Logf("%d replicas: settled after %d rounds, %d moves", len(members), round, moves)
			return moves
		}
	}
	t.Fatalf("no settlement after 50 rounds: %v", owner)
	return moves
}
