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

package ticks

import "time"

// History builds the moves of bucket Leases from samples of their
// holders. The zero value is ready; it is not safe for concurrent use.
type History struct {
	// StopWithin is how soon before a gone replica was last seen holding
	// a Lease its move must start to be its graceful stop, which releases
	// every Lease at once (their releases may show in a few samples).
	// Earlier moves were to even the shares: a replica keeps its other
	// Leases after one (3 retry periods at least, unless it stops). If
	// zero, only the moves that start at the last sample showing it.
	StopWithin time.Duration

	last     map[string]seen      // by Lease: its last holder
	lastHeld map[string]time.Time // by holder: its last sample holding any Lease
	moves    map[string][]Move    // by Lease
}

type seen struct {
	holder string
	at     time.Time
}

// Sample adds the holders (by Lease name; "" for a free Lease) read by a
// request sent at sent whose answer came at got. A move's Start is the
// sent of the last sample showing the old holder, its End the got of the
// first showing the new one, so that its span holds the whole hand-over.
// A free Lease is part of a move, not a holder.
func (h *History) Sample(sent, got time.Time, holders map[string]string) {
	if h.last == nil {
		h.last, h.lastHeld, h.moves = map[string]seen{}, map[string]time.Time{}, map[string][]Move{}
	}
	for lease, holder := range holders {
		if holder == "" {
			continue
		}
		if prev := h.last[lease]; prev.holder != "" && prev.holder != holder {
			h.moves[lease] = append(h.moves[lease], Move{From: prev.holder, To: holder, Start: prev.at, End: got})
		}
		h.last[lease] = seen{holder: holder, at: sent}
		h.lastHeld[holder] = sent
	}
}

// Moves returns the moves so far by Lease name. A move is its old
// holder's graceful stop when that replica is not in live and it started
// within StopWithin of the last sample showing the replica. The caller
// vouches that replicas leave only by a graceful stop (a crash would be
// taken for one).
func (h *History) Moves(live map[string]bool) map[string][]Move {
	out := make(map[string][]Move, len(h.moves))
	for lease, ms := range h.moves {
		for _, m := range ms {
			m.Stop = !live[m.From] && h.lastHeld[m.From].Sub(m.Start) <= h.StopWithin
			out[lease] = append(out[lease], m)
		}
	}
	return out
}
