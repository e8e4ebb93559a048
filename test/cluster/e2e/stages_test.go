//go:build cluster

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

package e2e

import (
	"sync"
	"testing"
	"time"
)

// The scenarios share the cluster's one install. Every one is a parallel
// test, and each waits, at the points where it would disturb another or
// be disturbed by it, for the stages it must come after. The node mostly
// waits on pods, so the first three of four steps run what they can side
// by side:
//
//  1. The upgrade scenario (docs/install.md's Eventing upgrade, way back
//     and uninstall, then the install again), alone on the install.
//  2. The scenarios that change config-event-forwarding or Eventing's
//     features, one after the other: OIDC (which turns on a token per
//     source: no other source exists yet), heartbeats, then the seed
//     scenario's load, on the install at min-scale. Beside them, the
//     install's checks and the real path, which change no setting and
//     start no PingSource; the seed scenario deletes its busiest proxy pod
//     only once they are over.
//  3. The seed scenario's wait for the HPA to scale the proxy back in (its
//     five minutes of stabilization) beside the adapter scenario. Its
//     sources, the Operator flavour's, and their sinks, are made during
//     the seed load, once its own sources are Ready (seedSourcesStage),
//     on a schedule that does not fire, and switched to theirs once the
//     load is over: so Eventing's controller, which readies sources one
//     after the other, has most of the adapter scenario's 2,000 Ready by
//     its step that needs them.
//  4. The Operator flavour (TestOperator), alone on the install once the
//     adapter scenario is over: the Knative Operator takes Eventing over,
//     which rolls out Eventing's controller and the adapter. Beside it,
//     the async-kpa profile's load on a copy of the proxy
//     (TestAsyncKPAProfile), which touches neither Eventing nor the
//     install.
//
// The seed and real-path scenarios make their sinks beside the upgrade
// scenario, OIDC and heartbeats theirs beside it and the OIDC scenario:
// no scenario waits for its sink after the one before it ends.
//
// The memory scenario runs in step 3 too, beside all of them, on a copy
// of the release's proxy in its own namespace (copyProxy): it waits only
// so that its pods and calls do not slow the first two steps, which the
// node's CPU bounds, while the third mostly waits on the HPA.
//
// TestMain lets go test run them all at once (scenarioSlots). Each
// scenario marks its stage as running before its t.Parallel, which
// returns only once every top-level test has started: a scenario run alone
// (go test -run) waits for no stage that is not part of the run.
var (
	upgradeStage  = newStage("the upgrade scenario")
	seedLoadStage = newStage("the seed scenario's load")
	// seedSourcesStage ends once the seed scenario's sources are Ready:
	// Eventing's controller, which readies sources one after the other,
	// has no more to do for its load, which leaves the node's CPU mostly
	// idle while the HPA waits for the held calls to climb.
	seedSourcesStage = newStage("the seed scenario's sources")
	installStage     = newStage("the install's checks")
	realPathStage    = newStage("the real-path scenario")
	heartbeatsStage  = newStage("the heartbeats scenario")
	oidcStage        = newStage("the OIDC scenario")
	adapterStage     = newStage("the adapter scenario")
)

// stagesDeadline bounds a wait for a stage: longer than any scenario's own
// deadline, shorter than the scenarios' go test -timeout.
const stagesDeadline = 40 * time.Minute

// A stage is a part of the scenarios that others wait for.
type stage struct {
	name    string
	running bool
	done    chan struct{}
	once    sync.Once
}

func newStage(name string) *stage { return &stage{name: name, done: make(chan struct{})} }

// begin marks the stage as part of this run (call it before t.Parallel)
// and ends it once the test and its cleanups are over, however it ends:
// its cleanup, registered first, runs last.
func (s *stage) begin(t *testing.T) {
	s.running = true
	t.Cleanup(s.end)
}

// end ends the stage early, for those waiting on part of a test.
func (s *stage) end() { s.once.Do(func() { close(s.done) }) }

// after waits until every stage given that runs is over.
func after(t testing.TB, stages ...*stage) {
	t.Helper()
	deadline := time.After(stagesDeadline)
	for _, s := range stages {
		if !s.running {
			continue
		}
		select {
		case <-s.done:
		case <-deadline:
			t.Fatalf("%s did not end within %v", s.name, stagesDeadline)
		}
	}
}
