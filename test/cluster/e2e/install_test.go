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
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// TestInstall checks the install docs/install.md and docs/mtping.md
// describe: the release's images running by their digests, the proxy
// Service Ready with the default (async) profile and reachable through the
// ingress, its held-call gauge served to the HPA, the adapter replaced,
// Eventing's config-leader-election patched, forwarding on.
func TestInstall(t *testing.T) {
	installStage.begin(t) // before t.Parallel: see stages_test.go
	t.Parallel()
	after(t, upgradeStage)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	t.Run("proxy Service", func(t *testing.T) {
		ksvc := waitReady(ctx, t, ksvcGVR, systemNamespace, proxyService, 2*time.Minute)
		ann, _, _ := unstructured.NestedStringMap(ksvc.Object, "spec", "template", "metadata", "annotations")
		if ann["autoscaling.knative.dev/class"] != "hpa.autoscaling.knative.dev" || ann["autoscaling.knative.dev/metric"] != "kn_forward_active_requests" {
			t.Errorf("autoscaling %v: want the async profile (HPA on kn_forward_active_requests)", ann)
		}
		url, _, _ := unstructured.NestedString(ksvc.Object, "status", "url")
		if url != "http://"+proxyHost {
			t.Errorf("URL %q, want http://%s (cluster-local)", url, proxyHost)
		}
	})

	t.Run("release images by digest", func(t *testing.T) {
		b, err := os.ReadFile(filepath.Join(repoRoot, "release/event-forwarding-proxy-async.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []struct{ image, selector, container string }{
			{"dev.local/event-forwarding-proxy@", "serving.knative.dev/service=" + proxyService, "proxy"},
			{"dev.local/event-forwarding-mtping@", "sources.knative.dev/role=adapter", "dispatcher"},
		} {
			ref := regexp.MustCompile(regexp.QuoteMeta(want.image) + `sha256:[0-9a-f]{64}`).FindString(string(b))
			if ref == "" {
				t.Fatalf("the release names no %s image", want.image)
			}
			pods := podsOf(ctx, t, systemNamespace, want.selector)
			if len(pods) == 0 {
				t.Fatalf("no pod %s", want.selector)
			}
			for _, p := range pods {
				// The container is found by its name, in the spec and the
				// status: a name that matches none would check nothing.
				inSpec, reported := false, false
				for _, c := range p.Spec.Containers {
					if c.Name == want.container {
						inSpec = true
						if c.Image != ref {
							t.Errorf("%s/%s: image %s, want the release's %s", p.Name, c.Name, c.Image, ref)
						}
					}
				}
				for _, c := range p.Status.ContainerStatuses {
					// Image is the name containerd found first (the archive's
					// version tag); ImageID is the digest it runs.
					if c.Name == want.container {
						reported = true
						if c.ImageID != ref {
							t.Errorf("%s/%s runs image %s, want the release's %s", p.Name, c.Name, c.ImageID, ref)
						}
					}
				}
				if !inSpec {
					t.Errorf("pod %s has no container %q", p.Name, want.container)
				}
				if !reported {
					t.Errorf("pod %s reports no status of container %q: the image it runs is unknown", p.Name, want.container)
				}
			}
		}
	})

	t.Run("through the ingress", func(t *testing.T) {
		for _, path := range []string{"/healthz", "/readyz"} {
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+proxyHost+path, nil)
			resp, err := viaIngress.Do(req)
			if err != nil {
				t.Fatalf("GET %s: %v", path, err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Errorf("GET %s: %d", path, resp.StatusCode)
			}
		}
	})

	t.Run("held-call gauge for the HPA", func(t *testing.T) {
		waitServed(ctx, t, "kn_forward_active_requests", "serving.knative.dev/service="+proxyService)
	})

	t.Run("held-sends gauge for the adapter's HPA", func(t *testing.T) {
		waitServed(ctx, t, "kn_forward_mtping_inflight_sends", "sources.knative.dev/role=adapter")
		if h := adapterHPA(ctx, t); *h.Spec.MinReplicas != 2 || h.Spec.MaxReplicas != 10 {
			t.Errorf("the adapter's HPA scales from %d to %d replicas, want 2 to 10", *h.Spec.MinReplicas, h.Spec.MaxReplicas)
		}
	})

	t.Run("adapter replaced", func(t *testing.T) {
		d, err := cluster.kube.AppsV1().Deployments(systemNamespace).Get(ctx, adapterName, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		spec := d.Spec.Template.Spec
		if img := spec.Containers[0].Image; !strings.HasPrefix(img, projectAdapterImage) {
			t.Errorf("image %q, want this project's", img)
		}
		if spec.ServiceAccountName != "event-forwarding-pingsource-adapter" {
			t.Errorf("service account %q", spec.ServiceAccountName)
		}
		// A scenario before may have scaled it: back at 2 by its end.
		waitAdapter(ctx, t, projectAdapterImage, "event-forwarding-pingsource-adapter", 2)
	})

	t.Run("Eventing's leader election untouched", func(t *testing.T) {
		checkLeaderElectionUntouched(ctx, t)
	})

	t.Run("forwarding on", func(t *testing.T) {
		cm, err := cluster.kube.CoreV1().ConfigMaps(systemNamespace).Get(ctx, forwardingCM, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got := cm.Data["event-forwarding-proxy"]; got != "http://"+proxyHost {
			t.Errorf("event-forwarding-proxy = %q", got)
		}
	})
}

// waitServed waits until the custom metrics API serves metric for every
// ready pod of selector, and at least two are ready.
func waitServed(ctx context.Context, t *testing.T, metric, selector string) {
	t.Helper()
	path := fmt.Sprintf("/apis/custom.metrics.k8s.io/v1beta1/namespaces/%s/pods/*/%s", systemNamespace, metric)
	var last string
	eventually(t, 3*time.Minute, 2*time.Second, func() string { return "custom metrics API: " + last }, func() bool {
		b, err := cluster.kube.CoreV1().RESTClient().Get().AbsPath(path).DoRaw(ctx)
		if err != nil {
			last = err.Error()
			return false
		}
		last = string(b)
		var list struct {
			Items []struct {
				DescribedObject struct{ Name string } `json:"describedObject"`
			} `json:"items"`
		}
		if json.Unmarshal(b, &list) != nil {
			return false
		}
		served := map[string]bool{}
		for _, it := range list.Items {
			served[it.DescribedObject.Name] = true
		}
		pods := podsOf(ctx, t, systemNamespace, selector)
		readyPods := 0
		for _, p := range pods {
			if ready(p) {
				readyPods++
				if !served[p.Name] {
					return false
				}
			}
		}
		return readyPods >= 2
	})
}
