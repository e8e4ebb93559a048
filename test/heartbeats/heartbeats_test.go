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

package heartbeats

import (
	"context"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"knative.dev/event-forwarding-proxy/test/apiserver"
	"knative.dev/event-forwarding-proxy/test/testproc"
)

// TestForwardsWithOneOption: a source on adapter/v2, whose only change is
// forwarding.Option on its client, sends directly while
// config-event-forwarding is absent, through the real proxy once the
// ConfigMap names it and the sources pass the threshold, directly again
// when the threshold rises, and directly when the proxy shuts down; every
// heartbeat sent arrives, and the Sender's metrics come out of the
// exporter upstream's K_OBSERVABILITY_CONFIG chose.
func TestForwardsWithOneOption(t *testing.T) {
	srv := apiserver.Start(t)
	kc := kubernetes.NewForConfigOrDie(srv.Config)
	ctx := context.Background()
	if _, err := kc.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: systemNamespace}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	proxy := testproc.StartProxy(t, bins.proxy, testproc.FreePort(t), testproc.FreePort(t))
	sink := newSink(t)
	for _, ns := range []string{"tenant-a", "tenant-b"} {
		createSource(t, kc, ns, "heartbeat", map[string]string{"sink": sink.URL + "/" + ns, "period": "1s"})
	}
	createSource(t, kc, "tenant-c", "broken", map[string]string{"sink": "not a URL", "period": "1s"})
	a := startAdapter(t, srv.Kubeconfig)
	proxyCalls := func() float64 {
		fams, err := testproc.Scrape(proxy.MetricsURL)
		if err != nil {
			t.Fatalf("scraping the proxy: %v", err)
		}
		return testproc.Value(fams, "kn_forward_requests_total", nil)
	}
	sends := func(route string) float64 {
		return a.metric("kn_forward_sender_sends_total", map[string]string{"route": route, "outcome": "delivered"})
	}
	moreArrive := func(n int, what string) {
		t.Helper()
		from := sink.total()
		testproc.Eventually(t, 30*time.Second, what, func() bool { return sink.total() >= from+n })
	}

	moreArrive(4, "heartbeats arrive directly")
	if n := proxyCalls(); n != 0 {
		t.Fatalf("the proxy got %v calls with forwarding off", n)
	}
	testproc.Eventually(t, 30*time.Second, "direct sends are counted", func() bool { return sends("direct") >= 2 })
	if !strings.Contains(a.Logs.String(), "Invalid heartbeat source") {
		t.Error("the broken source was not reported")
	}

	putForwarding(t, kc, map[string]string{"event-forwarding-proxy": proxy.URL, "event-forwarding-threshold": "1"})
	testproc.Eventually(t, 30*time.Second, "two sources over a threshold of 1 go through the proxy", func() bool {
		return proxyCalls() >= 4 && sends("proxy") >= 4
	})
	moreArrive(4, "heartbeats arrive through the proxy")

	putForwarding(t, kc, map[string]string{"event-forwarding-proxy": proxy.URL, "event-forwarding-threshold": "5"})
	testproc.Eventually(t, 30*time.Second, "the route is direct again", func() bool {
		return a.metric("kn_forward_sender_forwarding", nil) == 0
	})
	moreArrive(2, "heartbeats arrive after the switch")
	before := proxyCalls()
	moreArrive(4, "heartbeats arrive directly again")
	if after := proxyCalls(); after != before {
		t.Errorf("the proxy got %v calls after the threshold rose over the sources", after-before)
	}

	putForwarding(t, kc, map[string]string{"event-forwarding-proxy": proxy.URL, "event-forwarding-threshold": "0"})
	testproc.Eventually(t, 30*time.Second, "forwarding again", func() bool { return a.metric("kn_forward_sender_forwarding", nil) == 1 })
	moreArrive(2, "heartbeats arrive through the proxy again")
	proxy.Signal(syscall.SIGTERM)
	if err := proxy.Wait(60 * time.Second); err != nil {
		t.Fatalf("the proxy did not drain cleanly: %v", err)
	}
	moreArrive(4, "heartbeats arrive directly with the proxy gone")
	testproc.Eventually(t, 30*time.Second, "the fallbacks are counted", func() bool {
		return a.metric("kn_forward_sender_fallbacks_total", nil) >= 1
	})

	a.stop(t, 40*time.Second)
	if strings.Contains(a.Logs.String(), "Heartbeat not delivered") || strings.Contains(a.Logs.String(), "Heartbeat skipped") {
		t.Error("the adapter lost heartbeats")
	}
	bySource, bad := sink.heartbeats()
	if len(bad) > 0 {
		t.Errorf("the sink got malformed heartbeats: %q", bad)
	}
	if len(bySource) != 2 {
		t.Errorf("heartbeats from %d sources, want 2: %v", len(bySource), sink.received())
	}
	for src, seqs := range bySource {
		missing, dups := gaps(seqs)
		t.Logf("%s: %d heartbeats, %d twice", src, len(seqs), dups)
		if len(missing) > 0 {
			t.Errorf("%s: heartbeats %v never arrived", src, missing)
		}
	}
}

// TestForwardsToAProxyWithAuth: with the proxy verifying callers' OIDC
// tokens, as the shipped manifests run it, the adapter presents a token of
// its own service account (SERVICE_ACCOUNT_NAME, in its namespace), minted
// by the real TokenRequest API: its heartbeats go through the proxy, and
// none falls back.
func TestForwardsToAProxyWithAuth(t *testing.T) {
	srv := apiserver.Start(t)
	kc := kubernetes.NewForConfigOrDie(srv.Config)
	ctx := context.Background()
	if _, err := kc.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: systemNamespace}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := kc.CoreV1().ServiceAccounts(systemNamespace).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "heartbeats"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	proxy := testproc.StartProxy(t, bins.proxy, testproc.FreePort(t), testproc.FreePort(t),
		"FORWARD_AUTH=oidc", "FORWARD_OIDC_ISSUER="+srv.Issuer, "KUBECONFIG="+srv.Kubeconfig)
	sink := newSink(t)
	createSource(t, kc, "tenant-a", "heartbeat", map[string]string{"sink": sink.URL + "/tenant-a", "period": "1s"})
	putForwarding(t, kc, map[string]string{"event-forwarding-proxy": proxy.URL, "event-forwarding-threshold": "0"})
	a := startAdapter(t, srv.Kubeconfig, "SERVICE_ACCOUNT_NAME=heartbeats")
	testproc.Eventually(t, 30*time.Second, "heartbeats delivered through the proxy", func() bool {
		return a.metric("kn_forward_sender_sends_total", map[string]string{"route": "proxy", "outcome": "delivered"}) >= 3
	})
	if n := a.metric("kn_forward_sender_fallbacks_total", nil); n != 0 {
		t.Errorf("%v heartbeats fell back to direct: the proxy refused the adapter's token", n)
	}
	if !strings.Contains(a.Logs.String(), `"OIDC tokens on"`) {
		t.Error("the adapter did not say it sends OIDC tokens")
	}
}
