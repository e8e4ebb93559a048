//go:build integration

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
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestFrozenLeaderSendsTheTicksItSkipped freezes the leader of the only
// bucket (SIGSTOP) across two ticks, well inside its lease: thawed, its
// cron runs one tick late and would skip the other; the adapter sends
// both, stamped with their due times, so that no tick is lost and none
// is sent twice.
func TestFrozenLeaderSendsTheTicksItSkipped(t *testing.T) {
	t.Parallel()
	h, leader := startOneBucket(t, "stall")
	c, sk, sources, procs := h.c, h.sk, h.sources, h.procs
	before := time.Now()
	eventually(t, 15*time.Second, "every source fired twice", h.firedSince(before, 2))

	// Frozen from just after a tick's spread to 700 ms past the second
	// tick after it: both fall while the process cannot run.
	freeze := time.Now().Truncate(tick).Add(tick + 600*time.Millisecond)
	time.Sleep(time.Until(freeze))
	procs[leader].Signal(syscall.SIGSTOP)
	time.Sleep(time.Until(freeze.Add(2*tick + 100*time.Millisecond)))
	procs[leader].Signal(syscall.SIGCONT)
	thawed := time.Now()
	eventually(t, 10*time.Second, "every source fired twice after the thaw", h.firedSince(thawed, 2))
	for _, holder := range c.leaseHolders(t) {
		if holder != leader {
			t.Fatalf("the bucket moved to %s while %s was frozen: the freeze outlasted the lease", holder, leader)
		}
	}
	checkGaps(t, "frozen leader", sk, sources, before, freeze, 0)
	if logs := procs[leader].Logs.String(); !strings.Contains(logs, "The cron ran late") {
		t.Errorf("%s never logged the ticks its cron skipped:\n%s", leader, logs)
	}
}
