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
	"io"
	"net/http"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// sinkManifest is a Knative Service of test/cluster/e2esink, on exactly
// one pod (its records are in memory), with no concurrency limit (it holds
// many calls) and a timeout above the proxy's.
const sinkManifest = `
apiVersion: serving.knative.dev/v1
kind: Service
metadata: {name: e2esink, namespace: "{{NAMESPACE}}"}
spec:
  template:
    metadata:
      annotations:
        autoscaling.knative.dev/min-scale: "1"
        autoscaling.knative.dev/max-scale: "1"
        # Never through the activator: the proxy's path is under test, not
        # the sink's.
        autoscaling.knative.dev/target-burst-capacity: "0"
    spec:
      containerConcurrency: 0
      timeoutSeconds: 600
      responseStartTimeoutSeconds: 600
      containers:
      - image: dev.local/e2esink:v1
        imagePullPolicy: IfNotPresent
        ports: [{containerPort: 8080}]
        resources: {requests: {cpu: 10m, memory: 32Mi}}
        securityContext:
          runAsNonRoot: true
          allowPrivilegeEscalation: false
          capabilities: {drop: [ALL]}
          seccompProfile: {type: RuntimeDefault}
`

// sink is an e2esink Service in a test's namespace.
type sink struct {
	namespace string
	// URL is its cluster-local address, what a source names as its sink.
	URL string
	// service is its Knative Service's name, if not e2esink.
	service string
}

// record is what e2esink keeps of a request (test/cluster/e2esink).
type record struct {
	Seq            int       `json:"seq"`
	Time           time.Time `json:"time"`
	Method         string    `json:"method"`
	Path           string    `json:"path"`
	Proto          string    `json:"proto"`
	ID             string    `json:"id"`
	Source         string    `json:"source"`
	Type           string    `json:"type"`
	EventTime      string    `json:"eventTime"`
	ContentType    string    `json:"contentType"`
	BodySHA256     string    `json:"bodySha256"`
	BodyBytes      int       `json:"bodyBytes"`
	TokenAudience  string    `json:"tokenAudience"`
	ForwardHeaders []string  `json:"forwardHeaders"`
	Outcome        string    `json:"outcome"`
}

func newSink(ctx context.Context, t testing.TB, namespace string) *sink {
	t.Helper()
	apply(ctx, t, namespace, sinkManifest)
	ksvc := waitReady(ctx, t, ksvcGVR, namespace, "e2esink", 3*time.Minute)
	// Ready comes while the activator may still be in the sink's path; it
	// leaves once the revision's serverless service serves the pod itself.
	rev, _, _ := unstructured.NestedString(ksvc.Object, "status", "latestReadyRevisionName")
	mode := ""
	eventually(t, 2*time.Minute, time.Second, func() string { return "the sink's serverless service is in mode " + mode }, func() bool {
		sks, err := cluster.dynamic.Resource(sksGVR).Namespace(namespace).Get(ctx, rev, metav1.GetOptions{})
		if err != nil {
			return false
		}
		mode, _, _ = unstructured.NestedString(sks.Object, "spec", "mode")
		return mode == "Serve" && conditionTrue(sks, "Ready")
	})
	// Ready comes before the ingress has loaded the sink's route, which
	// answers 404 until then, to the proxy's calls too: wait until the
	// route answers (GET /records, which the sink does not record).
	host := fmt.Sprintf("e2esink.%s.svc.cluster.local", namespace)
	status := 0
	eventually(t, 2*time.Minute, time.Second, func() string { return fmt.Sprintf("the sink's route through the ingress answers %d", status) }, func() bool {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+cluster.ingress+"/records", nil)
		req.Host = host
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return false
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		status = resp.StatusCode
		return status == http.StatusOK
	})
	return &sink{namespace: namespace, URL: "http://" + host}
}

// records returns every request the sink's pod recorded, read from the
// pod's own port (not through Knative, so reading changes no count).
func (s *sink) records(ctx context.Context, t testing.TB) []record {
	t.Helper()
	var ip string
	service := s.service
	if service == "" {
		service = "e2esink"
	}
	for _, p := range podsOf(ctx, t, s.namespace, "serving.knative.dev/service="+service) {
		if ready(p) {
			ip = p.Status.PodIP
		}
	}
	if ip == "" {
		t.Fatalf("no ready %s pod in %s", service, s.namespace)
	}
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+ip+":8080/records", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("records: %v", err)
	}
	defer resp.Body.Close()
	var out struct {
		Records []record `json:"records"`
		Dropped int      `json:"dropped"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatalf("records: %v", err)
	}
	if out.Dropped > 0 {
		t.Fatalf("the sink dropped %d records", out.Dropped)
	}
	return out.Records
}

// byID returns the records whose event id is id.
func byID(rs []record, id string) []record {
	var out []record
	for _, r := range rs {
		if r.ID == id {
			out = append(out, r)
		}
	}
	return out
}
