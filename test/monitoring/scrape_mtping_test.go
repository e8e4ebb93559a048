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
	"strconv"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	k8slabels "k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/yaml"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/relabel"

	"knative.dev/event-forwarding-proxy/adapter/mtping"
)

// mtpingSettingsFile is the ConfigMap the adapter reads its settings from
// (through the API, mtping.ReadSettings).
const mtpingSettingsFile = "config/300-pingsource-adapter-settings.yaml"

// labelNameChars are the characters Kubernetes discovery replaces with _
// in a pod label's meta label name.
var labelNameChars = regexp.MustCompile(`[^a-zA-Z0-9_]`)

// podTarget is what Kubernetes pod discovery gives Prometheus for one
// container port of a pod carrying podLabels.
func podTarget(podLabels map[string]string, pod, container string, port corev1.ContainerPort) labels.Labels {
	m := map[string]string{
		"__address__":                               "10.1.2.9:" + strconv.Itoa(int(port.ContainerPort)),
		"__meta_kubernetes_namespace":               mtpingNamespace,
		"__meta_kubernetes_pod_name":                pod,
		"__meta_kubernetes_pod_container_name":      container,
		"__meta_kubernetes_pod_container_port_name": port.Name,
		// The Operator's job label before the PodMonitor's relabelings.
		"job": mtpingNamespace + "/" + mtpingScrapeJob,
	}
	for k, v := range podLabels {
		m["__meta_kubernetes_pod_label_"+labelNameChars.ReplaceAllString(k, "_")] = v
	}
	return labels.FromMap(m)
}

// TestMtpingScrapeConfigs checks the two ways the kit scrapes the
// PingSource adapter against its manifest: the PodMonitor selects the pod
// template's labels (not upstream's adapter) and the port the adapter
// serves /metrics on; the scrape job keeps that port of those pods only;
// and both name the job that the alert KnForwardAdapterNoLeaseHeld reads.
func TestMtpingScrapeConfigs(t *testing.T) {
	var d appsv1.Deployment
	if err := yaml.UnmarshalStrict(readRepoFile(t, mtpingFile), &d); err != nil {
		t.Fatalf("%s: %v", mtpingFile, err)
	}
	var settings corev1.ConfigMap
	if err := yaml.UnmarshalStrict(readRepoFile(t, mtpingSettingsFile), &settings); err != nil {
		t.Fatalf("%s: %v", mtpingSettingsFile, err)
	}
	// The port the adapter listens on in the pod: its default, or what the
	// settings ConfigMap sets.
	env, err := mtping.EnvFromLookup(mtping.SettingsFirst(settings.Data, func(k string) (string, bool) {
		if k == "POD_NAME" {
			return mtpingPod, true
		}
		return "", false
	}))
	if err != nil {
		t.Fatalf("%s: %v", mtpingSettingsFile, err)
	}
	tmpl := d.Spec.Template
	if len(tmpl.Spec.Containers) != 1 {
		t.Fatalf("%s: %d containers, want 1", mtpingFile, len(tmpl.Spec.Containers))
	}
	container := tmpl.Spec.Containers[0]
	pm := loadPodMonitors(t)[mtpingScrapeJob]
	if len(pm.Spec.PodMetricsEndpoints) != 1 {
		t.Fatalf("%s %s: %d endpoints, want 1", podMonitorFile, mtpingScrapeJob, len(pm.Spec.PodMetricsEndpoints))
	}
	ep := pm.Spec.PodMetricsEndpoints[0]
	var metricsPort *corev1.ContainerPort
	for i, p := range container.Ports {
		if p.Name == ep.Port {
			metricsPort = &container.Ports[i]
		}
	}
	if metricsPort == nil {
		t.Fatalf("%s: container %s has no port named %q, the PodMonitor's", mtpingFile, container.Name, ep.Port)
	}
	selector := k8slabels.SelectorFromSet(pm.Spec.Selector.MatchLabels)
	job := loadScrapeJobs(t)[mtpingScrapeJob]

	t.Run("settings", func(t *testing.T) {
		for _, tc := range []struct {
			name      string
			got, want any
		}{
			{name: "the PodMonitor selects the adapter's pods", got: selector.Matches(k8slabels.Set(tmpl.Labels)), want: true},
			{name: "the PodMonitor selects something", got: selector.Empty(), want: false},
			{name: "the PodMonitor leaves upstream's adapter out", got: selector.Matches(k8slabels.Set(d.Spec.Selector.MatchLabels)), want: false},
			{name: "the PodMonitor's port is the one the adapter serves", got: int(metricsPort.ContainerPort), want: env.MetricsPort},
			{name: "the annotation names the same port", got: tmpl.Annotations["prometheus.io/port"], want: strconv.Itoa(env.MetricsPort)},
			{name: "paths", got: strings.Join([]string{ep.Path, job.MetricsPath, tmpl.Annotations["prometheus.io/path"]}, " "), want: "/metrics /metrics /metrics"},
			{name: "PodMonitor does not honor labels", got: ep.HonorLabels == nil || !*ep.HonorLabels, want: true},
			{name: "PodMonitor in the adapter's namespace", got: pm.Metadata.Namespace, want: d.Namespace},
			{name: "scrape job does not honor labels", got: job.HonorLabels != nil && !*job.HonorLabels, want: true},
			{name: "scrape job discovers pods of the adapter's namespace", got: len(job.KubernetesSDConfigs) == 1 && job.KubernetesSDConfigs[0].Role == "pod" &&
				strings.Join(job.KubernetesSDConfigs[0].Namespaces.Names, ",") == d.Namespace, want: true},
			{name: "the adapter's namespace is the one the tests give it", got: d.Namespace, want: mtpingNamespace},
		} {
			t.Run(tc.name, func(t *testing.T) {
				if tc.got != tc.want {
					t.Errorf("got %v, want %v", tc.got, tc.want)
				}
			})
		}
	})

	pod := d.Name + "-5d9c8b7f4-x1"
	upstream := maps.Clone(d.Spec.Selector.MatchLabels) // upstream's adapter carries only these
	proxyPod := map[string]string{"serving.knative.dev/service": "event-forwarding-proxy", "app.kubernetes.io/name": "event-forwarding-proxy"}
	type targetCase struct {
		name   string
		target labels.Labels
		keep   bool
	}
	tests := []targetCase{
		{name: "the adapter's metrics port", target: podTarget(tmpl.Labels, pod, container.Name, *metricsPort), keep: true},
		{name: "upstream's adapter", target: podTarget(upstream, pod, container.Name, *metricsPort)},
		{name: "a proxy pod", target: podTarget(proxyPod, "event-forwarding-proxy-00001-deployment-x1", "proxy", corev1.ContainerPort{Name: "user-port", ContainerPort: 8080})},
	}
	for _, p := range container.Ports {
		if p.Name != metricsPort.Name {
			tests = append(tests, targetCase{name: "the adapter's port " + p.Name, target: podTarget(tmpl.Labels, pod, container.Name, p)})
		}
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
				"__address__": tc.target.Get("__address__"),
				"namespace":   mtpingNamespace,
				"pod":         pod,
				"container":   container.Name,
			}
			for k, v := range want {
				if got.Get(k) != v {
					t.Errorf("%s = %q, want %q (labels %v)", k, got.Get(k), v, got)
				}
			}
		})
	}
	t.Run("PodMonitor/job label", func(t *testing.T) {
		got, keep := relabel.Process(tests[0].target, relabelings(t, ep.Relabelings)...)
		if !keep || got.Get("job") != mtpingScrapeJob || got.Get("__address__") != tests[0].target.Get("__address__") {
			t.Errorf("kept %v, labels %v: want job %s and the address unchanged", keep, got, mtpingScrapeJob)
		}
	})
	t.Run("the alert reads the job", func(t *testing.T) {
		for _, g := range loadRules(t).Groups {
			for _, r := range g.Rules {
				if r.Alert == "KnForwardAdapterNoLeaseHeld" && !strings.Contains(r.Expr, `up{job="`+mtpingScrapeJob+`"}`) {
					t.Errorf("%s: %s does not read up of job %s", rulesFile, r.Alert, mtpingScrapeJob)
				}
			}
		}
	})
}
