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

// Package ticks checks one PingSource's ticks, as its sink got them,
// against what docs/mtping.md promises while the source's bucket moves
// between adapter replicas: no tick fires twice; a move by which a
// replica gives the bucket up to even the shares costs at most one tick;
// a move by which a replica stops gracefully costs none (for sources whose
// ticks are more than 2.2 retry periods apart); no move, no missed tick.
// History turns samples of the bucket Leases into those moves. The
// package is apart from test/cluster/e2e, whose TestMain needs the
// cluster, so that its unit tests run anywhere.
package ticks

import (
	"fmt"
	"strings"
	"time"
)

// Move is one change of holder of a bucket's Lease, as sampled: From was
// last seen holding it at Start, To first seen at End. The bucket fired
// from neither somewhere in between.
type Move struct {
	From, To   string
	Start, End time.Time
	// Stop reports that From stopped gracefully: it waits for a tick due
	// in the hand-over window, then releases the Lease, so the move costs
	// no tick. Otherwise From gave the bucket up to even the shares.
	Stop bool
}

// cost is the ticks docs/mtping.md lets m cost a source of its bucket.
func (m Move) cost() int {
	if m.Stop {
		return 0
	}
	return 1
}

func (m Move) String() string {
	why := "to even the shares"
	if m.Stop {
		why = "at its graceful stop"
	}
	return fmt.Sprintf("%s→%s %s–%s (%s)", m.From, m.To, m.Start.Format("15:04:05.0"), m.End.Format("15:04:05.0"), why)
}

// Params are a source's schedule and the check's tolerance.
type Params struct {
	// Period is the source's tick period.
	Period time.Duration
	// Margin widens a gap on both sides when moves are matched to it: a
	// tick's time is its send's, truncated to the second, and a replica
	// starts and stops firing a bucket just before or after its Lease
	// changes. If zero, a move counts only within the gap itself.
	Margin time.Duration
	// MovedFloor is the missed ticks a gap may have whatever the kind of
	// the moves counted for it, but never more than one per such move: a
	// caller that cannot tell a graceful stop from a move to even the
	// shares sets it to 1. A gap no move meets may miss none. If zero,
	// each move costs what its kind allows.
	MovedFloor int
}

// Violation is a gap between two consecutive ticks, Before and After,
// that breaks the promise: a tick fired twice, or more ticks missed than
// the moves counted allow.
type Violation struct {
	Before, After time.Time
	Twice         bool
	Missed        int
	// Allowed is what the gap could miss: the cost of the moves counted
	// for it, or Params.MovedFloor if more, capped at one per move counted.
	Allowed int
	Moves   []Move // the moves counted for the gap
}

func (v Violation) String() string {
	if v.Twice {
		return fmt.Sprintf("fired twice for the tick of %v (%v after the one before)", v.After, v.After.Sub(v.Before))
	}
	moves := make([]string, 0, len(v.Moves))
	for _, m := range v.Moves {
		moves = append(moves, m.String())
	}
	if len(moves) == 0 {
		moves = append(moves, "none")
	}
	return fmt.Sprintf("lost %d ticks between %v and %v, %d allowed; its bucket's moves counted: %s",
		v.Missed, v.Before, v.After, v.Allowed, strings.Join(moves, ", "))
}

// Check checks ticks (sorted) against the moves of their bucket: a gap of
// n missed ticks needs moves costing n or more whose span, Start to End,
// meets the gap widened by p.Margin, or n at most p.MovedFloor and at
// most one per such move; a gap no move meets may miss none. It returns
// the ticks missed in all and the gaps that break the promise.
func Check(ticks []time.Time, moves []Move, p Params) (missed int, vs []Violation) {
	for i := 1; i < len(ticks); i++ {
		before, after := ticks[i-1], ticks[i]
		// Ticks fire late, never early (the spread, a busy cron): each one
		// counts at its nearest period, so a tick late by less than half a
		// period is late, not missed, and two within half a period are
		// one tick sent twice.
		periods := int((after.Sub(before) + p.Period/2) / p.Period)
		if periods == 0 {
			vs = append(vs, Violation{Before: before, After: after, Twice: true})
			continue
		}
		n := periods - 1
		missed += n
		if n == 0 {
			continue
		}
		var counted []Move
		allowed := 0
		for _, m := range moves {
			if m.Start.Before(after.Add(p.Margin)) && m.End.After(before.Add(-p.Margin)) {
				counted = append(counted, m)
				allowed += m.cost()
			}
		}
		allowed = max(allowed, min(p.MovedFloor, len(counted)))
		if n > allowed {
			vs = append(vs, Violation{Before: before, After: after, Missed: n, Allowed: allowed, Moves: counted})
		}
	}
	return missed, vs
}
