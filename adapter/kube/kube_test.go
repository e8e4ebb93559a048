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

package kube

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
	authv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	ktesting "k8s.io/client-go/testing"
	"knative.dev/pkg/apis"
	duckv1 "knative.dev/pkg/apis/duck/v1"
	"knative.dev/pkg/ptr"

	"knative.dev/event-forwarding-proxy/adapter"
	"knative.dev/event-forwarding-proxy/config"
	"knative.dev/event-forwarding-proxy/internal/kubetest"
	"knative.dev/event-forwarding-proxy/test/testproc"
)

// recorder is a ForwardingSetter that keeps every configuration it gets.
type recorder struct {
	mu  sync.Mutex
	got []string
}

func (r *recorder) SetForwarding(f config.Forwarding) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.got = append(r.got, f.String())
}

func (r *recorder) all() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.got...)
}

func cm(data map[string]string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: config.ForwardingConfigName, Namespace: "knative-eventing"}, Data: data}
}

// TestWatchForwarding walks the ConfigMap through its lives: absent, set,
// changed, broken (kept), fixed, deleted.
func TestWatchForwarding(t *testing.T) {
	kc := fake.NewClientset()
	watching := kubetest.WatchStarted(kc, "configmaps")
	core, logs := observer.New(zap.InfoLevel)
	rec := &recorder{}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := WatchForwarding(ctx, kc, "knative-eventing", rec, zap.New(core).Sugar()); err != nil {
		t.Fatal(err)
	}
	watching(t)
	cms := kc.CoreV1().ConfigMaps("knative-eventing")
	steps := []struct {
		name    string
		do      func() error
		want    string // the last configuration applied
		applied int    // how many applied so far
		errLog  string // a part of the error logged, if any
	}{
		{name: "absent: off", do: func() error { return nil }, want: "off", applied: 1},
		{name: "created", do: func() error {
			_, err := cms.Create(ctx, cm(map[string]string{"event-forwarding-proxy": "http://p.knative-eventing.svc"}), metav1.CreateOptions{})
			return err
		}, want: "proxy http://p.knative-eventing.svc above 500 direct sources or 500 direct sends in flight (held 5m0s)", applied: 2},
		{name: "threshold changed", do: func() error {
			_, err := cms.Update(ctx, cm(map[string]string{"event-forwarding-proxy": "http://p.knative-eventing.svc", "event-forwarding-threshold": "0"}), metav1.UpdateOptions{})
			return err
		}, want: "proxy http://p.knative-eventing.svc above 0 direct sources or 500 direct sends in flight (held 5m0s)", applied: 3},
		{name: "bad threshold: kept, logged with its key", do: func() error {
			_, err := cms.Update(ctx, cm(map[string]string{"event-forwarding-proxy": "http://p.knative-eventing.svc", "event-forwarding-threshold": "many"}), metav1.UpdateOptions{})
			return err
		}, want: "proxy http://p.knative-eventing.svc above 0 direct sources or 500 direct sends in flight (held 5m0s)", applied: 3, errLog: `event-forwarding-threshold="many"`},
		{name: "fixed", do: func() error {
			_, err := cms.Update(ctx, cm(map[string]string{"event-forwarding-proxy": "http://p.knative-eventing.svc", "event-forwarding-threshold": "10"}), metav1.UpdateOptions{})
			return err
		}, want: "proxy http://p.knative-eventing.svc above 10 direct sources or 500 direct sends in flight (held 5m0s)", applied: 4},
		{name: "deleted: off", do: func() error {
			return cms.Delete(ctx, config.ForwardingConfigName, metav1.DeleteOptions{})
		}, want: "off", applied: 5},
	}
	for _, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			if err := s.do(); err != nil {
				t.Fatal(err)
			}
			if s.errLog != "" {
				testproc.Eventually(t, 10*time.Second, "the error is logged", func() bool {
					for _, e := range logs.FilterLevelExact(zap.ErrorLevel).All() {
						if err, ok := e.ContextMap()["error"].(string); ok && strings.Contains(err, s.errLog) {
							return true
						}
					}
					return false
				})
			} else {
				testproc.Eventually(t, 10*time.Second, "the configuration is applied", func() bool { return len(rec.all()) == s.applied })
			}
			got := rec.all()
			if len(got) != s.applied || got[len(got)-1] != s.want {
				t.Fatalf("applied %q, want %d ending with %q", got, s.applied, s.want)
			}
		})
	}
}

func TestTokenRequester(t *testing.T) {
	kc := fake.NewClientset()
	expires := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	var got *authv1.TokenRequest
	kc.PrependReactor("create", "serviceaccounts", func(a ktesting.Action) (bool, runtime.Object, error) {
		ca, ok := a.(ktesting.CreateActionImpl)
		if !ok || a.GetSubresource() != "token" {
			return false, nil, nil
		}
		got = ca.GetObject().(*authv1.TokenRequest).DeepCopy()
		out := got.DeepCopy()
		out.Status = authv1.TokenRequestStatus{Token: "tok-" + ca.Name, ExpirationTimestamp: metav1.NewTime(expires)}
		return true, out, nil
	})
	tests := []struct {
		name    string
		exp     time.Duration
		wantExp int64
	}{
		{name: "default lifetime: an hour", wantExp: 3600},
		{name: "set lifetime", exp: 20 * time.Minute, wantExp: 1200},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := &TokenRequester{Client: kc, Expiration: tc.exp}
			tok, err := r.Token(context.Background(), adapter.ServiceAccount{Namespace: "ns", Name: "sa"}, "aud")
			if err != nil {
				t.Fatal(err)
			}
			if tok.Value != "tok-sa" || !tok.Expires.Equal(expires) {
				t.Errorf("token %+v", tok)
			}
			if got == nil || len(got.Spec.Audiences) != 1 || got.Spec.Audiences[0] != "aud" || *got.Spec.ExpirationSeconds != tc.wantExp {
				t.Errorf("request %+v", got)
			}
		})
	}
}

func TestTargetFor(t *testing.T) {
	sink, _ := apis.ParseURL("http://sink.tenant.svc.cluster.local/path")
	tests := []struct {
		name string
		st   duckv1.SourceStatus
		want adapter.Target
	}{
		{name: "not resolved yet", want: adapter.Target{Namespace: "tenant"}},
		{name: "plain sink", st: duckv1.SourceStatus{SinkURI: sink},
			want: adapter.Target{Namespace: "tenant", URL: sink.URL()}},
		{name: "TLS and OIDC", st: duckv1.SourceStatus{SinkURI: sink, SinkCACerts: ptr.String("PEM"), SinkAudience: ptr.String("aud"),
			Auth: &duckv1.AuthStatus{ServiceAccountName: ptr.String("oidc-sa")}},
			want: adapter.Target{Namespace: "tenant", URL: sink.URL(), CACerts: "PEM", Audience: "aud", ServiceAccount: "oidc-sa"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if d := cmp.Diff(tc.want, TargetFor("tenant", &tc.st)); d != "" {
				t.Errorf("TargetFor (-want +got):\n%s", d)
			}
		})
	}
}

// TestWatchForwardingWithoutAccess: without RBAC on configmaps the watch
// never syncs; the caller gets an error naming what is missing instead of
// hanging.
func TestWatchForwardingWithoutAccess(t *testing.T) {
	kc := fake.NewClientset()
	kc.PrependReactor("list", "configmaps", func(ktesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(corev1.Resource("configmaps"), "", errors.New("RBAC"))
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	err := watchForwarding(ctx, kc, "knative-eventing", &recorder{}, nil, 200*time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), "list and watch configmaps in knative-eventing") {
		t.Errorf("error %v, want one naming the missing access", err)
	}
}
