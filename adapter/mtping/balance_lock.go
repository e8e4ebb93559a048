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

	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// errNotStanding refuses an acquisition the balancer does not want: the
// elector takes it as a failed attempt and tries again a retry period
// later, still reading the Lease each time.
var errNotStanding = errors.New("not standing for this bucket: this replica has its share")

// gatedLock is a bucket's Lease lock with the balancer in front of every
// acquisition. Reads, renewals and releases pass through unchanged.
type gatedLock struct {
	resourcelock.Interface
	name string
	bal  *balancer
}

var _ resourcelock.Interface = (*gatedLock)(nil)

func (l *gatedLock) Get(ctx context.Context) (*resourcelock.LeaderElectionRecord, []byte, error) {
	rec, raw, err := l.Interface.Get(ctx)
	if err == nil {
		l.bal.observe(l.name, rec, raw)
	}
	return rec, raw, err
}

func (l *gatedLock) Create(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	return l.acquire(func() error { return l.Interface.Create(ctx, ler) })
}

func (l *gatedLock) Update(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	switch {
	case ler.HolderIdentity == "": // client-go's release
		err := l.Interface.Update(ctx, ler)
		if err == nil {
			l.bal.released(l.name)
		}
		return err
	case l.bal.renewing(l.name):
		return l.Interface.Update(ctx, ler)
	default:
		return l.acquire(func() error { return l.Interface.Update(ctx, ler) })
	}
}

func (l *gatedLock) acquire(write func() error) error {
	if !l.bal.mayAcquire(l.name) {
		return errNotStanding
	}
	err := write()
	l.bal.acquired(l.name, err == nil)
	return err
}
