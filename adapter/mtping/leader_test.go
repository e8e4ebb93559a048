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
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	kubefake "k8s.io/client-go/kubernetes/fake"
	kle "knative.dev/pkg/leaderelection"
)

func TestLeaseName(t *testing.T) {
	tests := []struct {
		name string
		cc   kle.ComponentConfig
		i    uint32
		want string
	}{
		{name: "upstream's single lease", cc: kle.ComponentConfig{Component: Component, Buckets: 1},
			want: "pingsource-mt-adapter.knative.dev.eventing.pkg.adapter.mtping.reconciler.00-of-01"},
		{name: "third of ten", cc: kle.ComponentConfig{Component: Component, Buckets: 10}, i: 2,
			want: "pingsource-mt-adapter.knative.dev.eventing.pkg.adapter.mtping.reconciler.02-of-10"},
		{name: "prefix mapped", i: 1, cc: kle.ComponentConfig{Component: Component, Buckets: 2,
			LeaseNamesPrefixMapping: map[string]string{Component + "." + QueueName: "ping"}},
			want: "ping.01-of-02"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := LeaseName(tc.cc, tc.i); got != tc.want {
				t.Errorf("LeaseName = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestBucketsPartitionSources(t *testing.T) {
	for _, n := range []uint32{1, 2, 5, 10} {
		t.Run(fmt.Sprintf("%d buckets", n), func(t *testing.T) {
			bs := Buckets(kle.ComponentConfig{Component: Component, Buckets: n})
			if len(bs) != int(n) {
				t.Fatalf("%d buckets, want %d", len(bs), n)
			}
			used := map[string]int{}
			for i := range 500 {
				key := types.NamespacedName{Namespace: fmt.Sprintf("ns%d", i%7), Name: fmt.Sprintf("ping-%d", i)}
				owners := 0
				for _, b := range bs {
					if b.Has(key) {
						owners++
						used[b.Name()]++
					}
				}
				if owners != 1 {
					t.Fatalf("%s is in %d buckets", key, owners)
				}
			}
			if len(used) != int(n) {
				t.Errorf("500 sources fill %d of %d buckets", len(used), n)
			}
		})
	}
}

func TestLeaderElectionSettings(t *testing.T) {
	tests := []struct {
		name    string
		data    map[string]string // nil: no ConfigMap
		want    kle.Config
		wantErr bool
	}{
		{name: "absent: the adapter's defaults", want: kle.Config{Buckets: 10, LeaseDuration: 15 * time.Second, RenewDeadline: 10 * time.Second, RetryPeriod: 2 * time.Second}},
		{name: "other settings only", data: map[string]string{"DRAIN_TIMEOUT": "20s"},
			want: kle.Config{Buckets: 10, LeaseDuration: 15 * time.Second, RenewDeadline: 10 * time.Second, RetryPeriod: 2 * time.Second}},
		{name: "buckets only", data: map[string]string{"buckets": "4"},
			want: kle.Config{Buckets: 4, LeaseDuration: 15 * time.Second, RenewDeadline: 10 * time.Second, RetryPeriod: 2 * time.Second}},
		{name: "set", data: map[string]string{"buckets": "3", "lease-duration": "3s", "renew-deadline": "2s", "retry-period": "500ms"},
			want: kle.Config{Buckets: 3, LeaseDuration: 3 * time.Second, RenewDeadline: 2 * time.Second, RetryPeriod: 500 * time.Millisecond}},
		{name: "no buckets", data: map[string]string{"buckets": "0"}, wantErr: true},
		{name: "too many buckets", data: map[string]string{"buckets": "11"}, wantErr: true},
		{name: "not a duration", data: map[string]string{"lease-duration": "soon"}, wantErr: true},
		{name: "renew deadline past the lease", data: map[string]string{"lease-duration": "10s", "renew-deadline": "10s"}, wantErr: true},
		{name: "retry period too long to renew", data: map[string]string{"renew-deadline": "2s", "retry-period": "2s"}, wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			kc := kubefake.NewClientset()
			if tc.data != nil {
				kc = kubefake.NewClientset(&corev1.ConfigMap{
					ObjectMeta: metav1.ObjectMeta{Namespace: "system", Name: SettingsConfigMap}, Data: tc.data})
			}
			got, err := LeaderElectionSettings(t.Context(), kc, "system")
			if tc.wantErr {
				if err == nil {
					t.Fatalf("config %+v, want an error", got)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.Buckets != tc.want.Buckets || got.LeaseDuration != tc.want.LeaseDuration ||
				got.RenewDeadline != tc.want.RenewDeadline || got.RetryPeriod != tc.want.RetryPeriod {
				t.Errorf("config = %+v, want %+v", *got, tc.want)
			}
		})
	}
}
