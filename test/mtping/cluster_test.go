//go:build integration

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
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"knative.dev/pkg/apis"
	duckv1 "knative.dev/pkg/apis/duck/v1"

	sourcesv1 "knative.dev/eventing/pkg/apis/sources/v1"
	"knative.dev/eventing/pkg/client/clientset/versioned"

	adapter "knative.dev/event-forwarding-proxy/adapter/mtping"
	"knative.dev/event-forwarding-proxy/config"
	"knative.dev/event-forwarding-proxy/test/apiserver"
)

const (
	systemNamespace = "knative-eventing"
	adapterAccount  = "pingsource-mt-adapter"
)

// cluster is a real API server with the namespaces, accounts and
// ConfigMaps an adapter expects.
type cluster struct {
	*apiserver.Server
	ctx  context.Context
	kube kubernetes.Interface
	ping versioned.Interface
	// bucketLeases ends the name of each of the adapter's bucket Leases
	// ("-of-NN"); upstream's Lease beside them is no bucket.
	bucketLeases string
}

// newCluster starts an API server with knative-eventing, the adapter's
// service account, its ConfigMap set to le (buckets and lease timings),
// and the tenant namespaces.
func newCluster(t testing.TB, le map[string]string, tenants ...string) *cluster {
	t.Helper()
	s := apiserver.Start(t)
	c := &cluster{Server: s, ctx: t.Context(), kube: kubernetes.NewForConfigOrDie(s.Config), ping: versioned.NewForConfigOrDie(s.Config)}
	for _, ns := range append([]string{systemNamespace}, tenants...) {
		_, err := c.kube.CoreV1().Namespaces().Create(c.ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
		created(t, err)
	}
	c.serviceAccount(t, systemNamespace, adapterAccount)
	c.setConfigMap(t, adapter.SettingsConfigMap, le)
	buckets, err := strconv.Atoi(le["buckets"])
	if err != nil {
		t.Fatalf("buckets %q: %v", le["buckets"], err)
	}
	c.bucketLeases = fmt.Sprintf("-of-%02d", buckets)
	return c
}

// created fails the test on an error other than AlreadyExists.
func created(t testing.TB, err error) {
	t.Helper()
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}

func (c *cluster) serviceAccount(t testing.TB, ns, name string) {
	t.Helper()
	_, err := c.kube.CoreV1().ServiceAccounts(ns).Create(c.ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	created(t, err)
}

// setConfigMap creates or replaces a ConfigMap of the system namespace.
func (c *cluster) setConfigMap(t testing.TB, name string, data map[string]string) {
	t.Helper()
	cms := c.kube.CoreV1().ConfigMaps(systemNamespace)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}, Data: data}
	if _, err := cms.Update(c.ctx, cm, metav1.UpdateOptions{}); apierrors.IsNotFound(err) {
		_, err = cms.Create(c.ctx, cm, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
	} else if err != nil {
		t.Fatal(err)
	}
}

// setForwarding writes config-event-forwarding.
func (c *cluster) setForwarding(t testing.TB, proxyURL, threshold string) {
	t.Helper()
	c.setConfigMap(t, config.ForwardingConfigName, map[string]string{
		config.ForwardingProxyKey: proxyURL, config.ForwardingThresholdKey: threshold})
}

// sourceStatus is what upstream's controller writes into a PingSource's
// status; the zero value is Ready without OIDC.
type sourceStatus struct {
	audience, account string
	caCerts           string // status.sinkCACerts, PEM
	notReady          bool
}

// createSource creates a PingSource, then writes its status (Ready, sink)
// through the status subresource.
func (c *cluster) createSource(t *testing.T, ns, name string, spec sourcesv1.PingSourceSpec, sink string, st sourceStatus) {
	t.Helper()
	src, err := c.ping.SourcesV1().PingSources(ns).Create(c.ctx,
		&sourcesv1.PingSource{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: spec}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	u, err := apis.ParseURL(sink)
	if err != nil {
		t.Fatal(err)
	}
	src.Status.SinkURI = u
	ready := corev1.ConditionTrue
	if st.notReady {
		ready = corev1.ConditionFalse
	}
	src.Status.SetConditions(apis.Conditions{{Type: apis.ConditionReady, Status: ready}})
	if st.audience != "" {
		src.Status.SinkAudience = &st.audience
	}
	if st.account != "" {
		src.Status.Auth = &duckv1.AuthStatus{ServiceAccountName: &st.account}
	}
	if st.caCerts != "" {
		src.Status.SinkCACerts = &st.caCerts
	}
	if _, err := c.ping.SourcesV1().PingSources(ns).UpdateStatus(c.ctx, src, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// updateSpec changes a PingSource's spec.
func (c *cluster) updateSpec(t *testing.T, ns, name string, change func(*sourcesv1.PingSourceSpec)) {
	t.Helper()
	src, err := c.ping.SourcesV1().PingSources(ns).Get(c.ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	change(&src.Spec)
	if _, err := c.ping.SourcesV1().PingSources(ns).Update(c.ctx, src, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func (c *cluster) deleteSource(t *testing.T, ns, name string) {
	t.Helper()
	if err := c.ping.SourcesV1().PingSources(ns).Delete(c.ctx, name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
}

// leaseHolders maps the adapter's bucket Leases to their holders ("" when
// free), each named as the test named its process (replicaOf); member
// Leases and upstream's are not buckets.
func (c *cluster) leaseHolders(t *testing.T) map[string]string {
	t.Helper()
	leases, err := c.kube.CoordinationV1().Leases(systemNamespace).List(c.ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	holders := map[string]string{}
	for _, l := range leases.Items {
		if _, member := l.Labels[adapter.MemberLabel]; member || !strings.HasPrefix(l.Name, adapter.Component+".") ||
			!strings.HasSuffix(l.Name, c.bucketLeases) {
			continue
		}
		holders[l.Name] = replicaOf(l.Spec.HolderIdentity)
	}
	return holders
}

// firedThrough returns the mark of the one bucket Lease, which must be
// free: through when its last holder fired it.
func (c *cluster) firedThrough(t *testing.T) time.Time {
	t.Helper()
	holders := c.leaseHolders(t)
	if len(holders) != 1 {
		t.Fatalf("bucket Leases: %v, want one", holders)
	}
	for name, holder := range holders {
		if holder != "" {
			t.Fatalf("%s is held by %s, want it released", name, holder)
		}
		l, err := c.kube.CoordinationV1().Leases(systemNamespace).Get(c.ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		mark, ok := adapter.FiredThrough(l)
		if !ok {
			t.Fatalf("%s released without a hand-over mark: %v", name, l.Annotations)
		}
		return mark
	}
	return time.Time{}
}

// replicaOf is the replica a Lease's holder identity names: its POD_NAME,
// which the test gives, without the adapter's suffix; "" when free.
func replicaOf(holder *string) string {
	if holder == nil {
		return ""
	}
	return strings.TrimSuffix(*holder, adapter.IdentitySuffix)
}
