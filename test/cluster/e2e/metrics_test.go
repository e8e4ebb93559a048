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
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// scrape reads the Prometheus text a pod serves on port /metrics.
func scrape(ctx context.Context, t testing.TB, p corev1.Pod, port int) map[string]*dto.MetricFamily {
	t.Helper()
	families, err := tryScrape(ctx, p, port)
	if err != nil {
		t.Fatal(err)
	}
	return families
}

// tryScrape is scrape for code that must not stop its test.
func tryScrape(ctx context.Context, p corev1.Pod, port int) (map[string]*dto.MetricFamily, error) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+net.JoinHostPort(p.Status.PodIP, strconv.Itoa(port))+"/metrics", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("metrics of %s: %w", p.Name, err)
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("metrics of %s: %w", p.Name, err)
	}
	return families, nil
}

// gauge is the sum of family's series on p.
func gauge(ctx context.Context, p corev1.Pod, port int, family string) (float64, error) {
	f, err := tryScrape(ctx, p, port)
	if err != nil {
		return 0, err
	}
	return sum(f, family, nil), nil
}

// sum adds the values of family's series whose labels include labels.
func sum(families map[string]*dto.MetricFamily, family string, labels map[string]string) float64 {
	f := families[family]
	if f == nil {
		return 0
	}
	var total float64
series:
	for _, m := range f.GetMetric() {
		have := map[string]string{}
		for _, l := range m.GetLabel() {
			have[l.GetName()] = l.GetValue()
		}
		for k, v := range labels {
			if have[k] != v {
				continue series
			}
		}
		switch {
		case m.Counter != nil:
			total += m.GetCounter().GetValue()
		case m.Gauge != nil:
			total += m.GetGauge().GetValue()
		}
	}
	return total
}

// containerUsage is one container's line in the kubelet's resource metrics.
type containerUsage struct {
	namespace, pod, container string
	workingSet                float64   // bytes
	workingSetAt              time.Time // when the kubelet sampled workingSet; zero if it did not say
	cpu                       float64   // core-seconds since the container started
}

// containerUsages reads every node's kubelet resource metrics
// (/metrics/resource, through the API server's node proxy).
func containerUsages(ctx context.Context, t testing.TB) []containerUsage {
	t.Helper()
	nodes, err := cluster.kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	type key struct{ namespace, pod, container string }
	byKey := map[key]*containerUsage{}
	var order []key
	for _, n := range nodes.Items {
		b, err := cluster.kube.CoreV1().RESTClient().Get().AbsPath("/api/v1/nodes", n.Name, "proxy/metrics/resource").DoRaw(ctx)
		if err != nil {
			t.Fatalf("kubelet metrics: %v", err)
		}
		parser := expfmt.NewTextParser(model.UTF8Validation)
		families, err := parser.TextToMetricFamilies(bytes.NewReader(b))
		if err != nil {
			t.Fatalf("kubelet metrics: %v", err)
		}
		for _, family := range []string{"container_memory_working_set_bytes", "container_cpu_usage_seconds_total"} {
			for _, m := range families[family].GetMetric() {
				l := map[string]string{}
				for _, p := range m.GetLabel() {
					l[p.GetName()] = p.GetValue()
				}
				k := key{l["namespace"], l["pod"], l["container"]}
				c := byKey[k]
				if c == nil {
					c = &containerUsage{namespace: k.namespace, pod: k.pod, container: k.container}
					byKey[k] = c
					order = append(order, k)
				}
				if family == "container_memory_working_set_bytes" {
					c.workingSet = m.GetGauge().GetValue()
					if ms := m.GetTimestampMs(); ms > 0 {
						c.workingSetAt = time.UnixMilli(ms)
					}
				} else {
					c.cpu = m.GetCounter().GetValue()
				}
			}
		}
	}
	out := make([]containerUsage, 0, len(order))
	for _, k := range order {
		out = append(out, *byKey[k])
	}
	return out
}
