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
// between adapter replicas: no tick fires twice and none is missed, since
// a replica that gives a bucket up (to even the shares, or as it stops)
// hands it over with its mark and the next holder sends the ticks due
// while the Lease was free. History turns samples of the bucket Leases
// into moves, which a violation lists with its gap, to tell a loss at a
// hand-over from one elsewhere. The package is apart from
// test/cluster/e2e, whose TestMain needs the cluster, so that its unit
// tests run anywhere.
package ticks

import (
	"fmt"
	"strings"
	"time"
)

// Move is one change of holder of a bucket's Lease, as sampled: From was
// last seen holding it at Start, To first seen at End.
type Move struct {
	From, To   string
	Start, End time.Time
}

func (m Move) String() string {
	return fmt.Sprintf("%s→%s %s–%s", m.From, m.To, m.Start.Format("15:04:05.0"), m.End.Format("15:04:05.0"))
}

// Params are a source's schedule and how its bucket's moves are matched
// to a gap.
type Params struct {
	// Period is the source's tick period.
	Period time.Duration
	// Margin widens a gap on both sides when the moves of its bucket are
	// listed with it: a tick's time is its send's, truncated to the
	// second, and a replica starts and stops firing a bucket just before
	// or after its Lease changes. If zero, the gap itself.
	Margin time.Duration
}

// Violation is a gap between two consecutive ticks, Before and After,
// that breaks the promise: a tick fired twice, or ticks missed.
type Violation struct {
	Before, After time.Time
	Twice         bool
	Missed        int
	Moves         []Move // the moves of the bucket around the gap
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
	return fmt.Sprintf("lost %d ticks between %v and %v; its bucket's moves around the gap: %s",
		v.Missed, v.Before, v.After, strings.Join(moves, ", "))
}

// Check checks ticks (sorted): a tick missed or fired twice is a
// violation, listed with the moves of the bucket whose span, Start to
// End, meets the gap widened by p.Margin. It returns the ticks missed in
// all and the violations.
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
		if n == 0 {
			continue
		}
		missed += n
		var around []Move
		for _, m := range moves {
			if m.Start.Before(after.Add(p.Margin)) && m.End.After(before.Add(-p.Margin)) {
				around = append(around, m)
			}
		}
		vs = append(vs, Violation{Before: before, After: after, Missed: n, Moves: around})
	}
	return missed, vs
}
