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

package monitoring

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"knative.dev/pkg/apis"
	kle "knative.dev/pkg/leaderelection"
	"knative.dev/pkg/ptr"

	sourcesv1 "knative.dev/eventing/pkg/apis/sources/v1"
	"knative.dev/eventing/pkg/client/clientset/versioned"

	"knative.dev/event-forwarding-proxy/adapter/mtping"
	"knative.dev/event-forwarding-proxy/config"
	"knative.dev/event-forwarding-proxy/test/apiserver"
	"knative.dev/event-forwarding-proxy/test/testproc"
)

// pingTenant is the namespace of the tests' PingSources.
const pingTenant = "tenant-a"

// kube is a real API server (test/apiserver) with what the adapter reads:
// its namespace, its own ConfigMap, config-event-forwarding, and
// PingSources made Ready as upstream's controller would.
type kube struct {
	*apiserver.Server
	ctx  context.Context
	core kubernetes.Interface
	ping versioned.Interface
}

// startKube starts the API server with the adapter's namespace and the
// tenant's, and one bucket whose Lease moves within a second.
func startKube(t *testing.T) *kube {
	t.Helper()
	s := apiserver.Start(t)
	k := &kube{Server: s, ctx: t.Context(), core: kubernetes.NewForConfigOrDie(s.Config), ping: versioned.NewForConfigOrDie(s.Config)}
	for _, ns := range []string{mtpingNamespace, pingTenant} {
		_, err := k.core.CoreV1().Namespaces().Create(k.ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
	}
	k.setConfigMap(t, mtping.SettingsConfigMap, map[string]string{
		"buckets": "1", "lease-duration": "3s", "renew-deadline": "2s", "retry-period": "500ms"})
	return k
}

// setConfigMap creates or replaces a ConfigMap of the adapter's namespace.
func (k *kube) setConfigMap(t *testing.T, name string, data map[string]string) {
	t.Helper()
	cms := k.core.CoreV1().ConfigMaps(mtpingNamespace)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}, Data: data}
	_, err := cms.Update(k.ctx, cm, metav1.UpdateOptions{})
	if apierrors.IsNotFound(err) {
		_, err = cms.Create(k.ctx, cm, metav1.CreateOptions{})
	}
	if err != nil {
		t.Fatal(err)
	}
}

// forwardTo makes the adapter send every event through the proxy at url
// (threshold 0).
func (k *kube) forwardTo(t *testing.T, url string) {
	t.Helper()
	k.setConfigMap(t, config.ForwardingConfigName, map[string]string{
		config.ForwardingProxyKey: url, config.ForwardingThresholdKey: "0"})
}

// createPingSource creates a PingSource firing every second, then makes
// it Ready with sink as its sink URI through the status subresource.
func (k *kube) createPingSource(t *testing.T, sink string) {
	t.Helper()
	const name = "every-second"
	spec := sourcesv1.PingSourceSpec{Schedule: "* * * * * *", ContentType: "application/json", Data: `{"monitoring":true}`}
	src, err := k.ping.SourcesV1().PingSources(pingTenant).Create(k.ctx,
		&sourcesv1.PingSource{ObjectMeta: metav1.ObjectMeta{Namespace: pingTenant, Name: name}, Spec: spec}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if src.Status.SinkURI, err = apis.ParseURL(sink); err != nil {
		t.Fatal(err)
	}
	src.Status.SetConditions(apis.Conditions{{Type: apis.ConditionReady, Status: corev1.ConditionTrue}})
	if _, err := k.ping.SourcesV1().PingSources(pingTenant).UpdateStatus(k.ctx, src, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// bucketLease is the name of the Lease of the only bucket.
func bucketLease() string {
	return mtping.LeaseName(kle.ComponentConfig{Component: mtping.Component, Buckets: 1}, 0)
}

// holdLease makes another process (upstream's adapter, say) hold the
// bucket's Lease for an hour, so that the adapter leads nothing.
func (k *kube) holdLease(t *testing.T) {
	t.Helper()
	now := metav1.NewMicroTime(time.Now())
	_, err := k.core.CoordinationV1().Leases(mtpingNamespace).Create(k.ctx, &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: bucketLease()},
		Spec: coordinationv1.LeaseSpec{
			HolderIdentity: ptr.String("upstream-adapter"), LeaseDurationSeconds: ptr.Int32(3600),
			AcquireTime: &now, RenewTime: &now,
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
}

// freeLease deletes the bucket's Lease, as its holder gone for good.
func (k *kube) freeLease(t *testing.T) {
	t.Helper()
	if err := k.core.CoordinationV1().Leases(mtpingNamespace).Delete(k.ctx, bucketLease(), metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
}

// mtpingProc is a running PingSource adapter binary.
type mtpingProc struct {
	*testproc.Proc
	MetricsAddr string // host:port of /metrics
}

// startMtping runs the adapter against k's API server as replica
// mtpingPod, without OIDC tokens, and waits until it is ready (its
// PingSources listed).
func startMtping(t *testing.T, k *kube) *mtpingProc {
	t.Helper()
	probes, metrics := freePort(t), freePort(t)
	cmd := exec.Command(mtpingBinary(t))
	cmd.Env = append(os.Environ(),
		"KUBECONFIG="+k.Kubeconfig, "SYSTEM_NAMESPACE="+mtpingNamespace, "POD_NAME="+mtpingPod,
		"PROBES_PORT="+strconv.Itoa(probes), "METRICS_PORT="+strconv.Itoa(metrics),
		"GORACE=halt_on_error=1",
	)
	p := &mtpingProc{Proc: testproc.Start(t, "mtping", cmd), MetricsAddr: "127.0.0.1:" + strconv.Itoa(metrics)}
	p.AwaitReady("http://127.0.0.1:" + strconv.Itoa(probes) + "/readiness")
	return p
}

// scrape reads the adapter's /metrics.
func (p *mtpingProc) scrape(t *testing.T) map[string]*dto.MetricFamily {
	t.Helper()
	return scrapeMetrics(t, p.MetricsAddr)
}

// sends is the number of events the adapter sent and saw delivered on
// route.
func sends(fams map[string]*dto.MetricFamily, route string) float64 {
	return testproc.Value(fams, "kn_forward_sender_sends_total", map[string]string{"route": route, "outcome": "delivered"})
}

// exerciseMtping runs the adapter with a PingSource firing every second
// until every metric family the kit reads has a series (the sender's
// counters and histogram appear at the first send): sends through the
// proxy p, then, with the proxy's address changed to one where nothing
// listens, fallbacks and direct sends.
func exerciseMtping(t *testing.T, p *proxyProc) map[string]*dto.MetricFamily {
	t.Helper()
	k := startKube(t)
	sink := newSink(t, false, 0)
	k.forwardTo(t, p.URL)
	k.createPingSource(t, sink.URL)
	a := startMtping(t, k)
	var fams map[string]*dto.MetricFamily
	testproc.EventuallyState(t, 30*time.Second, "the adapter sends through the proxy", func() (bool, string) {
		fams = a.scrape(t)
		return sends(fams, "proxy") > 0, fmt.Sprintf("%v sends through the proxy, sink got %d calls", sends(fams, "proxy"), sink.Count())
	})
	k.forwardTo(t, "http://127.0.0.1:"+strconv.Itoa(freePort(t)))
	testproc.EventuallyState(t, 30*time.Second, "the adapter falls back to direct", func() (bool, string) {
		fams = a.scrape(t)
		fallbacks := testproc.Value(fams, "kn_forward_sender_fallbacks_total", nil)
		return fallbacks > 0 && sends(fams, "direct") > 0, fmt.Sprintf("%v fallbacks, %v direct sends", fallbacks, sends(fams, "direct"))
	})
	return fams
}
