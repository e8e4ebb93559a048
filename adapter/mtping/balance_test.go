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
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// fakeLock is a Lease lock in memory that counts writes.
type fakeLock struct {
	rec    resourcelock.LeaderElectionRecord
	writes int
}

func (l *fakeLock) Get(context.Context) (*resourcelock.LeaderElectionRecord, []byte, error) {
	r := l.rec
	return &r, fmt.Appendf(nil, "%+v", r), nil
}
func (l *fakeLock) Create(_ context.Context, r resourcelock.LeaderElectionRecord) error {
	l.rec = r
	l.writes++
	return nil
}
func (l *fakeLock) Update(_ context.Context, r resourcelock.LeaderElectionRecord) error {
	l.rec = r
	l.writes++
	return nil
}
func (l *fakeLock) RecordEvent(string) {}
func (l *fakeLock) Identity() string   { return "a" }
func (l *fakeLock) Describe() string   { return "fake" }

// TestBalancerKeepsItsOwnMembers: the caller of setMembers may sort or
// reuse its slice while acquisitions read the members (the race detector
// saw the balancing loop sort it under a running election).
func TestBalancerKeepsItsOwnMembers(t *testing.T) {
	bal := newBalancer("a", []string{"l0", "l1"}, 5*time.Second, 500*time.Millisecond, time.Now)
	live := []string{"c", "b", "a"}
	bal.setMembers(live)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range 100 {
			bal.mayAcquire("l0")
		}
	}()
	for range 100 {
		slices.Sort(live)
		live[0], live[2] = live[2], live[0]
	}
	<-done
	bal.mu.Lock()
	defer bal.mu.Unlock()
	if !slices.Equal(bal.members, []string{"c", "b", "a"}) {
		t.Errorf("members %v, want the ones given, as given", bal.members)
	}
}

func TestBalancerGatesAcquisitions(t *testing.T) {
	now := time.Unix(1000, 0)
	bal := newBalancer("a", []string{"l0", "l1", "l2", "l3"}, 5*time.Second, 500*time.Millisecond, func() time.Time { return now })
	bal.setMembers([]string{"b"})
	locks := map[string]*fakeLock{}
	gated := map[string]*gatedLock{}
	for _, n := range []string{"l0", "l1", "l2", "l3"} {
		locks[n] = &fakeLock{}
		gated[n] = &gatedLock{Interface: locks[n], name: n, bal: bal}
	}
	ctx := t.Context()
	held := resourcelock.LeaderElectionRecord{HolderIdentity: "b", LeaseDurationSeconds: 5}
	for _, n := range []string{"l0", "l1"} {
		locks[n].rec = held
		if _, _, err := gated[n].Get(ctx); err != nil {
			t.Fatal(err)
		}
	}
	mine := resourcelock.LeaderElectionRecord{HolderIdentity: "a", LeaseDurationSeconds: 5}
	// Two replicas, four buckets: b leads two, so a stands for two.
	for _, n := range []string{"l2", "l3"} {
		if err := gated[n].Create(ctx, mine); err != nil {
			t.Fatalf("acquiring %s: %v", n, err)
		}
	}
	// b's Leases expire on a's clock: a may not take a third, b being
	// below its share.
	now = now.Add(6 * time.Second)
	if err := gated["l0"].Update(ctx, mine); !errors.Is(err, errNotStanding) {
		t.Fatalf("a third bucket: %v, want errNotStanding", err)
	}
	if locks["l0"].writes != 0 {
		t.Error("a refused acquisition reached the API")
	}
	// Renewals and releases pass whatever the share.
	if err := gated["l2"].Update(ctx, mine); err != nil {
		t.Errorf("renewal: %v", err)
	}
	// b is gone: a stands for everything.
	bal.setMembers(nil)
	if err := gated["l0"].Update(ctx, mine); err != nil {
		t.Errorf("alone, acquiring l0: %v", err)
	}
	if err := gated["l2"].Update(ctx, resourcelock.LeaderElectionRecord{}); err != nil {
		t.Errorf("release: %v", err)
	}
	if bal.renewing("l2") {
		t.Error("l2 still counted as led after its release")
	}
	// Shutting down, a stands for no bucket, and still renews and releases.
	bal.stop()
	if err := gated["l1"].Update(ctx, mine); !errors.Is(err, errNotStanding) {
		t.Errorf("acquiring l1 while stopping: %v, want errNotStanding", err)
	}
	if err := gated["l0"].Update(ctx, mine); err != nil {
		t.Errorf("renewal while stopping: %v", err)
	}
	if err := gated["l0"].Update(ctx, resourcelock.LeaderElectionRecord{}); err != nil {
		t.Errorf("release while stopping: %v", err)
	}
}

func TestBalancerGivesUpSurplus(t *testing.T) {
	now := time.Unix(1000, 0)
	names := []string{"l0", "l1", "l2", "l3"}
	bal := newBalancer("a", names, 5*time.Second, 500*time.Millisecond, func() time.Time { return now })
	for _, n := range names {
		if !bal.mayAcquire(n) {
			t.Fatalf("alone, does not stand for %s", n)
		}
		bal.acquired(n, true)
		_, end := context.WithCancel(t.Context())
		bal.running(n, end)
		bal.started(n, t.Context())
	}
	if got := bal.surplus(); len(got) != 0 {
		t.Fatalf("alone: gives up %d buckets", len(got))
	}
	bal.setMembers([]string{"b"})
	got := bal.surplus()
	if len(got) != 2 || got[0].name != "l2" || got[1].name != "l3" {
		t.Fatalf("with a second replica: gives up %+v, want l2 and l3", got)
	}
	for _, r := range got {
		bal.ended(r.name)
	}
	bal.setMembers([]string{"b", "c"})
	if got := bal.surplus(); len(got) != 0 {
		t.Errorf("within the quiet time: gives up %d more", len(got))
	}
	if bal.mayAcquire("l2") {
		t.Error("stands again at once for a bucket it gave up")
	}
	now = now.Add(2 * time.Second)
	if got := bal.surplus(); len(got) != 0 {
		t.Errorf("two of four with three replicas (ceiling 2): gives up %d", len(got))
	}
}
