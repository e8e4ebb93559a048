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
	"encoding/json"
	"fmt"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
)

// oidcSinkAudience is the sink's OIDC audience. A Knative Service
// publishes none in its address, so the source names it (spec.sink.audience),
// and Eventing's controller copies it into the PingSource's
// status.sinkAudience, where the adapter reads it.
const oidcSinkAudience = "e2esink"

const oidcSourceManifest = `
apiVersion: sources.knative.dev/v1
kind: PingSource
metadata: {name: oidc, namespace: "{{NAMESPACE}}"}
spec:
  schedule: "*/5 * * * * *"
  data: '{"oidc":true}'
  sink:
    ref: {apiVersion: serving.knative.dev/v1, kind: Service, name: e2esink}
    uri: /oidc
    audience: ` + oidcSinkAudience + `
`

// TestOIDC turns Eventing's OIDC feature on: the adapter's events reach the
// sink through the proxy, which verifies the adapter's own token, with the
// sink's token (audience from the PingSource's status) passed through; a
// caller without a token for the proxy, or with one for another audience,
// is refused.
func TestOIDC(t *testing.T) {
	oidcStage.begin(t) // before t.Parallel: see stages_test.go
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	ns := newNamespace(ctx, t, "oidc")
	s := newSink(ctx, t, ns)
	after(t, upgradeStage)
	setFeature(ctx, t, "authentication-oidc", "enabled")
	setThreshold(ctx, t, "0")
	apply(ctx, t, ns, oidcSourceManifest)
	waitReady(ctx, t, pingSourceGVR, ns, "oidc", 2*time.Minute)
	// The adapter asks for the sink's token with the status' audience, as
	// the source's OIDC service account: both must be there, or no event
	// carries a token to check.
	var audience, account string
	eventually(t, time.Minute, time.Second, func() string {
		return fmt.Sprintf("the PingSource's sink audience %q (want %q), its OIDC service account %q", audience, oidcSinkAudience, account)
	}, func() bool {
		src, err := cluster.dynamic.Resource(pingSourceGVR).Namespace(ns).Get(ctx, "oidc", metav1.GetOptions{})
		if err != nil {
			return false
		}
		audience, _, _ = unstructured.NestedString(src.Object, "status", "sinkAudience")
		account, _, _ = unstructured.NestedString(src.Object, "status", "auth", "serviceAccountName")
		return audience == oidcSinkAudience && account != ""
	})
	t.Logf("the PingSource's sink audience %q, its OIDC service account %q", audience, account)

	t.Run("the adapter's events, through the proxy", func(t *testing.T) {
		adapters := adapterPods(ctx, t)
		before := senderCounts(ctx, t, adapters)
		var rs []record
		eventually(t, 2*time.Minute, time.Second, func() string { return fmt.Sprintf("%d events at the sink", len(rs)) }, func() bool {
			rs = nil
			for _, r := range s.records(ctx, t) {
				if r.Path == "/oidc" {
					rs = append(rs, r)
				}
			}
			return len(rs) >= 3
		})
		after := senderCounts(ctx, t, adapterPods(ctx, t))
		var viaProxy, fallbacks float64
		for pod, c := range after {
			viaProxy += c["proxy/delivered"] - before[pod]["proxy/delivered"]
			fallbacks += c["fallbacks"] - before[pod]["fallbacks"]
		}
		if viaProxy == 0 || fallbacks > 0 {
			t.Errorf("through the proxy %v, fallbacks %v: the proxy did not take the adapter's token", viaProxy, fallbacks)
		}
		for _, r := range rs {
			if r.TokenAudience != audience {
				t.Errorf("event %s: the sink got a token for %q, want %q", r.ID, r.TokenAudience, audience)
			}
			if len(r.ForwardHeaders) > 0 {
				t.Errorf("event %s: the proxy's token reached the sink (%v)", r.ID, r.ForwardHeaders)
			}
		}
	})

	t.Run("callers without a token for the proxy are refused", func(t *testing.T) {
		ttl := int64(600)
		tr, err := cluster.kube.CoreV1().ServiceAccounts(ns).CreateToken(ctx, "default", &authenticationv1.TokenRequest{
			Spec: authenticationv1.TokenRequestSpec{Audiences: []string{"another-audience"}, ExpirationSeconds: &ttl},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for name, auth := range map[string]string{"none": "", "another audience": "Bearer " + tr.Status.Token} {
			t.Run(name, func(t *testing.T) {
				h := map[string]string{"Kn-Forward-Authorization": auth, "Ce-Specversion": "1.0", "Ce-Id": "oidc-" + name,
					"Ce-Source": "/e2e/oidc", "Ce-Type": "e2e.oidc", "Content-Type": "application/json"}
				checkRefusal(t, forward(ctx, t, s.URL+"/refused", h, []byte(`{}`)), 401, "unauthenticated")
			})
		}
		for _, r := range s.records(ctx, t) {
			if r.Path == "/refused" {
				t.Errorf("a refused call reached the sink: %+v", r)
			}
		}
	})
}

// setFeature sets a flag of Eventing's config-features for the test,
// restoring its value afterwards.
func setFeature(ctx context.Context, t testing.TB, flag, value string) {
	t.Helper()
	cm, err := cluster.kube.CoreV1().ConfigMaps(systemNamespace).Get(ctx, "config-features", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	old, had := cm.Data[flag]
	patch := func(v any) {
		b, _ := json.Marshal(map[string]any{"data": map[string]any{flag: v}})
		if _, err := cluster.kube.CoreV1().ConfigMaps(systemNamespace).Patch(context.Background(), "config-features", types.MergePatchType, b, metav1.PatchOptions{}); err != nil {
			t.Errorf("config-features: %v", err)
		}
	}
	patch(value)
	t.Cleanup(func() {
		if had {
			patch(old)
		} else {
			patch(nil)
		}
	})
}
