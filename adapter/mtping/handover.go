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
	"knative.dev/pkg/reconciler"
)

// A bucket handed over gracefully loses no tick, however long its Lease
// stays free: the replica giving it up fires every tick due until it
// stops (handOverLocked) and writes that instant on the Lease as it
// releases it (HandoverAnnotation); the next holder fires the ticks
// due since then before its own (catchUpLocked). A bucket whose holder
// died, or that stayed free longer than catchUpBound, has no such mark
// and loses the ticks due meanwhile.

// handOverLocked stops b firing here at through: every tick of its
// sources due by then that the cron has not run yet (a loaded cron runs
// late: due.go) is sent now, and through becomes the mark b's release
// carries.
func (a *Adapter) handOverLocked(b reconciler.Bucket, through time.Time) {
	for key, en := range a.entries {
		if !b.Has(key) || !a.gateOpenLocked(key) {
			continue
		}
		// Claimed here: the cron's run of them, if it comes, finds the
		// next tick not due yet and the bucket no longer led.
		if dues := a.claimLocked(en.job, through); len(dues) > 0 {
			due, at := a.sendOverdueLocked(en.job, dues, through)
			a.startSendLocked(en.job, due, at)
		}
	}
	a.handedOver[b.Name()] = through
}

// catchUpLocked fires the ticks of b's sources due after firedThrough and
// up to now, each stamped with the time it was due, and returns how many.
// None when firedThrough is zero or older than catchUpBound.
func (a *Adapter) catchUpLocked(b reconciler.Bucket, firedThrough time.Time) int {
	if firedThrough.IsZero() {
		return 0
	}
	now := a.p.Now()
	if gap := now.Sub(firedThrough); gap > a.catchUpBound {
		a.p.Logger.Warnw("Bucket free for longer than a lease duration: the ticks due meanwhile are lost",
			zap.String("lease", b.Name()), zap.Duration("free", gap))
		return 0
	}
	n := 0
	for key, j := range a.jobs {
		if !b.Has(key) || !a.gateOpenLocked(key) {
			continue
		}
		for due := j.schedule.Next(firedThrough); !due.After(now); due = j.schedule.Next(due) {
			a.startSendLocked(j, due, due)
			n++
		}
	}
	return n
}

// startSendLocked sends the tick of j due at due on a goroutine of its
// own, with the event time at (zero: when sent).
func (a *Adapter) startSendLocked(j *job, due, at time.Time) {
	a.sends.Add(1)
	go a.send(a.sendCtx, j, due, at)
}

// firedThrough is the mark b's release carries: through when this replica
// fired b's sources, once it has stopped firing them; false while it
// still fires them (a release after a failed renewal carries none).
func (a *Adapter) firedThrough(b reconciler.Bucket) (time.Time, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	t, ok := a.handedOver[b.Name()]
	return t, ok
}

// handOverAllLocked stops every bucket led here firing, at once, as the
// adapter stops.
func (a *Adapter) handOverAllLocked() {
	now := a.p.Now()
	for _, b := range a.buckets {
		if term := a.terms[b.Name()]; term != nil && term.Err() == nil {
			a.handOverLocked(b, now)
		}
	}
}
