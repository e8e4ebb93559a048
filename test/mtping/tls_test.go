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
	"maps"
	"net/http"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	sourcesv1 "knative.dev/eventing/pkg/apis/sources/v1"

	"knative.dev/event-forwarding-proxy/delivery/trustbundles"
	"knative.dev/event-forwarding-proxy/internal/certtest"
)

// TestTLSSinks: sinks with transport encryption, signed by real CA
// certificates. A sink whose CA is in eventing's trust bundles goes
// through the proxy, which verifies it against the same bundles; one with
// a CA of its own goes direct; direct sends trust the bundles too. Bundles
// that come or go take effect in both processes without a restart.
func TestTLSSinks(t *testing.T) {
	t.Parallel()
	c := newCluster(t, maps.Clone(fastElection), "tenant-a")
	bundled, own := certtest.NewCA(t, "eventing-bundle"), certtest.NewCA(t, "sink-own")
	bundledSink, ownSink := newTLSSink(t, bundled.Server(t, "127.0.0.1")), newTLSSink(t, own.Server(t, "127.0.0.1"))
	p := startProxy(t, "KUBECONFIG="+c.Kubeconfig, "FORWARD_TRUST_BUNDLES_NAMESPACE="+systemNamespace)
	c.setForwarding(t, p.URL, "0")
	startAdapter(t, c, "adapter-tls")
	spec := sourcesv1.PingSourceSpec{Schedule: every2s, ContentType: "application/json", Data: `{"tls":true}`}
	c.createSource(t, "tenant-a", "bundled-ca", spec, bundledSink.url("bundled-ca"), sourceStatus{caCerts: bundled.PEM})
	c.createSource(t, "tenant-a", "own-ca", spec, ownSink.url("own-ca"), sourceStatus{caCerts: own.PEM})

	arrives := func(sk *sink, name string, since time.Time, proxied bool) {
		t.Helper()
		eventually(t, 30*time.Second, name+" arrives "+map[bool]string{true: "through the proxy", false: "direct"}[proxied], func() bool {
			for _, r := range sk.got(name, since) {
				if r.viaProxy() == proxied {
					return true
				}
			}
			return false
		})
	}
	onlyDirect := func(sk *sink, name string, since time.Time) {
		t.Helper()
		for _, r := range sk.got(name, since) {
			if r.viaProxy() {
				t.Errorf("%s: an event came through the proxy", name)
				return
			}
		}
	}

	t.Run("without bundles every CA sink goes direct", func(t *testing.T) {
		since := time.Now()
		arrives(bundledSink, "bundled-ca", since, false)
		arrives(ownSink, "own-ca", since, false)
		onlyDirect(bundledSink, "bundled-ca", since)
		if got := forwardThrough(t, p.URL, bundledSink.url("probe")); got != "unreachable" {
			t.Errorf("the proxy reached a sink whose CA it does not trust: %s", got)
		}
	})

	bundle := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "knative-eventing-bundle", Labels: map[string]string{trustbundles.Label: "true"}},
		Data:       map[string]string{"ca.crt": bundled.PEM},
	}
	if _, err := c.kube.CoreV1().ConfigMaps(systemNamespace).Create(c.ctx, bundle, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Run("a bundled CA goes through the proxy", func(t *testing.T) {
		since := time.Now()
		arrives(bundledSink, "bundled-ca", since, true)
		if got := forwardThrough(t, p.URL, bundledSink.url("probe")); got != "202" {
			t.Errorf("the proxy, to a sink signed by a bundled CA: %s, want the sink's 202", got)
		}
		if got := forwardThrough(t, p.URL, ownSink.url("probe")); got != "unreachable" {
			t.Errorf("the proxy reached a sink whose CA is in no bundle: %s", got)
		}
		since = time.Now()
		arrives(ownSink, "own-ca", since, false)
		onlyDirect(ownSink, "own-ca", since)
	})

	t.Run("direct sends trust the bundles", func(t *testing.T) {
		c.setForwarding(t, "", "0")
		c.createSource(t, "tenant-a", "bundle-only", spec, bundledSink.url("bundle-only"), sourceStatus{})
		arrives(bundledSink, "bundle-only", time.Now(), false)
	})

	t.Run("a removed bundle is no longer trusted", func(t *testing.T) {
		if err := c.kube.CoreV1().ConfigMaps(systemNamespace).Delete(c.ctx, bundle.Name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		eventually(t, 30*time.Second, "the proxy no longer trusts the removed bundle", func() bool {
			return forwardThrough(t, p.URL, bundledSink.url("probe")) == "unreachable"
		})
	})
}

// forwardThrough posts one CloudEvent through the proxy to dest, waiting
// for the answer, and returns the proxy's refusal reason, or the status
// code when the destination answered.
func forwardThrough(t *testing.T, proxyURL, dest string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, proxyURL, strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header = http.Header{
		"Kn-Forward-To": {dest}, "Content-Type": {"application/json"},
		"Ce-Specversion": {"1.0"}, "Ce-Id": {"probe"}, "Ce-Source": {"test"}, "Ce-Type": {"probe"},
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if r := resp.Header.Get("Kn-Forward-Error"); r != "" {
		return r
	}
	return resp.Status[:3]
}
