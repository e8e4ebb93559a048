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
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"knative.dev/event-forwarding-proxy/proxy/proxytest"
)

// TestLineBudget: perSecond lines pass in a second and the rest are
// counted; once that second is over, one line says how many were dropped,
// and the next second has its whole budget again.
func TestLineBudget(t *testing.T) {
	core, logs := observer.New(zapcore.InfoLevel)
	b := newLineBudget(3, zap.New(core).Sugar(), "Per-call log lines dropped")
	now := time.Unix(1000, 900*int64(time.Millisecond)) // 100 ms before the second ends
	b.now = func() time.Time { return now }
	passed := 0
	for range 5 {
		if b.take() {
			passed++
		}
	}
	if passed != 3 {
		t.Errorf("%d lines passed in one second, want 3", passed)
	}
	proxytest.Eventually(t, 5*time.Second, func() bool {
		return logs.FilterMessage("Per-call log lines dropped").Len() == 1
	}, "the report of the dropped lines")
	if got := logs.FilterMessage("Per-call log lines dropped").All()[0].ContextMap()["dropped"]; got != int64(2) {
		t.Errorf("dropped = %v, want 2", got)
	}
	now = now.Add(time.Second)
	if !b.take() {
		t.Error("the next second's first line was dropped")
	}
}

// TestLineBudgetOff: a zero budget lets every line through.
func TestLineBudgetOff(t *testing.T) {
	b := newLineBudget(0, zap.NewNop().Sugar(), "")
	for i := range 1000 {
		if !b.take() {
			t.Fatalf("line %d dropped without a budget", i)
		}
	}
}
