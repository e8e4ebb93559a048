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
	"time"

	"go.uber.org/zap"
)

// A tick is sent once, however late the cron runs it. The cron plans an
// entry's next run from the moment it wakes, so a cron that wakes a
// period late or more (a starved process, a stalled node) runs one tick
// and skips the ones due meanwhile. The adapter keeps, per job, the tick
// due next (job.due), and whoever sends the ticks due by some instant
// claims them all under a.mu (claimLocked): the cron's run (fire), or a
// replica giving its bucket up (handOverLocked).

// claimLocked claims the ticks of j due by now that are not sent yet, so
// that no other run sends them, and returns them oldest first: none when
// the next tick is not due. Ticks due more than catchUpBound before now
// are not sent, and are logged: the bucket's Lease may have passed to
// another replica meanwhile, which fired them. The cron's own run always
// sends one.
func (a *Adapter) claimLocked(j *job, now time.Time) []time.Time {
	first := time.Unix(0, j.due.Load())
	if first.After(now) {
		return nil
	}
	j.due.Store(j.schedule.Next(now).UnixNano())
	from := first
	if oldest := now.Add(-a.catchUpBound); first.Before(oldest) {
		from = j.schedule.Next(oldest.Add(-time.Nanosecond))
	}
	var dues []time.Time
	for due := from; !due.After(now); due = j.schedule.Next(due) {
		dues = append(dues, due)
	}
	switch {
	case from.Equal(first):
	case len(dues) > 0:
		a.logNotSent(j, first, dues[0])
	default: // none within the bound: the oldest stands for the cron's run
		dues = []time.Time{first}
		if next := j.schedule.Next(first); !next.After(now) {
			a.logNotSent(j, next, now)
		}
	}
	return dues
}

func (a *Adapter) logNotSent(j *job, from, before time.Time) {
	a.p.Logger.Warnw("Ticks due more than a lease duration ago were not sent: the adapter could not run meanwhile",
		zap.Stringer("pingsource", j.key), zap.Time("from", from), zap.Time("before", before))
}

// sendOverdueLocked starts the sends of every tick of dues but the last
// and returns the last, with the event time it carries: a tick the cron
// runs on time carries the time it is sent, as every tick does, but when
// it ran a period late or more, each tick carries the time it was due,
// so that the sink sees the schedule's ticks and not the stall.
func (a *Adapter) sendOverdueLocked(j *job, dues []time.Time, now time.Time) (due, at time.Time) {
	last := len(dues) - 1
	if last == 0 {
		return dues[0], time.Time{}
	}
	a.p.Logger.Warnw("The cron ran late: the ticks it skipped are sent now, each stamped with the time it was due",
		zap.Stringer("pingsource", j.key), zap.Int("skipped", last), zap.Duration("late", now.Sub(dues[0])))
	for _, due := range dues[:last] {
		a.startSendLocked(j, due, due)
	}
	return dues[last], dues[last]
}
