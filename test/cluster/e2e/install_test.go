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
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// TestInstall checks the install docs/install.md and docs/mtping.md
// describe: the release's images running by their digests, the proxy
// Service Ready with the default (async) profile and reachable through the
// ingress, its held-call gauge served to the HPA, the adapter's Deployment
// upstream's but for the image, the disruption budgets of both counting
// their pods, Eventing's config-leader-election untouched, forwarding on,
// and the page's own check (section 5) answered by its destination.
func TestInstall(t *testing.T) {
	installStage.begin(t) // before t.Parallel: see stages_test.go
	t.Parallel()
	after(t, upgradeStage)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
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
		for _, want := range []struct{ file, image, selector, container string }{
			{"release/event-forwarding-proxy-async.yaml", "dev.local/event-forwarding-proxy@", "serving.knative.dev/service=" + proxyService, "proxy"},
			{"release/pingsource-mt-adapter-patch.yaml", "dev.local/event-forwarding-mtping@", adapterSelector, "dispatcher"},
		} {
			b, err := os.ReadFile(filepath.Join(repoRoot, want.file))
			if err != nil {
				t.Fatal(err)
			}
			ref := regexp.MustCompile(regexp.QuoteMeta(want.image) + `sha256:[0-9a-f]{64}`).FindString(string(b))
			if ref == "" {
				t.Fatalf("%s names no %s image", want.file, want.image)
			}
			// A rollout is over once the new pods are available; the old
			// ones may still be stopping (a graceful stop), with the image
			// the install replaced. They are not the install's.
			var pods []corev1.Pod
			for _, p := range podsOf(ctx, t, systemNamespace, want.selector) {
				if p.DeletionTimestamp != nil {
					t.Logf("%s is stopping (image %s): not checked", p.Name, p.Spec.Containers[0].Image)
					continue
				}
				pods = append(pods, p)
			}
			if len(pods) == 0 {
				t.Fatalf("no running pod %s", want.selector)
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
		waitServed(ctx, t, "kn_forward_mtping_inflight_sends", adapterSelector)
		if h := adapterHPA(ctx, t); *h.Spec.MinReplicas != 2 || h.Spec.MaxReplicas != 10 {
			t.Errorf("the adapter's HPA scales from %d to %d replicas, want 2 to 10", *h.Spec.MinReplicas, h.Spec.MaxReplicas)
		}
	})

	t.Run("adapter's image only", func(t *testing.T) {
		// A scenario before may have scaled it: back at 2 by its end.
		waitAdapter(ctx, t, projectAdapterImage, adapterAccount, 2)
		d, err := cluster.kube.AppsV1().Deployments(systemNamespace).Get(ctx, adapterName, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var up appsv1.Deployment
		if err := yaml.Unmarshal([]byte(upstreamEventing(t, "deployments/pingsource-mt-adapter.yaml")), &up); err != nil {
			t.Fatal(err)
		}
		checkUpstreamsButTheImage(t, up.Spec.Template, d.Spec.Template)
	})

	t.Run("disruption budgets", func(t *testing.T) {
		// The disruption controller finds the pods each budget selects:
		// the proxy's two (min-scale) or more, the adapter's two, one of
		// each allowed to go at a time once all are ready.
		for _, name := range []string{proxyService, adapterHPAName} {
			var last string
			eventually(t, 2*time.Minute, time.Second, func() string { return "disruption budget " + name + ": " + last }, func() bool {
				pdb, err := cluster.kube.PolicyV1().PodDisruptionBudgets(systemNamespace).Get(ctx, name, metav1.GetOptions{})
				if err != nil {
					last = err.Error()
					return false
				}
				last = fmt.Sprintf("%d pods expected, %d healthy, %d disruptions allowed", pdb.Status.ExpectedPods,
					pdb.Status.CurrentHealthy, pdb.Status.DisruptionsAllowed)
				return pdb.Status.ObservedGeneration == pdb.Generation && pdb.Status.ExpectedPods >= 2 && pdb.Status.DisruptionsAllowed == 1
			})
			t.Logf("disruption budget %s: %s", name, last)
		}
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

	t.Run("docs/install.md's check", func(t *testing.T) { checkInstallDocCheck(ctx, t) })
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

// checkUpstreamsButTheImage checks that the adapter's live pod template is
// upstream's in all the install could have changed: labels, annotations,
// service account, the container's name, ports and probes. Its env is
// upstream's controller's, its image this project's.
func checkUpstreamsButTheImage(t *testing.T, want, got corev1.PodTemplateSpec) {
	t.Helper()
	if !maps.Equal(got.Labels, want.Labels) {
		t.Errorf("pod labels %v, want upstream's %v", got.Labels, want.Labels)
	}
	for k := range got.Annotations {
		if _, ok := want.Annotations[k]; !ok && k != "kubectl.kubernetes.io/restartedAt" {
			t.Errorf("pod annotation %s=%q: upstream's has none such", k, got.Annotations[k])
		}
	}
	if got.Spec.ServiceAccountName != want.Spec.ServiceAccountName {
		t.Errorf("service account %q, want upstream's %q", got.Spec.ServiceAccountName, want.Spec.ServiceAccountName)
	}
	gc, wc := got.Spec.Containers, want.Spec.Containers
	if len(gc) != 1 || len(wc) != 1 {
		t.Fatalf("%d containers, want upstream's %d", len(gc), len(wc))
	}
	if !strings.HasPrefix(gc[0].Image, projectAdapterImage) {
		t.Errorf("image %q, want this project's", gc[0].Image)
	}
	port := func(ps []corev1.ContainerPort) string {
		var s []string
		for _, p := range ps {
			s = append(s, fmt.Sprintf("%s:%d", p.Name, p.ContainerPort))
		}
		return strings.Join(s, " ")
	}
	probe := func(p *corev1.Probe) string {
		if p == nil || p.HTTPGet == nil {
			return "none"
		}
		return p.HTTPGet.Path + " on " + p.HTTPGet.Port.String()
	}
	for _, c := range []struct{ what, got, want string }{
		{"container", gc[0].Name, wc[0].Name},
		{"ports", port(gc[0].Ports), port(wc[0].Ports)},
		{"readiness probe", probe(gc[0].ReadinessProbe), probe(wc[0].ReadinessProbe)},
		{"liveness probe", probe(gc[0].LivenessProbe), probe(wc[0].LivenessProbe)},
	} {
		if c.got != c.want {
			t.Errorf("%s %s, want upstream's %s", c.what, c.got, c.want)
		}
	}
}
