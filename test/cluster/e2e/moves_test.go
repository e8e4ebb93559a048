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
	"context"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"knative.dev/pkg/reconciler"

	"knative.dev/event-forwarding-proxy/test/cluster/ticks"
)

// moveSample is how often the bucket Leases are read: one List of the
// namespace's few Leases, well within a hand-over's seconds.
const moveSample = 200 * time.Millisecond

// moveRecorder keeps the bucket Leases' changes of holder from its start
// until its test ends.
type moveRecorder struct {
	started time.Time
	mu      sync.Mutex
	history ticks.History // guarded by mu
}

// recordMoves samples the buckets' Leases every moveSample until t ends;
// a failed sample is skipped.
func recordMoves(ctx context.Context, t *testing.T, buckets []reconciler.Bucket) *moveRecorder {
	t.Helper()
	names := map[string]bool{}
	for _, b := range buckets {
		names[b.Name()] = true
	}
	r := &moveRecorder{started: time.Now()}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done })
	go func() {
		defer close(done)
		tick := time.NewTicker(moveSample)
		defer tick.Stop()
		for {
			sent := time.Now()
			leases, err := cluster.kube.CoordinationV1().Leases(systemNamespace).List(ctx, metav1.ListOptions{})
			got := time.Now()
			if err == nil {
				holders := map[string]string{}
				for _, l := range leases.Items {
					if names[l.Name] && l.Spec.HolderIdentity != nil {
						holders[l.Name] = podOf(*l.Spec.HolderIdentity)
					}
				}
				r.mu.Lock()
				r.history.Sample(sent, got, holders)
				r.mu.Unlock()
			}
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	return r
}

// byBucket returns the moves so far by Lease name.
func (r *moveRecorder) byBucket() map[string][]ticks.Move {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.history.Moves()
}
