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
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

var t0 = time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)

// at is t0 plus s seconds.
func at(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }

func ticksAt(secs ...float64) []time.Time {
	out := make([]time.Time, 0, len(secs))
	for _, s := range secs {
		out = append(out, at(s))
	}
	return out
}

// move is a change of holder seen from start to end seconds.
func move(from, to string, start, end float64) Move {
	return Move{From: from, To: to, Start: at(start), End: at(end)}
}

// checkCase is a source's ticks and its bucket's moves, and what Check
// must find in them.
type checkCase struct {
	name       string
	ticks      []time.Time
	moves      []Move
	wantMissed int
	want       []Violation
}

func TestCheck(t *testing.T) {
	p := Params{Period: 10 * time.Second, Margin: 2 * time.Second}
	for _, tt := range []checkCase{{
		name:  "every tick, no move",
		ticks: ticksAt(0, 10, 20, 30),
	}, {
		name:  "every tick across moves",
		ticks: ticksAt(0, 10, 20, 30),
		moves: []Move{move("a", "b", 12, 13), move("b", "c", 19.4, 21)},
	}, {
		name:       "a tick missed without a move",
		ticks:      ticksAt(0, 10, 30),
		wantMissed: 1,
		want:       []Violation{{Before: at(10), After: at(30), Missed: 1}},
	}, {
		// A move hands the bucket over with its mark: a tick lost at
		// one is lost all the same, and the violation names the move.
		name:       "a tick missed at a move",
		ticks:      ticksAt(0, 10, 30),
		moves:      []Move{move("a", "b", 19.5, 21.2)},
		wantMissed: 1,
		want:       []Violation{{Before: at(10), After: at(30), Missed: 1, Moves: []Move{move("a", "b", 19.5, 21.2)}}},
	}, {
		name:       "two ticks missed at two moves in one gap",
		ticks:      ticksAt(0, 10, 40),
		moves:      []Move{move("a", "b", 19.5, 21.2), move("b", "c", 29.4, 31)},
		wantMissed: 2,
		want: []Violation{{Before: at(10), After: at(40), Missed: 2,
			Moves: []Move{move("a", "b", 19.5, 21.2), move("b", "c", 29.4, 31)}}},
	}, {
		name:       "moves seen just outside the gap, within the margin",
		ticks:      ticksAt(0, 10, 30),
		moves:      []Move{move("a", "b", 7, 8.5), move("b", "a", 31.5, 31.8)},
		wantMissed: 1,
		want: []Violation{{Before: at(10), After: at(30), Missed: 1,
			Moves: []Move{move("a", "b", 7, 8.5), move("b", "a", 31.5, 31.8)}}},
	}, {
		name:       "a move beyond the margin is not listed",
		ticks:      ticksAt(0, 10, 30),
		moves:      []Move{move("a", "b", 32.5, 33)},
		wantMissed: 1,
		want:       []Violation{{Before: at(10), After: at(30), Missed: 1}},
	}, {
		name:       "a move is listed in its own gap only",
		ticks:      ticksAt(0, 20, 30, 50),
		moves:      []Move{move("a", "b", 9, 11)},
		wantMissed: 2,
		want: []Violation{
			{Before: at(0), After: at(20), Missed: 1, Moves: []Move{move("a", "b", 9, 11)}},
			{Before: at(30), After: at(50), Missed: 1},
		},
	}, {
		name:  "a late tick is not a missed one",
		ticks: ticksAt(0, 11, 20, 34),
	}, {
		name:       "a late tick after a missed one",
		ticks:      ticksAt(0, 10, 31),
		wantMissed: 1,
		want:       []Violation{{Before: at(10), After: at(31), Missed: 1}},
	}, {
		name:  "fired twice, whatever the moves",
		ticks: ticksAt(0, 10, 10, 20),
		moves: []Move{move("a", "b", 9, 11)},
		want:  []Violation{{Before: at(10), After: at(10), Twice: true}},
	}, {
		name:  "fired twice, once late",
		ticks: ticksAt(0, 10, 13, 20),
		want:  []Violation{{Before: at(10), After: at(13), Twice: true}},
	}} {
		t.Run(tt.name, func(t *testing.T) {
			missed, got := Check(tt.ticks, tt.moves, p)
			if missed != tt.wantMissed {
				t.Errorf("missed %d, want %d", missed, tt.wantMissed)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("violations (-want +got):\n%s", diff)
			}
		})
	}
}

func TestViolationNamesTheMoves(t *testing.T) {
	v := Violation{Before: at(10), After: at(40), Missed: 2,
		Moves: []Move{move("pod-a", "pod-b", 12, 13), move("pod-b", "pod-c", 29.4, 31)}}
	got := v.String()
	for _, want := range []string{"lost 2 ticks", "pod-a→pod-b 12:00:12.0–12:00:13.0", "pod-b→pod-c 12:00:29.4–12:00:31.0"} {
		if !strings.Contains(got, want) {
			t.Errorf("%q does not say %q", got, want)
		}
	}
	if got := (Violation{Before: at(10), After: at(30), Missed: 1}).String(); !strings.Contains(got, "moves around the gap: none") {
		t.Errorf("%q does not say that no move was near", got)
	}
}
