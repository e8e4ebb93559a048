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

package heartbeats

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"knative.dev/event-forwarding-proxy/test/testproc"
)

// sent records what the scheduler sends; block, when set, holds each send
// until it is closed or the send's context ends.
type sent struct {
	mu    sync.Mutex
	seqs  map[string][]uint64 // by sink
	block chan struct{}
	ended chan error // each held send's context error, once it returns
}

func (r *sent) send(ctx context.Context, src Source, seq uint64) bool {
	r.mu.Lock()
	r.seqs[src.Sink.String()] = append(r.seqs[src.Sink.String()], seq)
	r.mu.Unlock()
	if r.block == nil {
		return true
	}
	select {
	case <-r.block:
	case <-ctx.Done():
	}
	select {
	case r.ended <- ctx.Err():
	default: // the test reads the first few only
	}
	return ctx.Err() == nil
}

func (r *sent) of(sink string) []uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]uint64(nil), r.seqs[sink]...)
}

func source(sink string, period time.Duration) Source {
	return Source{Namespace: "ns", Name: "hb", Sink: &url.URL{Scheme: "http", Host: sink}, Period: period}
}

func newTestScheduler(t *testing.T, slots int, r *sent) (*scheduler, *observer.ObservedLogs, *[]int) {
	core, logs := observer.New(zap.InfoLevel)
	var mu sync.Mutex
	counts := &[]int{}
	s := newScheduler(t.Context(), slots, r.send, func(n int) { mu.Lock(); *counts = append(*counts, n); mu.Unlock() }, zap.New(core).Sugar())
	return s, logs, counts
}

// TestSchedulerCarriesTheSequenceOverAnUpdate: each tick takes the next
// number, counting from 1, and an update carries the count over. Sends
// run at once on their own goroutines (up to MAX_INFLIGHT_SENDS, each
// retried on its own), so nothing orders their arrival: the test checks
// the numbers, not the order they came in.
func TestSchedulerCarriesTheSequenceOverAnUpdate(t *testing.T) {
	r := &sent{seqs: map[string][]uint64{}}
	s, logs, counts := newTestScheduler(t, 10, r)
	defer s.drain(time.Second)
	s.set(source("old", 2*time.Millisecond))
	testproc.Eventually(t, 10*time.Second, "three heartbeats to the old sink", func() bool { return len(r.of("http://old")) >= 3 })
	s.set(source("old", 2*time.Millisecond)) // unchanged: the same run goes on
	s.set(source("new", 2*time.Millisecond))
	testproc.Eventually(t, 10*time.Second, "a heartbeat to the new sink", func() bool { return len(r.of("http://new")) >= 1 })
	s.remove("ns/hb")
	s.inflight.Wait() // a send started before remove records itself first
	if got := fmt.Sprint(*counts); got != "[1 1 0]" {
		t.Errorf("source counts %s, want [1 1 0]: added, updated, removed", got)
	}
	old, next := r.of("http://old"), r.of("http://new")
	slices.Sort(old)
	slices.Sort(next)
	// A tick whose send found every slot taken is skipped with its number.
	var skipped []uint64
	for _, e := range logs.FilterMessageSnippet("every send slot is taken").All() {
		skipped = append(skipped, e.ContextMap()["sequence"].(uint64))
	}
	all := slices.Sorted(slices.Values(slices.Concat(old, next, skipped)))
	for i, seq := range all {
		if seq != uint64(i+1) {
			t.Fatalf("sequences %v (old sink %v, new sink %v, skipped %v): want 1 to %d, each once", all, old, next, skipped, len(all))
		}
	}
	if next[0] < old[len(old)-1] {
		t.Errorf("the new sink's first heartbeat is %d, before the old sink's last of %v: the count was not carried over", next[0], old)
	}
	stopped := len(r.of("http://new"))
	time.Sleep(20 * time.Millisecond) // ten periods: a tick after remove would show
	if n := len(r.of("http://new")); n != stopped {
		t.Errorf("%d heartbeats after the source was removed", n-stopped)
	}
}

func TestSchedulerSkipsTicksWhenEverySlotIsTaken(t *testing.T) {
	r := &sent{seqs: map[string][]uint64{}, block: make(chan struct{}), ended: make(chan error, 100)}
	s, logs, _ := newTestScheduler(t, 1, r)
	s.set(source("slow", 2*time.Millisecond))
	testproc.Eventually(t, 10*time.Second, "a skipped tick logged", func() bool {
		return logs.FilterMessageSnippet("every send slot is taken").Len() > 0
	})
	if n := len(r.of("http://slow")); n != 1 {
		t.Fatalf("%d sends running with one slot", n)
	}
	e := logs.FilterMessageSnippet("every send slot is taken").All()[0]
	if e.ContextMap()["source"] != "ns/hb" || e.ContextMap()["slots"] != int64(1) {
		t.Errorf("skip logged with %v", e.ContextMap())
	}
	close(r.block)
	testproc.Eventually(t, 10*time.Second, "sends resume once the slot is free", func() bool { return len(r.of("http://slow")) >= 3 })
	s.drain(time.Second)
}

func TestSchedulerDrain(t *testing.T) {
	t.Run("waits for running sends", func(t *testing.T) {
		r := &sent{seqs: map[string][]uint64{}, block: make(chan struct{}), ended: make(chan error, 10)}
		s, logs, _ := newTestScheduler(t, 10, r)
		s.set(source("sink", 2*time.Millisecond))
		testproc.Eventually(t, 10*time.Second, "a send running", func() bool { return len(r.of("http://sink")) >= 1 })
		done := make(chan struct{})
		go func() { s.drain(time.Minute); close(done) }()
		select {
		case <-done:
			t.Fatal("drain returned with a send running")
		case <-time.After(20 * time.Millisecond):
		}
		close(r.block)
		<-done
		if err := <-r.ended; err != nil {
			t.Errorf("the send ended with %v, want it to finish on its own", err)
		}
		if logs.FilterMessageSnippet("still running").Len() != 0 {
			t.Error("a clean drain logged cancelled sends")
		}
		s.set(source("late", time.Millisecond))
		if len(s.runs) != 0 {
			t.Error("a source was scheduled after the drain")
		}
	})
	t.Run("cancels sends past the timeout", func(t *testing.T) {
		r := &sent{seqs: map[string][]uint64{}, block: make(chan struct{}), ended: make(chan error, 10)}
		s, logs, _ := newTestScheduler(t, 10, r)
		s.set(source("sink", 2*time.Millisecond))
		testproc.Eventually(t, 10*time.Second, "a send running", func() bool { return len(r.of("http://sink")) >= 1 })
		s.drain(10 * time.Millisecond)
		if err := <-r.ended; !errors.Is(err, context.Canceled) {
			t.Errorf("the send ended with %v, want it cancelled", err)
		}
		if logs.FilterMessageSnippet("still running").Len() != 1 {
			t.Error("the cancelled sends were not logged")
		}
	})
}
