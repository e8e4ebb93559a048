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

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestHistory(t *testing.T) {
	// Samples at s seconds, each answered 0.1 s later.
	type sample struct {
		s       float64
		holders map[string]string
	}
	tests := []struct {
		name    string
		samples []sample
		want    map[string][]Move
	}{{
		name:    "no change, no move",
		samples: []sample{{0, map[string]string{"l0": "a"}}, {1, map[string]string{"l0": "a"}}},
		want:    map[string][]Move{},
	}, {
		name: "released, then taken: one move over the whole hand-over",
		samples: []sample{
			{0, map[string]string{"l0": "a"}}, {1, map[string]string{"l0": "a"}},
			{2, map[string]string{"l0": ""}}, {3, map[string]string{}}, {4, map[string]string{"l0": "b"}},
			{5, map[string]string{"l0": "b"}},
		},
		want: map[string][]Move{"l0": {move("a", "b", 1, 4.1)}},
	}, {
		name:    "first seen free: no move until a holder is known",
		samples: []sample{{0, map[string]string{"l0": ""}}, {1, map[string]string{"l0": "a"}}},
		want:    map[string][]Move{},
	}, {
		name: "a bucket moved twice",
		samples: []sample{
			{0, map[string]string{"l0": "a"}}, {1, map[string]string{"l0": "b"}}, {2, map[string]string{"l0": "c"}},
		},
		want: map[string][]Move{"l0": {move("a", "b", 0, 1.1), move("b", "c", 1, 2.1)}},
	}, {
		// b gave l0 up to even the shares, kept l1 and l2, then stopped;
		// l2's release showed a sample later than l1's.
		name: "a replica gives a bucket up, then stops",
		samples: []sample{
			{0, map[string]string{"l0": "b", "l1": "b", "l2": "b"}},
			{1, map[string]string{"l0": "c", "l1": "b", "l2": "b"}},
			{2, map[string]string{"l0": "c", "l1": "b", "l2": "b"}},
			{2.2, map[string]string{"l0": "c", "l1": "", "l2": "b"}},
			{2.4, map[string]string{"l0": "c", "l1": "a", "l2": ""}},
			{2.6, map[string]string{"l0": "c", "l1": "a", "l2": "c"}},
		},
		want: map[string][]Move{
			"l0": {move("b", "c", 0, 1.1)},
			"l1": {move("b", "a", 2, 2.5)},
			"l2": {move("b", "c", 2.2, 2.7)},
		},
	}, {
		name: "a replica still running gave a bucket up",
		samples: []sample{
			{0, map[string]string{"l0": "b", "l1": "b"}}, {1, map[string]string{"l0": "c", "l1": "b"}},
		},
		want: map[string][]Move{"l0": {move("b", "c", 0, 1.1)}},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var h History
			for _, s := range tt.samples {
				h.Sample(at(s.s), at(s.s+0.1), s.holders)
			}
			if diff := cmp.Diff(tt.want, h.Moves()); diff != "" {
				t.Errorf("moves (-want +got):\n%s", diff)
			}
		})
	}
}
