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
	last  map[string]seen   // by Lease: its last holder
	moves map[string][]Move // by Lease
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
		h.last, h.moves = map[string]seen{}, map[string][]Move{}
	}
	for lease, holder := range holders {
		if holder == "" {
			continue
		}
		if prev := h.last[lease]; prev.holder != "" && prev.holder != holder {
			h.moves[lease] = append(h.moves[lease], Move{From: prev.holder, To: holder, Start: prev.at, End: got})
		}
		h.last[lease] = seen{holder: holder, at: sent}
	}
}

// Moves returns a copy of the moves so far, by Lease name.
func (h *History) Moves() map[string][]Move {
	out := make(map[string][]Move, len(h.moves))
	for lease, ms := range h.moves {
		out[lease] = append([]Move(nil), ms...)
	}
	return out
}
