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
	"bytes"
	"context"
	"slices"
	"sync"
	"time"

	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// balancer keeps this replica's share of the buckets even with the other
// replicas': each bucket's elector asks it before acquiring a Lease
// (gatedLock), and it gives up the buckets above this replica's share.
// The elections themselves stay client-go's, so the Leases mean what
// they mean to upstream's adapter.
type balancer struct {
	id      string
	buckets int
	// lease is the Lease duration; quiet how long after a release this
	// replica releases no other, so that every replica's view has caught up
	// with the move (the others read a Lease every 1 to 1.2 retry periods).
	lease, quiet time.Duration
	now          func() time.Time

	mu       sync.Mutex
	states   map[string]*bucketState // by Lease name; guarded by mu
	members  []string                // live replicas at the last look; guarded by mu
	reserved int                     // acquisitions under way; guarded by mu
	// quietUntil: no release before it; guarded by mu.
	quietUntil time.Time
	// stopping: the replica is shutting down and stands for no bucket;
	// guarded by mu.
	stopping bool
}

// bucketState is what the balancer knows of one bucket's Lease. Guarded
// by balancer.mu.
type bucketState struct {
	// The Lease as last read: its holder, its duration, and when this
	// replica first saw that version (client-go's observed time: validity
	// is judged on this replica's clock, never on another's renewTime).
	holder     string
	seconds    int
	raw        []byte
	observedAt time.Time
	// leading: this replica holds the Lease, from a successful acquisition
	// until a release or the end of the election run.
	leading bool
	// term is the running term (from OnStartedLeading); end ends the
	// election run, releasing the Lease.
	term context.Context
	end  context.CancelFunc
	// cooldownUntil: given up voluntarily, not stood for again before.
	cooldownUntil time.Time
}

func newBalancer(id string, leaseNames []string, lease, retry time.Duration, now func() time.Time) *balancer {
	b := &balancer{id: id, buckets: len(leaseNames), lease: lease, quiet: 3 * retry, now: now,
		states: make(map[string]*bucketState, len(leaseNames)), members: []string{id}}
	for _, n := range leaseNames {
		b.states[n] = &bucketState{}
	}
	return b
}

// observe records a Lease as read by its elector.
func (b *balancer) observe(name string, rec *resourcelock.LeaderElectionRecord, raw []byte) {
	b.mu.Lock()
	defer b.mu.Unlock()
	st := b.states[name]
	if bytes.Equal(st.raw, raw) {
		return
	}
	st.raw, st.observedAt = raw, b.now()
	st.holder, st.seconds = rec.HolderIdentity, rec.LeaseDurationSeconds
}

// setMembers records the replicas alive, this one included.
func (b *balancer) setMembers(live []string) {
	live = slices.Clone(live) // the caller may go on using its slice
	b.mu.Lock()
	defer b.mu.Unlock()
	if !slices.Contains(live, b.id) {
		live = append(live, b.id)
	}
	b.members = live
}

// viewLocked is the shares as this replica sees them.
func (b *balancer) viewLocked() (shareView, int) {
	now := b.now()
	v := shareView{buckets: b.buckets, members: b.members, held: map[string]int{}}
	mine := b.reserved
	for _, st := range b.states {
		switch {
		case st.leading:
			mine++
		case st.holder != "" && now.Before(st.observedAt.Add(time.Duration(st.seconds)*time.Second)):
			v.held[st.holder]++
		default:
			v.free++
		}
	}
	return v, mine
}

// mayAcquire reports whether this replica stands for the free bucket
// name now; a yes reserves a place in its share until acquired reports
// how the attempt went.
func (b *balancer) mayAcquire(name string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.stopping || b.now().Before(b.states[name].cooldownUntil) {
		return false
	}
	v, mine := b.viewLocked()
	if mine >= v.plan(b.id, mine).target {
		return false
	}
	b.reserved++
	return true
}

// stop makes this replica stand for no bucket from now on.
func (b *balancer) stop() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.stopping = true
}

// acquired ends a reservation: ok when the Lease is now this replica's.
func (b *balancer) acquired(name string, ok bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.reserved--
	if ok {
		st := b.states[name]
		st.leading, st.holder, st.observedAt = true, b.id, b.now()
	}
}

// renewing reports whether an Update of name by this replica renews its
// own Lease rather than taking someone else's.
func (b *balancer) renewing(name string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	st := b.states[name]
	return st.leading || st.holder == b.id
}

// released records that this replica gave the Lease up.
func (b *balancer) released(name string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	st := b.states[name]
	st.leading, st.holder, st.raw = false, "", nil
}

// running records the election run of name and how to end it.
func (b *balancer) running(name string, end context.CancelFunc) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.states[name].end = end
}

// started records the term that began on name.
func (b *balancer) started(name string, term context.Context) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.states[name].term = term
}

// ended records that the election run of name returned: the Lease is no
// longer this replica's.
func (b *balancer) ended(name string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	st := b.states[name]
	st.leading, st.term, st.end = false, nil, nil
}

// surplus returns the buckets this replica gives up now to even the
// shares, each with its term and the function that ends its run; none
// within the quiet time of the last release.
func (b *balancer) surplus() []release {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.now()
	if now.Before(b.quietUntil) {
		return nil
	}
	v, mine := b.viewLocked()
	n := v.plan(b.id, mine).release
	if n == 0 {
		return nil
	}
	var leading []string
	for name, st := range b.states {
		if st.leading && st.term != nil && st.end != nil {
			leading = append(leading, name)
		}
	}
	// The last by name: deterministic, and the same bucket a replica gives
	// up first each time, which keeps moves few.
	slices.Sort(leading)
	leading = leading[max(len(leading)-n, 0):]
	out := make([]release, 0, len(leading))
	for _, name := range leading {
		st := b.states[name]
		out = append(out, release{name: name, term: st.term, end: st.end, held: mine, view: v})
		st.cooldownUntil = now.Add(b.lease)
	}
	if len(out) > 0 {
		b.quietUntil = now.Add(b.quiet)
	}
	return out
}

// release is a bucket to give up: its term, to stop firing first, and the
// function that ends its election run, releasing the Lease.
type release struct {
	name string
	term context.Context
	end  context.CancelFunc
	held int // buckets this replica led when it decided
	view shareView
}
