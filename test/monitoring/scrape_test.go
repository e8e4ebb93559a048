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
	"maps"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/relabel"
	yamlv2 "go.yaml.in/yaml/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"knative.dev/serving/pkg/apis/serving"
	servingv1 "knative.dev/serving/pkg/apis/serving/v1"
)

const (
	podMonitorFile   = "config/monitoring/podmonitor.yaml"
	scrapeConfigFile = "config/monitoring/scrape-config.yaml"
)

// promScrapeJob is the part of a Prometheus scrape job the kit sets, decoded
// strictly; relabel_configs are decoded (and validated) by Prometheus'
// own relabel package.
type promScrapeJob struct {
	JobName             string `yaml:"job_name"`
	HonorLabels         *bool  `yaml:"honor_labels"`
	ScrapeInterval      string `yaml:"scrape_interval"`
	MetricsPath         string `yaml:"metrics_path"`
	KubernetesSDConfigs []struct {
		Role       string `yaml:"role"`
		Namespaces struct {
			Names []string `yaml:"names"`
		} `yaml:"namespaces"`
	} `yaml:"kubernetes_sd_configs"`
	RelabelConfigs []*relabel.Config `yaml:"relabel_configs"`
}

// podMonitor is the part of a PodMonitor the kit sets.
type podMonitor struct {
	metav1.TypeMeta `json:",inline"`
	Metadata        metav1.ObjectMeta `json:"metadata"`
	Spec            struct {
		Selector struct {
			MatchLabels map[string]string `json:"matchLabels"`
		} `json:"selector"`
		PodMetricsEndpoints []struct {
			Port        string           `json:"port"`
			Path        string           `json:"path"`
			Interval    string           `json:"interval"`
			HonorLabels *bool            `json:"honorLabels"`
			Relabelings []map[string]any `json:"relabelings"`
		} `json:"podMetricsEndpoints"`
	} `json:"spec"`
}

// loadScrapeJobs returns the jobs of scrape-config.yaml by name.
func loadScrapeJobs(t *testing.T) map[string]promScrapeJob {
	t.Helper()
	var plain struct {
		ScrapeConfigs []promScrapeJob `yaml:"scrape_configs"`
	}
	if err := yamlv2.UnmarshalStrict(readRepoFile(t, scrapeConfigFile), &plain); err != nil {
		t.Fatalf("%s: %v", scrapeConfigFile, err)
	}
	jobs := map[string]promScrapeJob{}
	for _, j := range plain.ScrapeConfigs {
		if _, dup := jobs[j.JobName]; dup {
			t.Fatalf("%s: job %s twice", scrapeConfigFile, j.JobName)
		}
		jobs[j.JobName] = j
	}
	return jobs
}

// yamlDocSep separates the documents of a YAML stream.
var yamlDocSep = regexp.MustCompile(`(?m)^---[ \t]*$`)

// loadPodMonitors returns the PodMonitors of podmonitor.yaml (one per
// document) by name.
func loadPodMonitors(t *testing.T) map[string]podMonitor {
	t.Helper()
	monitors := map[string]podMonitor{}
	for _, doc := range yamlDocSep.Split(string(readRepoFile(t, podMonitorFile)), -1) {
		var pm podMonitor
		if err := yaml.UnmarshalStrict([]byte(doc), &pm); err != nil {
			t.Fatalf("%s: %v", podMonitorFile, err)
		}
		if pm.Kind != "PodMonitor" {
			t.Fatalf("%s: a document of kind %q", podMonitorFile, pm.Kind)
		}
		if _, dup := monitors[pm.Metadata.Name]; dup {
			t.Fatalf("%s: PodMonitor %s twice", podMonitorFile, pm.Metadata.Name)
		}
		monitors[pm.Metadata.Name] = pm
	}
	return monitors
}

// relabelings converts a PodMonitor's relabelings (camelCase, as the
// Operator reads them) into Prometheus relabel configs, with their
// defaults and validation.
func relabelings(t *testing.T, in []map[string]any) []*relabel.Config {
	t.Helper()
	names := map[string]string{"sourceLabels": "source_labels", "targetLabel": "target_label"}
	var snake []map[string]any
	for _, r := range in {
		m := map[string]any{}
		for k, v := range r {
			if n, ok := names[k]; ok {
				k = n
			}
			m[k] = v
		}
		snake = append(snake, m)
	}
	b, err := yamlv2.Marshal(snake)
	if err != nil {
		t.Fatal(err)
	}
	var out []*relabel.Config
	if err := yamlv2.UnmarshalStrict(b, &out); err != nil {
		t.Fatalf("%s relabelings: %v", podMonitorFile, err)
	}
	return out
}

// knativeTarget is what Kubernetes pod discovery gives Prometheus for one
// container port of a pod of a Knative Service.
func knativeTarget(service, container, port, address string) labels.Labels {
	return labels.FromMap(map[string]string{
		"__address__":                                             address,
		"__meta_kubernetes_namespace":                             "knative-eventing",
		"__meta_kubernetes_pod_name":                              service + "-00001-deployment-5d9c-x1",
		"__meta_kubernetes_pod_container_name":                    container,
		"__meta_kubernetes_pod_container_port_name":               port,
		"__meta_kubernetes_pod_label_serving_knative_dev_service": service,
		"__meta_kubernetes_pod_annotation_prometheus_io_port":     "9095",
	})
}

// TestScrapeConfigs checks the two ways the kit scrapes the proxy: the
// PodMonitor and the hand-written scrape job. Both keep labels from the
// target (honor_labels false) and move the target to the metrics port;
// the scrape job keeps only the proxy's user container, and names the
// target's namespace and pod as Kubernetes does.
func TestScrapeConfigs(t *testing.T) {
	jobs, monitors := loadScrapeJobs(t), loadPodMonitors(t)
	// Each job and PodMonitor has its test: this one, or the adapter's.
	want := []string{scrapeJob, mtpingScrapeJob}
	if got := slices.Sorted(maps.Keys(jobs)); !slices.Equal(got, slices.Sorted(slices.Values(want))) {
		t.Errorf("%s: jobs %v, want %v", scrapeConfigFile, got, want)
	}
	if got := slices.Sorted(maps.Keys(monitors)); !slices.Equal(got, slices.Sorted(slices.Values(want))) {
		t.Errorf("%s: PodMonitors %v, want %v", podMonitorFile, got, want)
	}
	job, pm := jobs[scrapeJob], monitors[scrapeJob]
	if len(pm.Spec.PodMetricsEndpoints) != 1 {
		t.Fatalf("%s: %d endpoints, want 1", podMonitorFile, len(pm.Spec.PodMetricsEndpoints))
	}
	ep := pm.Spec.PodMetricsEndpoints[0]

	t.Run("settings", func(t *testing.T) {
		for _, tc := range []struct {
			name      string
			got, want any
		}{
			{name: "scrape job does not honor labels", got: job.HonorLabels != nil && !*job.HonorLabels, want: true},
			{name: "PodMonitor does not honor labels", got: ep.HonorLabels == nil || !*ep.HonorLabels, want: true},
			{name: "PodMonitor kind", got: pm.Kind, want: "PodMonitor"},
			{name: "PodMonitor selects the Service's pods", got: pm.Spec.Selector.MatchLabels[serving.ServiceLabelKey], want: "event-forwarding-proxy"},
			{name: "PodMonitor port is Knative's user port", got: ep.Port, want: servingv1.UserPortName},
			{name: "scrape job discovers pods", got: len(job.KubernetesSDConfigs) == 1 && job.KubernetesSDConfigs[0].Role == "pod", want: true},
			{name: "paths", got: job.MetricsPath + " " + ep.Path, want: "/metrics /metrics"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				if tc.got != tc.want {
					t.Errorf("got %v, want %v", tc.got, tc.want)
				}
			})
		}
	})

	const svc = "event-forwarding-proxy"
	tests := []struct {
		name    string
		target  labels.Labels
		keep    bool // by the scrape job (the Operator keeps user-port itself)
		address string
	}{
		{name: "IPv4 proxy pod", target: knativeTarget(svc, "proxy", servingv1.UserPortName, "10.1.2.3:8080"), keep: true, address: "10.1.2.3:9095"},
		{name: "IPv6 proxy pod", target: knativeTarget(svc, "proxy", servingv1.UserPortName, "[fd00::5]:8080"), keep: true, address: "[fd00::5]:9095"},
		{name: "queue-proxy of a proxy pod", target: knativeTarget(svc, "queue-proxy", "http-usermetric", "10.1.2.3:9091")},
		{name: "another Knative Service", target: knativeTarget("event-display", "user-container", servingv1.UserPortName, "10.1.2.4:8080")},
	}
	for _, tc := range tests {
		t.Run("scrape job/"+tc.name, func(t *testing.T) {
			got, keep := relabel.Process(tc.target, job.RelabelConfigs...)
			if keep != tc.keep {
				t.Fatalf("kept = %v, want %v", keep, tc.keep)
			}
			if !keep {
				return
			}
			want := map[string]string{
				"__address__": tc.address,
				"namespace":   "knative-eventing",
				"pod":         tc.target.Get("__meta_kubernetes_pod_name"),
				"container":   "proxy",
			}
			for k, v := range want {
				if got.Get(k) != v {
					t.Errorf("%s = %q, want %q (labels %v)", k, got.Get(k), v, got)
				}
			}
		})
		if tc.keep {
			t.Run("PodMonitor/"+tc.name, func(t *testing.T) {
				got, keep := relabel.Process(tc.target, relabelings(t, ep.Relabelings)...)
				if !keep || got.Get("__address__") != tc.address {
					t.Errorf("kept %v, __address__ %q, want %q", keep, got.Get("__address__"), tc.address)
				}
			})
		}
	}
}

// TestProxyServesMetricsWhereScraped checks the Services the kit scrapes:
// every profile announces the metrics port the proxy listens on, in the
// annotation the scrape configurations read, and name the container and
// pods as the memory alert selects them.
func TestProxyServesMetricsWhereScraped(t *testing.T) {
	for _, file := range []string{"config/400-proxy.yaml", "config/sync/400-proxy.yaml", "config/async-kpa/400-proxy.yaml"} {
		t.Run(file, func(t *testing.T) {
			var ksvc servingv1.Service
			if err := yaml.Unmarshal(readRepoFile(t, file), &ksvc); err != nil {
				t.Fatal(err)
			}
			ann := ksvc.Spec.Template.Annotations
			var metricsPort string
			containers := ksvc.Spec.Template.Spec.Containers
			// The memory alert and panels select container="proxy" and
			// compare with its memory limit.
			if len(containers) != 1 || containers[0].Name != "proxy" || containers[0].Resources.Limits.Memory().IsZero() {
				t.Errorf("want one container named proxy with a memory limit, got %d containers", len(containers))
			}
			for _, c := range containers {
				for _, e := range c.Env {
					if e.Name == "METRICS_PORT" {
						metricsPort = e.Value
					}
				}
			}
			if ann["prometheus.io/scrape"] != "true" || ann["prometheus.io/path"] != "/metrics" {
				t.Errorf("annotations %v: want prometheus.io/scrape true and prometheus.io/path /metrics", ann)
			}
			if metricsPort == "" || ann["prometheus.io/port"] != metricsPort {
				t.Errorf("prometheus.io/port = %q, METRICS_PORT = %q: want them equal", ann["prometheus.io/port"], metricsPort)
			}
			if !strings.HasPrefix(ksvc.Name, "event-forwarding-proxy") {
				t.Errorf("Service %q: the scrape configurations select event-forwarding-proxy", ksvc.Name)
			}
		})
	}
}
