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
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// TestInstall checks the install docs/install.md and docs/mtping.md
// describe: the proxy Service Ready with the default (async) profile and
// reachable through the ingress, its held-call gauge served to the HPA,
// the adapter replaced, forwarding on.
func TestInstall(t *testing.T) {
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
		path := fmt.Sprintf("/apis/custom.metrics.k8s.io/v1beta1/namespaces/%s/pods/*/kn_forward_active_requests", systemNamespace)
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
			pods := podsOf(ctx, t, systemNamespace, "serving.knative.dev/service="+proxyService)
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
	})

	t.Run("adapter replaced", func(t *testing.T) {
		d, err := cluster.kube.AppsV1().Deployments(systemNamespace).Get(ctx, adapterName, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		spec := d.Spec.Template.Spec
		if img := spec.Containers[0].Image; !strings.HasPrefix(img, "dev.local/event-forwarding-mtping:") {
			t.Errorf("image %q, want this project's", img)
		}
		if spec.ServiceAccountName != "event-forwarding-pingsource-adapter" {
			t.Errorf("service account %q", spec.ServiceAccountName)
		}
		if d.Status.AvailableReplicas != 2 {
			t.Errorf("%d replicas available, want 2", d.Status.AvailableReplicas)
		}
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
