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

package hostile

import (
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// Bounds of the attack itself, so that it ends against a proxy without
// its defences too.
const (
	// attackWithin bounds one attack's run; past it the attacker's
	// connections are closed, which ends any read still waiting.
	attackWithin = 3 * time.Minute
	// closeWait bounds how long one attack waits, in all, for the proxy
	// to answer or close its connections: once it has passed (against a
	// proxy that does not), each later wait gets closeGrace.
	closeWait  = 15 * time.Second
	closeGrace = 200 * time.Millisecond
)

// waitDeadline is the deadline of one wait of an attack that began its
// waits with the shared deadline d (closeWait from its start).
func waitDeadline(d time.Time) time.Time {
	return time.Now().Add(max(time.Until(d), closeGrace))
}

// attackT is the testing.TB an attack runs with, on a goroutine of its
// own: a fatal failure (Fatal, or h2raw's) fails the test and ends the
// attack, not the test, so that runAttack still measures and reports
// what the attack cost. What the attack registers with Cleanup (its
// connections' closes) runs when the attack ends.
type attackT struct {
	testing.TB

	mu       sync.Mutex
	cleanups []func()
	fatal    string // the first fatal failure
}

func (at *attackT) FailNow() {
	at.Fail()
	at.stop("FailNow")
}

func (at *attackT) Fatal(args ...any) {
	at.Helper()
	at.Error(args...)
	at.stop(fmt.Sprint(args...))
}

func (at *attackT) Fatalf(format string, args ...any) {
	at.Helper()
	at.Errorf(format, args...)
	at.stop(fmt.Sprintf(format, args...))
}

func (at *attackT) stop(why string) {
	at.mu.Lock()
	if at.fatal == "" {
		at.fatal = why
	}
	at.mu.Unlock()
	runtime.Goexit()
}

func (at *attackT) Cleanup(f func()) {
	at.mu.Lock()
	defer at.mu.Unlock()
	at.cleanups = append(at.cleanups, f)
}

// cleanup runs what the attack registered, last first.
func (at *attackT) cleanup() {
	at.mu.Lock()
	fs := at.cleanups
	at.cleanups = nil
	at.mu.Unlock()
	for _, f := range slices.Backward(fs) {
		f()
	}
}

// tally counts what the attacker saw on each of its connections, for the
// table and for one error per attack.
type tally struct {
	keys []string
	n    map[string]int
}

func (tl *tally) add(what string) {
	if tl.n == nil {
		tl.n = map[string]int{}
	}
	if tl.n[what] == 0 {
		tl.keys = append(tl.keys, what)
	}
	tl.n[what]++
}

func (tl *tally) String() string {
	if len(tl.keys) == 0 {
		return "none"
	}
	parts := make([]string, 0, len(tl.keys))
	for _, k := range tl.keys {
		parts = append(parts, fmt.Sprintf("%d × %s", tl.n[k], k))
	}
	return strings.Join(parts, "; ")
}

// want fails t unless every one of the total connections saw what.
func (tl *tally) want(t testing.TB, what string, total int) {
	t.Helper()
	if tl.n[what] != total {
		t.Errorf("of %d connections: %s; want every one %s", total, tl, what)
	}
}
