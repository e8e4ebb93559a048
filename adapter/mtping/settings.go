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
	"fmt"
	"maps"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection"
	kle "knative.dev/pkg/leaderelection"
)

// SettingsConfigMap is the adapter's own ConfigMap in the system
// namespace. Eventing's config-leader-election is left as upstream ships
// it: every Eventing binary reads it, and upstream's controller hands it
// to upstream's adapter.
const SettingsConfigMap = "event-forwarding-pingsource-adapter"

// defaultLeaderElection is the adapter's buckets and lease timings when
// SettingsConfigMap sets none: ten buckets, so that up to ten replicas
// share the sources, and a dead replica's buckets move within about 20 s.
var defaultLeaderElection = map[string]string{
	"buckets":        "10",
	"lease-duration": "15s",
	"renew-deadline": "10s",
	"retry-period":   "2s",
}

// ReadSettings returns the data of SettingsConfigMap in namespace: the
// adapter's own settings, which upstream's controller never rewrites (it
// owns the container's env). An absent ConfigMap is no settings.
func ReadSettings(ctx context.Context, kc kubernetes.Interface, namespace string) (map[string]string, error) {
	cm, err := kc.CoreV1().ConfigMaps(namespace).Get(ctx, SettingsConfigMap, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return map[string]string{}, nil
	case err != nil:
		return nil, fmt.Errorf("reading ConfigMap %s/%s: %w", namespace, SettingsConfigMap, err)
	}
	return cm.Data, nil
}

// SettingsFirst looks a variable up in settings, then with lookup: the
// ConfigMap's value wins, and outside a pod the environment sets what
// it does not.
func SettingsFirst(settings map[string]string, lookup func(string) (string, bool)) func(string) (string, bool) {
	return func(k string) (string, bool) {
		if v, ok := settings[k]; ok {
			return v, true
		}
		return lookup(k)
	}
}

// LeaderElectionSettings reads the adapter's buckets and lease timings
// from SettingsConfigMap in namespace (LeaderElectionFromSettings).
func LeaderElectionSettings(ctx context.Context, kc kubernetes.Interface, namespace string) (*kle.Config, error) {
	settings, err := ReadSettings(ctx, kc, namespace)
	if err != nil {
		return nil, err
	}
	return LeaderElectionFromSettings(settings)
}

// LeaderElectionFromSettings parses the buckets and lease timings of the
// adapter's settings with knative.dev/pkg's parser: keys buckets (1 to
// 10), lease-duration, renew-deadline, retry-period and
// map-lease-prefix.*. A key absent means the default (10, 15s, 10s, 2s).
func LeaderElectionFromSettings(settings map[string]string) (*kle.Config, error) {
	data := maps.Clone(defaultLeaderElection)
	maps.Copy(data, settings)
	c, err := kle.NewConfigFromMap(data)
	if err != nil {
		return nil, fmt.Errorf("ConfigMap %s: %w", SettingsConfigMap, err)
	}
	if err := validTimings(c.LeaseDuration, c.RenewDeadline, c.RetryPeriod); err != nil {
		return nil, fmt.Errorf("ConfigMap %s: %w", SettingsConfigMap, err)
	}
	return c, nil
}

// validTimings is client-go's condition on an election's timings.
func validTimings(lease, renew, retry time.Duration) error {
	if renew >= lease || retry <= 0 || renew <= time.Duration(leaderelection.JitterFactor*float64(retry)) {
		return fmt.Errorf("want lease-duration > renew-deadline > 1.2 × retry-period > 0, have %s, %s, %s", lease, renew, retry)
	}
	return nil
}

// UpstreamLeaderElection is the election of upstream's adapter, from the
// K_LEADER_ELECTION_CONFIG that upstream's PingSource controller writes
// into the adapter Deployment from config-leader-election (a JSON
// knative.dev/pkg ComponentConfig). Empty means what upstream's adapter
// takes then: one bucket.
func UpstreamLeaderElection(v string) (kle.ComponentConfig, error) {
	cc := kle.ComponentConfig{Buckets: 1, LeaseDuration: 15 * time.Second, RenewDeadline: 10 * time.Second, RetryPeriod: 2 * time.Second}
	if v != "" {
		if err := json.Unmarshal([]byte(v), &cc); err != nil {
			return cc, fmt.Errorf("want the JSON object upstream's controller writes from config-leader-election: %w", err)
		}
	}
	cc.Component, cc.Identity = Component, ""
	if cc.Buckets < 1 || cc.Buckets > kle.MaxBuckets {
		return cc, fmt.Errorf("buckets %d: want 1 to %d", cc.Buckets, kle.MaxBuckets)
	}
	return cc, nil
}
