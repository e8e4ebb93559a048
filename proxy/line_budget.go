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

package proxy

import (
	"sync"
	"time"

	"go.uber.org/zap"
)

// lineBudget lets at most perSecond log lines of a kind through in each
// second and counts the rest; once a second that dropped lines is over,
// one line, report, says how many. A nil *lineBudget lets every line
// through.
type lineBudget struct {
	perSecond int
	logger    *zap.SugaredLogger
	report    string
	now       func() time.Time

	mu      sync.Mutex
	second  int64 // the Unix second being counted
	used    int
	dropped int
}

func newLineBudget(perSecond int, logger *zap.SugaredLogger, report string) *lineBudget {
	if perSecond <= 0 {
		return nil
	}
	return &lineBudget{perSecond: perSecond, logger: logger, report: report, now: time.Now}
}

// take reports whether a line may be written now.
func (b *lineBudget) take() bool {
	if b == nil {
		return true
	}
	now := b.now()
	b.mu.Lock()
	defer b.mu.Unlock()
	if s := now.Unix(); s != b.second {
		b.second, b.used = s, 0
	}
	if b.used < b.perSecond {
		b.used++
		return true
	}
	b.countLocked(now)
	return false
}

// drop counts an event that writes no line of its own: only the
// once-a-second report tells of it.
func (b *lineBudget) drop() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.countLocked(b.now())
}

func (b *lineBudget) countLocked(now time.Time) {
	if b.dropped == 0 {
		// The first one dropped in this second: report the count when
		// it is over, whether or not another comes.
		time.AfterFunc(time.Unix(now.Unix()+1, 0).Sub(now), b.flush)
	}
	b.dropped++
}

// flush logs how many lines were dropped since the last report.
func (b *lineBudget) flush() {
	b.mu.Lock()
	n := b.dropped
	b.dropped = 0
	b.mu.Unlock()
	if n > 0 {
		b.logger.Warnw(b.report, zap.Int("dropped", n), zap.Int("perSecond", b.perSecond))
	}
}
