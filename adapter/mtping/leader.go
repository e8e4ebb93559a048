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
	"fmt"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"knative.dev/pkg/hash"
	kle "knative.dev/pkg/leaderelection"
	"knative.dev/pkg/reconciler"
)

// Lease names are upstream's (knative.dev/pkg's standard builder, for
// eventing's mt-ping reconciler), so that during a rollout from upstream's
// image to this one, or back, old and new pods compete for the same leases
// and a bucket never fires from both.
const (
	// Component is upstream's adapter name, the first part of a lease name.
	Component = "pingsource-mt-adapter"
	// QueueName is upstream's reconciler type, the middle part.
	QueueName = "knative.dev.eventing.pkg.adapter.mtping.Reconciler"
)

// LeaderElectionConfig reads the ConfigMap config-leader-election (or the
// name knative.dev/pkg's CONFIG_LEADERELECTION_NAME gives) in namespace
// with knative.dev/pkg's parser: keys buckets, lease-duration,
// renew-deadline, retry-period and map-lease-prefix.*. An absent ConfigMap
// means knative's defaults: 1 bucket, 60 s, 40 s, 10 s.
func LeaderElectionConfig(ctx context.Context, kc kubernetes.Interface, namespace string) (*kle.Config, error) {
	name := kle.ConfigMapName()
	cm, err := kc.CoreV1().ConfigMaps(namespace).Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return kle.NewConfigFromConfigMap(nil)
	case err != nil:
		return nil, fmt.Errorf("reading ConfigMap %s/%s: %w", namespace, name, err)
	}
	c, err := kle.NewConfigFromConfigMap(cm)
	if err != nil {
		return nil, fmt.Errorf("ConfigMap %s/%s: %w", namespace, name, err)
	}
	if c.RenewDeadline >= c.LeaseDuration || c.RetryPeriod <= 0 || c.RenewDeadline <= time.Duration(leaderelection.JitterFactor*float64(c.RetryPeriod)) {
		return nil, fmt.Errorf("ConfigMap %s/%s: want lease-duration > renew-deadline > 1.2 × retry-period > 0, have %s, %s, %s",
			namespace, name, c.LeaseDuration, c.RenewDeadline, c.RetryPeriod)
	}
	return c, nil
}

// Buckets returns the buckets of cc (with its lease names) in the order
// of their leases: knative.dev/pkg's consistent hashing of namespace/name,
// as every Knative controller and upstream's adapter use.
func Buckets(cc kle.ComponentConfig) []reconciler.Bucket {
	names := make(sets.Set[string], cc.Buckets)
	for i := range cc.Buckets {
		names.Insert(LeaseName(cc, i))
	}
	return hash.NewBucketSet(names).Buckets()
}

// LeaseName is the name of lease i, as knative.dev/pkg's standard builder
// writes it: <component>.<queue>.<ii>-of-<nn>, lower case, with the prefix
// replaced when map-lease-prefix names it.
func LeaseName(cc kle.ComponentConfig, i uint32) string {
	prefix := cc.Component + "." + QueueName
	if v := cc.LeaseNamesPrefixMapping[prefix]; v != "" {
		prefix = v
	}
	return strings.ToLower(fmt.Sprintf("%s.%02d-of-%02d", prefix, i, cc.Buckets))
}

// elector runs one Lease election per bucket, as knative.dev/pkg's
// standard builder does, but with the lease namespace given rather than
// read from the process environment, and with promotion and demotion of a
// bucket in order: each term's Promote happens before its Demote, on the
// term's own context.
type elector struct {
	kc        kubernetes.Interface
	namespace string
	cc        kle.ComponentConfig
	buckets   []reconciler.Bucket
	// promote is called when a term starts; demote when it ends, with the
	// same context (done by then).
	promote func(b reconciler.Bucket, term context.Context)
	demote  func(b reconciler.Bucket, term context.Context)
}

// run takes part in every bucket's election until ctx ends, then releases
// the leases it holds and returns. After a lost term it stands again.
func (e *elector) run(ctx context.Context) error {
	les := make([]*leaderelection.LeaderElector, 0, len(e.buckets))
	for _, b := range e.buckets {
		lock, err := resourcelock.New(resourcelock.LeasesResourceLock, e.namespace, b.Name(),
			e.kc.CoreV1(), e.kc.CoordinationV1(), resourcelock.ResourceLockConfig{Identity: e.cc.Identity})
		if err != nil {
			return err
		}
		le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
			Lock:          lock,
			LeaseDuration: e.cc.LeaseDuration,
			RenewDeadline: e.cc.RenewDeadline,
			RetryPeriod:   e.cc.RetryPeriod,
			Callbacks: leaderelection.LeaderCallbacks{
				// Called in a goroutine of its own; term ends when the
				// term does (after the lease is renewed no more).
				OnStartedLeading: func(term context.Context) {
					e.promote(b, term)
					<-term.Done()
					e.demote(b, term)
				},
				OnStoppedLeading: func() {},
			},
			ReleaseOnCancel: true,
			Name:            e.cc.Identity,
		})
		if err != nil {
			return err
		}
		les = append(les, le)
	}
	var wg sync.WaitGroup
	for _, le := range les {
		wg.Go(func() {
			for ctx.Err() == nil {
				le.Run(ctx) // one term (or none, when ctx ends first)
			}
		})
	}
	wg.Wait()
	return nil
}
