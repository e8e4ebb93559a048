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
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes"
	kle "knative.dev/pkg/leaderelection"
)

// MemberLabel marks the member Leases: one per running replica, renewed
// like a bucket's Lease, so that each replica knows how many share the
// buckets. Its value is the adapter's component name.
const MemberLabel = "event-forwarding.knative.dev/member-of"

// MemberLeaseName is the member Lease of the replica with identity id:
// the buckets' prefix, "member", and the identity (a hash of it when it
// is not a valid name).
func MemberLeaseName(cc kle.ComponentConfig, id string) string {
	prefix := strings.TrimSuffix(LeaseName(cc, 0), fmt.Sprintf(".%02d-of-%02d", 0, cc.Buckets))
	name := prefix + ".member." + strings.ToLower(id)
	if len(validation.IsDNS1123Subdomain(name)) != 0 {
		sum := sha256.Sum256([]byte(id))
		name = prefix + ".member." + hex.EncodeToString(sum[:8])
	}
	return name
}

// memberLeases keeps this replica's member Lease and reads the others'.
// Only the balancing loop uses it.
type memberLeases struct {
	kc        kubernetes.Interface
	namespace string
	component string
	name, id  string
	duration  time.Duration
	now       func() time.Time
	// seen: each member Lease's last version and when this replica first
	// saw it; a Lease not renewed within its duration of that is dead.
	seen map[string]seenLease
}

type seenLease struct {
	version    string
	observedAt time.Time
}

// renew creates or renews this replica's member Lease.
func (m *memberLeases) renew(ctx context.Context) error {
	leases := m.kc.CoordinationV1().Leases(m.namespace)
	now := metav1.NewMicroTime(m.now())
	spec := coordinationv1.LeaseSpec{HolderIdentity: new(m.id),
		LeaseDurationSeconds: new(int32(m.duration / time.Second)), RenewTime: &now}
	l, err := leases.Get(ctx, m.name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		spec.AcquireTime = &now
		_, err = leases.Create(ctx, &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: m.name, Labels: map[string]string{MemberLabel: m.component}},
			Spec:       spec,
		}, metav1.CreateOptions{})
		return err
	}
	if err != nil {
		return err
	}
	spec.AcquireTime = l.Spec.AcquireTime
	l.Spec = spec
	_, err = leases.Update(ctx, l, metav1.UpdateOptions{})
	return err
}

// live returns the identities of the replicas whose member Leases are
// alive, this one included. A Lease is alive while this replica has seen
// a new version of it within its duration and its renew time is within
// its duration too: a replica that starts after another died does not
// count the dead one for a whole duration. (The renew time is another
// replica's clock: clocks apart by more than a duration make the shares
// less even, never a bucket fire twice, which the buckets' own Leases
// decide.) Leases dead for two durations are deleted, so that replicas
// that come and go leave nothing behind; one deleted wrongly comes back
// at its holder's next renewal.
func (m *memberLeases) live(ctx context.Context) ([]string, error) {
	leases := m.kc.CoordinationV1().Leases(m.namespace)
	list, err := leases.List(ctx, metav1.ListOptions{LabelSelector: MemberLabel + "=" + m.component})
	if err != nil {
		return nil, err
	}
	now := m.now()
	ids := []string{m.id}
	seen := make(map[string]seenLease, len(list.Items))
	for _, l := range list.Items {
		s, ok := m.seen[l.Name]
		if !ok || s.version != l.ResourceVersion {
			s = seenLease{version: l.ResourceVersion, observedAt: now}
		}
		seen[l.Name] = s
		if l.Name == m.name || l.Spec.HolderIdentity == nil || l.Spec.LeaseDurationSeconds == nil || l.Spec.RenewTime == nil {
			continue
		}
		d := time.Duration(*l.Spec.LeaseDurationSeconds) * time.Second
		renewed := l.Spec.RenewTime.Time
		switch {
		case now.Before(s.observedAt.Add(d)) && now.Before(renewed.Add(d)):
			ids = append(ids, *l.Spec.HolderIdentity)
		case now.After(s.observedAt.Add(2*d)) && now.After(renewed.Add(2*d)):
			// Only this version: a renewal meanwhile keeps the Lease.
			err := leases.Delete(ctx, l.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{ResourceVersion: &l.ResourceVersion}})
			if err == nil || apierrors.IsNotFound(err) {
				delete(seen, l.Name)
			}
		}
	}
	m.seen = seen
	return ids, nil
}

// leave deletes this replica's member Lease, so that the others count it
// out at once rather than after its duration.
func (m *memberLeases) leave(ctx context.Context) error {
	err := m.kc.CoordinationV1().Leases(m.namespace).Delete(ctx, m.name, metav1.DeleteOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}
