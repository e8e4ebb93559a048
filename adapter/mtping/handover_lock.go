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
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// HandoverAnnotation is written on a bucket's Lease when its holder
// releases it (handoverMark, JSON): every tick of the bucket's sources due
// at or before firedThrough was fired by the holder, none after. The next
// holder fires the ticks due between that time and its own start, so a
// graceful hand-over loses no tick however long the Lease stays free. The
// mark counts only while the Lease is in the state the release left it
// in: free, with the same leaseTransitions (another elector, such as
// upstream's adapter, that takes and releases the Lease meanwhile keeps
// the annotation but moves the count). Each acquisition here removes it.
const HandoverAnnotation = "event-forwarding.knative.dev/handover"

// handoverMark is the value of HandoverAnnotation.
type handoverMark struct {
	FiredThrough     time.Time `json:"firedThrough"`
	LeaseTransitions int       `json:"leaseTransitions"`
}

// handoverLock is client-go's LeaseLock with the fired-through mark: the
// same Lease spec (LeaderElectionRecordToLeaseSpec), each write at the
// version last read, and the annotation written on release and read on
// acquisition.
type handoverLock struct {
	client    coordinationv1client.LeasesGetter
	namespace string
	name      string
	identity  string
	// firedThrough says through when this replica fired the bucket, when
	// it has stopped firing it; false when it has not (a release after a
	// failed renewal), and then the release carries no mark.
	firedThrough func() (time.Time, bool)

	mu    sync.Mutex
	lease *coordinationv1.Lease // as last read or written
	// inherited is the mark of the release this replica last acquired the
	// Lease after; zero when it took the Lease otherwise.
	inherited time.Time
}

var _ resourcelock.Interface = (*handoverLock)(nil)

func (l *handoverLock) Get(ctx context.Context) (*resourcelock.LeaderElectionRecord, []byte, error) {
	lease, err := l.client.Leases(l.namespace).Get(ctx, l.name, metav1.GetOptions{})
	if err != nil {
		return nil, nil, err
	}
	l.mu.Lock()
	l.lease = lease
	l.mu.Unlock()
	rec := resourcelock.LeaseSpecToLeaderElectionRecord(&lease.Spec)
	raw, err := json.Marshal(*rec)
	if err != nil {
		return nil, nil, err
	}
	return rec, raw, nil
}

func (l *handoverLock) Create(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	lease, err := l.client.Leases(l.namespace).Create(ctx, &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: l.name, Namespace: l.namespace, Labels: map[string]string{PartOfLabel: PartOfValue}},
		Spec:       resourcelock.LeaderElectionRecordToLeaseSpec(&ler),
	}, metav1.CreateOptions{})
	if err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lease, l.inherited = lease, time.Time{}
	return nil
}

// Update writes ler over the Lease as last read. A release adds the
// fired-through mark; an acquisition keeps the mark the last holder left
// (for promote) and removes it from the Lease.
func (l *handoverLock) Update(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	l.mu.Lock()
	if l.lease == nil {
		l.mu.Unlock()
		return errors.New("lease not read yet: Get or Create first")
	}
	prev := l.lease
	next := prev.DeepCopy()
	l.mu.Unlock()

	next.Spec = resourcelock.LeaderElectionRecordToLeaseSpec(&ler)
	delete(next.Annotations, HandoverAnnotation)
	if ler.HolderIdentity == "" {
		if through, ok := l.firedThrough(); ok {
			b, err := json.Marshal(handoverMark{FiredThrough: through.UTC(), LeaseTransitions: ler.LeaderTransitions})
			if err != nil {
				return err
			}
			if next.Annotations == nil {
				next.Annotations = map[string]string{}
			}
			next.Annotations[HandoverAnnotation] = string(b)
		}
	}
	written, err := l.client.Leases(l.namespace).Update(ctx, next, metav1.UpdateOptions{})
	if err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lease = written
	if ler.HolderIdentity == l.identity && deref(prev.Spec.HolderIdentity) != l.identity {
		l.inherited, _ = FiredThrough(prev) // acquired
	}
	return nil
}

// FiredThrough reads the hand-over mark of a bucket Lease: through when
// its last holder fired the bucket's sources, if the Lease is still as
// that holder's release left it (HandoverAnnotation).
func FiredThrough(l *coordinationv1.Lease) (time.Time, bool) {
	var mark handoverMark
	if json.Unmarshal([]byte(l.Annotations[HandoverAnnotation]), &mark) != nil {
		return time.Time{}, false
	}
	if deref(l.Spec.HolderIdentity) != "" || mark.LeaseTransitions != int(deref(l.Spec.LeaseTransitions)) {
		return time.Time{}, false
	}
	return mark.FiredThrough, true
}

// takeInherited returns the mark of the release this replica acquired the
// Lease after, once: zero when there was none.
func (l *handoverLock) takeInherited() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	t := l.inherited
	l.inherited = time.Time{}
	return t
}

func (l *handoverLock) RecordEvent(string) {}

func (l *handoverLock) Identity() string { return l.identity }

func (l *handoverLock) Describe() string { return fmt.Sprintf("%v/%v", l.namespace, l.name) }
