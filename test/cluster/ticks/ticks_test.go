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

// share is a move to even the shares, seen from start to end seconds.
func share(from, to string, start, end float64) Move {
	return Move{From: from, To: to, Start: at(start), End: at(end)}
}

func stop(from, to string, start, end float64) Move {
	m := share(from, to, start, end)
	m.Stop = true
	return m
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

// checkCases runs Check with p on each case.
func checkCases(t *testing.T, p Params, cases []checkCase) {
	t.Helper()
	for _, tt := range cases {
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

func TestCheck(t *testing.T) {
	p := Params{Period: 10 * time.Second, Margin: 2 * time.Second}
	checkCases(t, p, []checkCase{{
		name:  "every tick, no move",
		ticks: ticksAt(0, 10, 20, 30),
	}, {
		name:       "a tick missed without a move",
		ticks:      ticksAt(0, 10, 30),
		wantMissed: 1,
		want:       []Violation{{Before: at(10), After: at(30), Missed: 1, Allowed: 0}},
	}, {
		name:       "a tick missed by a move in the gap",
		ticks:      ticksAt(0, 10, 30),
		moves:      []Move{share("a", "b", 19.5, 21.2)},
		wantMissed: 1,
	}, {
		// The regression: 1 to 3 replicas moved a bucket twice, a tick lost
		// at each move.
		name:       "two ticks missed by two moves in one gap",
		ticks:      ticksAt(0, 10, 40),
		moves:      []Move{share("a", "b", 19.5, 21.2), share("b", "c", 29.4, 31)},
		wantMissed: 2,
	}, {
		name:       "two ticks missed by one move",
		ticks:      ticksAt(0, 10, 40),
		moves:      []Move{share("a", "b", 15, 34.6)},
		wantMissed: 2,
		want:       []Violation{{Before: at(10), After: at(40), Missed: 2, Allowed: 1, Moves: []Move{share("a", "b", 15, 34.6)}}},
	}, {
		name:       "a graceful stop costs no tick",
		ticks:      ticksAt(0, 10, 30),
		moves:      []Move{stop("a", "b", 19.5, 21.2)},
		wantMissed: 1,
		want:       []Violation{{Before: at(10), After: at(30), Missed: 1, Moves: []Move{stop("a", "b", 19.5, 21.2)}}},
	}, {
		// A replica deleted: its bucket goes to another at its stop, then
		// to its replacement to even the shares. One tick, as before.
		name:       "a graceful stop then a share move in one gap",
		ticks:      ticksAt(0, 10, 40),
		moves:      []Move{stop("a", "b", 12, 13), share("b", "c", 29.4, 31)},
		wantMissed: 2,
		want: []Violation{{Before: at(10), After: at(40), Missed: 2, Allowed: 1,
			Moves: []Move{stop("a", "b", 12, 13), share("b", "c", 29.4, 31)}}},
	}, {
		name:       "a graceful stop then a share move, one tick missed",
		ticks:      ticksAt(0, 10, 30),
		moves:      []Move{stop("a", "b", 12, 13), share("b", "c", 19.4, 21)},
		wantMissed: 1,
	}, {
		name:       "a move seen just after the gap's last tick, within the margin",
		ticks:      ticksAt(0, 10, 30),
		moves:      []Move{share("a", "b", 31.5, 31.8)},
		wantMissed: 1,
	}, {
		name:       "a move seen just before the gap's first tick, within the margin",
		ticks:      ticksAt(0, 10, 30),
		moves:      []Move{share("a", "b", 7, 8.5)},
		wantMissed: 1,
	}, {
		name:       "a move beyond the margin does not count",
		ticks:      ticksAt(0, 10, 30),
		moves:      []Move{share("a", "b", 32.5, 33)},
		wantMissed: 1,
		want:       []Violation{{Before: at(10), After: at(30), Missed: 1, Allowed: 0}},
	}, {
		name:       "a move counts in its own gap only",
		ticks:      ticksAt(0, 20, 30, 50),
		moves:      []Move{share("a", "b", 9, 11)},
		wantMissed: 2,
		want:       []Violation{{Before: at(30), After: at(50), Missed: 1}},
	}, {
		name:  "a late tick is not a missed one",
		ticks: ticksAt(0, 11, 20, 34),
	}, {
		name:       "a late tick after a missed one",
		ticks:      ticksAt(0, 10, 31),
		moves:      []Move{share("a", "b", 19.5, 21.2)},
		wantMissed: 1,
	}, {
		name:  "fired twice, whatever the moves",
		ticks: ticksAt(0, 10, 10, 20),
		moves: []Move{share("a", "b", 9, 11)},
		want:  []Violation{{Before: at(10), After: at(10), Twice: true}},
	}, {
		name:  "fired twice, once late",
		ticks: ticksAt(0, 10, 13, 20),
		want:  []Violation{{Before: at(10), After: at(13), Twice: true}},
	}})
}

func TestCheckMovedFloor(t *testing.T) {
	p := Params{Period: 10 * time.Second, Margin: 2 * time.Second, MovedFloor: 1}
	checkCases(t, p, []checkCase{{
		// The floor allowed a tick per gap whatever the moves: a source
		// could lose a tick while its bucket stayed put.
		name:       "a tick missed without a move, whatever the floor",
		ticks:      ticksAt(0, 10, 30),
		wantMissed: 1,
		want:       []Violation{{Before: at(10), After: at(30), Missed: 1, Allowed: 0}},
	}, {
		name:       "a tick missed by a graceful stop, within the floor",
		ticks:      ticksAt(0, 10, 30),
		moves:      []Move{stop("a", "b", 19.5, 21.2)},
		wantMissed: 1,
	}, {
		name:       "two ticks missed by one graceful stop",
		ticks:      ticksAt(0, 10, 40),
		moves:      []Move{stop("a", "b", 19.5, 21.2)},
		wantMissed: 2,
		want:       []Violation{{Before: at(10), After: at(40), Missed: 2, Allowed: 1, Moves: []Move{stop("a", "b", 19.5, 21.2)}}},
	}, {
		name:       "a tick missed next to a move beyond the margin",
		ticks:      ticksAt(0, 10, 30),
		moves:      []Move{share("a", "b", 32.5, 33)},
		wantMissed: 1,
		want:       []Violation{{Before: at(10), After: at(30), Missed: 1, Allowed: 0}},
	}, {
		name:       "two ticks missed by two moves, above the floor",
		ticks:      ticksAt(0, 10, 40),
		moves:      []Move{share("a", "b", 19.5, 21.2), share("b", "c", 29.4, 31)},
		wantMissed: 2,
	}, {
		name:       "three ticks missed by two moves",
		ticks:      ticksAt(0, 10, 50),
		moves:      []Move{share("a", "b", 19.5, 21.2), share("b", "c", 29.4, 31)},
		wantMissed: 3,
		want: []Violation{{Before: at(10), After: at(50), Missed: 3, Allowed: 2,
			Moves: []Move{share("a", "b", 19.5, 21.2), share("b", "c", 29.4, 31)}}},
	}})
}

func TestViolationNamesTheMoves(t *testing.T) {
	v := Violation{Before: at(10), After: at(40), Missed: 2, Allowed: 1,
		Moves: []Move{stop("pod-a", "pod-b", 12, 13), share("pod-b", "pod-c", 29.4, 31)}}
	got := v.String()
	for _, want := range []string{
		"lost 2 ticks", "1 allowed",
		"pod-a→pod-b 12:00:12.0–12:00:13.0 (at its graceful stop)",
		"pod-b→pod-c 12:00:29.4–12:00:31.0 (to even the shares)",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("%q does not say %q", got, want)
		}
	}
	if got := (Violation{Before: at(10), After: at(30), Missed: 1}).String(); !strings.Contains(got, "0 allowed; its bucket's moves counted: none") {
		t.Errorf("%q does not say that no move counted", got)
	}
}
