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

	"go.uber.org/zap"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	"knative.dev/pkg/kmeta"
)

// Upstream's adapter and this one hand the sources over through
// upstream's own bucket Leases, the gates: upstream's adapter fires the
// sources of the gates it holds, and this adapter fires a source only
// while its gate is free or held by one of its replicas (which stand for
// every gate, beside their own buckets). So while a Deployment rolls from
// one image to the other, whatever the bucket counts, a source fires from
// one adapter at a time.

// IdentitySuffix ends the identity under which this adapter's replicas
// hold Leases, so that each tells its own replicas' Leases from those of
// upstream's adapter (whose identity is its host name, "_" and a UUID).
const IdentitySuffix = "_event-forwarding-proxy"

// ownIdentity is id as this adapter's replicas hold Leases.
func ownIdentity(id string) string {
	if strings.HasSuffix(id, IdentitySuffix) {
		return id
	}
	return id + IdentitySuffix
}

// gateOpen says whether a gate held by holder lets this adapter fire its
// sources: free (released, or never taken) or held by one of its replicas.
func gateOpen(holder string) bool {
	return holder == "" || strings.HasSuffix(holder, IdentitySuffix)
}

// watchGates follows the holder of every gate Lease, each by a watch of
// that one name, and returns once each has been listed.
func (a *Adapter) watchGates(ctx context.Context) error {
	synced := make([]cache.InformerSynced, 0, len(a.gates))
	for _, g := range a.gates {
		name := g.Name()
		f := informers.NewSharedInformerFactoryWithOptions(a.p.Kube, 0, informers.WithNamespace(a.p.Namespace),
			informers.WithTweakListOptions(func(o *metav1.ListOptions) {
				o.FieldSelector = fields.OneTermEqualSelector("metadata.name", name).String()
			}))
		inf := f.Coordination().V1().Leases().Informer()
		seen := func(obj any) {
			if l, ok := obj.(*coordinationv1.Lease); ok && l.Name == name {
				a.setGateHolder(name, holderOf(l))
			}
		}
		_, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    seen,
			UpdateFunc: func(_, obj any) { seen(obj) },
			DeleteFunc: func(obj any) {
				if acc, err := kmeta.DeletionHandlingAccessor(obj); err == nil && acc.GetName() == name {
					a.setGateHolder(name, "")
				}
			},
		})
		if err != nil {
			return err
		}
		f.Start(ctx.Done())
		synced = append(synced, inf.HasSynced)
	}
	if !cache.WaitForCacheSync(ctx.Done(), synced...) {
		return fmt.Errorf("watching upstream's Leases: %w", context.Cause(ctx))
	}
	return nil
}

// setGateHolder records gate name's holder, and logs when that opens or
// closes the gate.
func (a *Adapter) setGateHolder(name, holder string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	old, known := a.gateHolders[name]
	a.gateHolders[name] = holder
	switch open := gateOpen(holder); {
	case known && open == gateOpen(old):
	case open:
		a.p.Logger.Infow("Upstream's Lease is free or held by this adapter: its sources fire from here",
			zap.String("lease", name), zap.String("holder", holder))
	default:
		a.p.Logger.Infow("Upstream's adapter holds its Lease: its sources fire from there, none from this replica",
			zap.String("lease", name), zap.String("holder", holder))
	}
}

// gateOpenLocked says whether key's gate lets this adapter fire it.
func (a *Adapter) gateOpenLocked(key types.NamespacedName) bool {
	for _, g := range a.gates {
		if g.Has(key) {
			return gateOpen(a.gateHolders[g.Name()])
		}
	}
	return true
}
