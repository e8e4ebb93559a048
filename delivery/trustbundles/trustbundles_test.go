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

package trustbundles_test

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"knative.dev/event-forwarding-proxy/delivery"
	"knative.dev/event-forwarding-proxy/delivery/trustbundles"
	"knative.dev/event-forwarding-proxy/internal/certtest"
	"knative.dev/event-forwarding-proxy/internal/kubetest"
	"knative.dev/event-forwarding-proxy/test/testproc"
)

func TestWatchTrustBundles(t *testing.T) {
	ca := certtest.NewCA(t, "bundle-ca")
	labelled := func(name string, data map[string]string, binary map[string][]byte) *corev1.ConfigMap {
		return &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "knative-eventing", Labels: map[string]string{trustbundles.Label: "true"}},
			Data:       data, BinaryData: binary,
		}
	}
	unlabelled := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "plain", Namespace: "knative-eventing"}, Data: map[string]string{"ca.crt": ca.PEM}}
	otherNamespace := labelled("elsewhere", map[string]string{"ca.crt": ca.PEM}, nil)
	otherNamespace.Namespace = "default"
	kc := fake.NewClientset(unlabelled, otherNamespace)
	watching := kubetest.WatchStarted(kc, "configmaps")
	roots := delivery.NewTrustRoots()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := trustbundles.Watch(ctx, kc, "knative-eventing", roots, nil); err != nil {
		t.Fatal(err)
	}
	watching(t)
	if roots.Covers(ca.PEM) {
		t.Fatal("loaded a ConfigMap without the label, or from another namespace")
	}
	cms := kc.CoreV1().ConfigMaps("knative-eventing")
	if _, err := cms.Create(ctx, labelled("knative-eventing-bundle", nil, map[string][]byte{"ca.pem": []byte(ca.PEM)}), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	testproc.Eventually(t, 30*time.Second, "the bundle to load", func() bool { return roots.Covers(ca.PEM) })
	if err := cms.Delete(ctx, "knative-eventing-bundle", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testproc.Eventually(t, 30*time.Second, "the bundle to go", func() bool { return !roots.Covers(ca.PEM) })
}

func TestWatchTrustBundlesNeedsItsRights(t *testing.T) {
	kc := fake.NewClientset()
	kc.PrependReactor("list", "configmaps", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(corev1.Resource("configmaps"), "", nil)
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	err := trustbundles.WatchWithin(ctx, kc, "knative-eventing", delivery.NewTrustRoots(), nil, 200*time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), "get, list and watch configmaps") {
		t.Fatalf("got %v, want an error naming the rights", err)
	}
}
