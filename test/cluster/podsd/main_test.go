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

package main

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// podsJSON is a pod list as the API server answers it.
const podsJSON = `{"kind": "PodList", "items": [
  {"metadata": {"name": "adapter-1", "namespace": "knative-eventing",
     "labels": {"sources.knative.dev/role": "adapter", "app.kubernetes.io/name": "knative-eventing"}},
   "spec": {"containers": [{"name": "dispatcher", "ports": [
     {"name": "metrics", "containerPort": 9090, "protocol": "TCP"}, {"name": "probes", "containerPort": 8080}]}]},
   "status": {"phase": "Running", "podIP": "10.244.0.7"}},
  {"metadata": {"name": "prometheus-1", "namespace": "monitoring",
     "annotations": {"prometheus.io/scrape": "true", "prometheus.io/port": "9090"}},
   "spec": {"containers": [{"name": "prometheus", "ports": [{"containerPort": 9090}]}, {"name": "podsd"}]},
   "status": {"phase": "Running", "podIP": "fd00::8"}},
  {"metadata": {"name": "proxy-1", "namespace": "knative-eventing",
     "annotations": {"prometheus.io/scrape": "true", "prometheus.io/port": "9095", "prometheus.io/path": "/metrics"}},
   "spec": {"containers": [{"name": "proxy", "ports": [{"name": "user-port", "containerPort": 8080}]}]},
   "status": {"phase": "Running"}}
]}`

func decodePods(t *testing.T, s string) []pod {
	t.Helper()
	var l podList
	if err := json.Unmarshal([]byte(s), &l); err != nil {
		t.Fatal(err)
	}
	return l.Items
}

// TestContainerPorts checks /pods: one target per declared port of each
// pod with an IP, with the meta labels Prometheus' pod discovery gives,
// label and annotation names sanitised as it does.
func TestContainerPorts(t *testing.T) {
	adapter := map[string]string{
		"__meta_kubernetes_namespace":                                 "knative-eventing",
		"__meta_kubernetes_pod_name":                                  "adapter-1",
		"__meta_kubernetes_pod_ip":                                    "10.244.0.7",
		"__meta_kubernetes_pod_container_name":                        "dispatcher",
		"__meta_kubernetes_pod_label_sources_knative_dev_role":        "adapter",
		"__meta_kubernetes_pod_labelpresent_sources_knative_dev_role": "true",
		"__meta_kubernetes_pod_label_app_kubernetes_io_name":          "knative-eventing",
		"__meta_kubernetes_pod_labelpresent_app_kubernetes_io_name":   "true",
		"__meta_kubernetes_pod_container_port_name":                   "metrics",
		"__meta_kubernetes_pod_container_port_number":                 "9090",
	}
	probes := map[string]string{}
	for k, v := range adapter {
		probes[k] = v
	}
	probes["__meta_kubernetes_pod_container_port_name"] = "probes"
	probes["__meta_kubernetes_pod_container_port_number"] = "8080"
	want := []group{
		{Targets: []string{"10.244.0.7:9090"}, Labels: adapter},
		{Targets: []string{"10.244.0.7:8080"}, Labels: probes},
		// An unnamed port; the container without ports has no target.
		{Targets: []string{"[fd00::8]:9090"}, Labels: map[string]string{
			"__meta_kubernetes_namespace":                                  "monitoring",
			"__meta_kubernetes_pod_name":                                   "prometheus-1",
			"__meta_kubernetes_pod_ip":                                     "fd00::8",
			"__meta_kubernetes_pod_container_name":                         "prometheus",
			"__meta_kubernetes_pod_container_port_name":                    "",
			"__meta_kubernetes_pod_container_port_number":                  "9090",
			"__meta_kubernetes_pod_annotation_prometheus_io_scrape":        "true",
			"__meta_kubernetes_pod_annotationpresent_prometheus_io_scrape": "true",
			"__meta_kubernetes_pod_annotation_prometheus_io_port":          "9090",
			"__meta_kubernetes_pod_annotationpresent_prometheus_io_port":   "true",
		}},
		// proxy-1 has no IP yet: no target.
	}
	if diff := cmp.Diff(want, containerPorts(decodePods(t, podsJSON))); diff != "" {
		t.Errorf("-want +got:\n%s", diff)
	}
	if got, _ := json.Marshal(containerPorts(nil)); string(got) != "[]" {
		t.Errorf("no pods: %s, want []", got)
	}
}

// TestAnnotated checks /targets: the annotated pods with an IP, at the
// annotation's port and path.
func TestAnnotated(t *testing.T) {
	want := []group{{Targets: []string{"[fd00::8]:9090"}, Labels: map[string]string{"namespace": "monitoring", "pod": "prometheus-1"}}}
	if diff := cmp.Diff(want, annotated(decodePods(t, podsJSON))); diff != "" {
		t.Errorf("-want +got:\n%s", diff)
	}
	pods := decodePods(t, podsJSON)
	pods[2].Status.PodIP = "10.244.0.9"
	want = append(want, group{Targets: []string{"10.244.0.9:9095"}, Labels: map[string]string{"namespace": "knative-eventing", "pod": "proxy-1", "__metrics_path__": "/metrics"}})
	if diff := cmp.Diff(want, annotated(pods)); diff != "" {
		t.Errorf("with the proxy's IP: -want +got:\n%s", diff)
	}
}

// TestHandler checks what the endpoints ask the API server, and what they
// answer when it fails.
func TestHandler(t *testing.T) {
	var asked []string
	status := http.StatusOK
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asked = append(asked, r.Header.Get("Authorization")+" "+r.URL.String())
		w.WriteHeader(status)
		io.WriteString(w, podsJSON)
	}))
	defer api.Close()
	token := func() ([]byte, error) { return []byte("t0k"), nil }
	l := lister{api: api.URL, client: api.Client(), token: token}
	tests := []struct {
		name      string
		targets   func([]pod) []group
		query     string
		apiStatus int
		token     func() ([]byte, error)
		asks      string
		status    int
		body      string
	}{
		{name: "pods of one namespace", targets: containerPorts, query: "?namespace=knative-eventing",
			asks: "Bearer t0k /api/v1/namespaces/knative-eventing/pods?fieldSelector=status.phase%3DRunning", status: http.StatusOK, body: `"10.244.0.7:9090"`},
		{name: "pods of every namespace", targets: containerPorts,
			asks: "Bearer t0k /api/v1/pods?fieldSelector=status.phase%3DRunning", status: http.StatusOK, body: `"[fd00::8]:9090"`},
		{name: "annotated pods", targets: annotated,
			asks: "Bearer t0k /api/v1/pods?fieldSelector=status.phase%3DRunning", status: http.StatusOK, body: `[{"targets":["[fd00::8]:9090"],"labels":{"namespace":"monitoring","pod":"prometheus-1"}}]`},
		{name: "the API refuses", targets: containerPorts, apiStatus: http.StatusForbidden,
			asks: "Bearer t0k /api/v1/pods?fieldSelector=status.phase%3DRunning", status: http.StatusBadGateway, body: "listing pods: 403 Forbidden"},
		{name: "no token", targets: containerPorts, token: func() ([]byte, error) { return nil, errors.New("no token file") },
			status: http.StatusInternalServerError, body: "no token file"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			asked, status, l.token = nil, http.StatusOK, token
			if tc.apiStatus != 0 {
				status = tc.apiStatus
			}
			if tc.token != nil {
				l.token = tc.token
			}
			rec := httptest.NewRecorder()
			l.handler(tc.targets).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/x"+tc.query, nil))
			if got := strings.Join(asked, "\n"); got != tc.asks {
				t.Errorf("asked the API %q, want %q", got, tc.asks)
			}
			if rec.Code != tc.status || !strings.Contains(rec.Body.String(), tc.body) {
				t.Errorf("answered %d %s, want %d with %s", rec.Code, rec.Body, tc.status, tc.body)
			}
		})
	}
}
