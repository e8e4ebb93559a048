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

// podLookup returns what a container of a pod named pod in namespace
// finds in its environment: its literal values, and the pod's name and
// namespace where it asks for them.
func podLookup(c corev1.Container, namespace, pod string) func(string) (string, bool) {
	env := map[string]string{}
	for _, e := range c.Env {
		switch {
		case e.ValueFrom == nil:
			env[e.Name] = e.Value
		case e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.name":
			env[e.Name] = pod
		case e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.namespace":
			env[e.Name] = namespace
		}
	}
	return func(k string) (string, bool) {
		v, ok := env[k]
		return v, ok
	}
}

// wordUp finds the series `up` in an expression.
var wordUp = regexp.MustCompile(`\bup\b`)

// TestMtpingScrapeConfigs checks the two ways the kit scrapes the
// PingSource adapter against the Deployment it runs in, Eventing's own
// with only the dispatcher container's image replaced: the PodMonitor
// selects the Deployment's selector labels (the pods carry upstream's
// labels only) and the port the adapter serves /metrics on; the scrape job
// keeps exactly that port of the dispatcher container of those pods; both
// name the same job. Upstream's adapter, when it is back, is scraped the
// same way, so the adapter's alerts must not read `up`.
func TestMtpingScrapeConfigs(t *testing.T) {
	var d appsv1.Deployment
	if err := yaml.UnmarshalStrict(readEventingFile(t, upstreamAdapterFile), &d); err != nil {
		t.Fatalf("%s: %v", upstreamAdapterFile, err)
	}
	var settings corev1.ConfigMap
	if err := yaml.UnmarshalStrict(readRepoFile(t, mtpingSettingsFile), &settings); err != nil {
		t.Fatalf("%s: %v", mtpingSettingsFile, err)
	}
	tmpl := d.Spec.Template
	var container *corev1.Container
	for i, c := range tmpl.Spec.Containers {
		if c.Name == upstreamContainer {
			container = &tmpl.Spec.Containers[i]
		}
	}
	if container == nil {
		t.Fatalf("%s: no container %s", upstreamAdapterFile, upstreamContainer)
	}
	// The port the adapter listens on in the pod: its default, or what the
	// settings ConfigMap or the Deployment's env sets.
	env, err := mtping.EnvFromLookup(mtping.SettingsFirst(settings.Data, podLookup(*container, d.Namespace, mtpingPod)))
	if err != nil {
		t.Fatalf("%s, %s: %v", mtpingSettingsFile, upstreamAdapterFile, err)
	}
	pm := loadPodMonitors(t)[mtpingScrapeJob]
	if len(pm.Spec.PodMetricsEndpoints) != 1 {
		t.Fatalf("%s %s: %d endpoints, want 1", podMonitorFile, mtpingScrapeJob, len(pm.Spec.PodMetricsEndpoints))
	}
	ep := pm.Spec.PodMetricsEndpoints[0]
	// The containers with a port of the PodMonitor's name: the Operator
	// scrapes each.
	var metricsPort *corev1.ContainerPort
	var named []string
	for _, c := range tmpl.Spec.Containers {
		for i, p := range c.Ports {
			if p.Name == ep.Port {
				named = append(named, c.Name)
				if c.Name == upstreamContainer {
					metricsPort = &c.Ports[i]
				}
			}
		}
	}
	if metricsPort == nil {
		t.Fatalf("%s: container %s has no port named %q, the PodMonitor's", upstreamAdapterFile, upstreamContainer, ep.Port)
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
			{name: "the PodMonitor's selector is the Deployment's", got: maps.Equal(pm.Spec.Selector.MatchLabels, d.Spec.Selector.MatchLabels), want: true},
			{name: "only the dispatcher container has the PodMonitor's port", got: strings.Join(named, ","), want: upstreamContainer},
			{name: "the PodMonitor's port is the one the adapter serves", got: int(metricsPort.ContainerPort), want: env.MetricsPort},
			{name: "paths", got: ep.Path + " " + job.MetricsPath, want: "/metrics /metrics"},
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
	proxyPod := map[string]string{"serving.knative.dev/service": "event-forwarding-proxy", "app.kubernetes.io/name": "event-forwarding-proxy"}
	otherSource := map[string]string{"eventing.knative.dev/source": "apiserver-source-controller", "sources.knative.dev/role": "adapter"}
	type targetCase struct {
		name   string
		target labels.Labels
		keep   bool
	}
	var tests []targetCase
	// Every port of every container of the adapter's pod: the job keeps
	// the dispatcher's metrics port alone.
	for _, c := range tmpl.Spec.Containers {
		for _, p := range c.Ports {
			tests = append(tests, targetCase{
				name:   "the adapter's " + c.Name + " port " + p.Name,
				target: podTarget(tmpl.Labels, pod, c.Name, p),
				keep:   c.Name == upstreamContainer && p.Name == metricsPort.Name,
			})
		}
	}
	tests = append(tests,
		targetCase{name: "a proxy pod", target: podTarget(proxyPod, "event-forwarding-proxy-00001-deployment-x1", "proxy", corev1.ContainerPort{Name: "user-port", ContainerPort: 8080})},
		targetCase{name: "another source's adapter", target: podTarget(otherSource, "apiserversource-x1", "receive-adapter", *metricsPort)},
	)
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
				"__address__": "10.1.2.9:" + strconv.Itoa(env.MetricsPort),
				"namespace":   mtpingNamespace,
				"pod":         pod,
				"container":   upstreamContainer,
			}
			for k, v := range want {
				if got.Get(k) != v {
					t.Errorf("%s = %q, want %q (labels %v)", k, got.Get(k), v, got)
				}
			}
		})
	}
	t.Run("PodMonitor/job label", func(t *testing.T) {
		target := podTarget(tmpl.Labels, pod, upstreamContainer, *metricsPort)
		got, keep := relabel.Process(target, relabelings(t, ep.Relabelings)...)
		if !keep || got.Get("job") != mtpingScrapeJob || got.Get("__address__") != target.Get("__address__") {
			t.Errorf("kept %v, labels %v: want job %s and the address unchanged", keep, got, mtpingScrapeJob)
		}
	})
	t.Run("the adapter's alerts do not read up", func(t *testing.T) {
		for _, g := range loadRules(t).Groups {
			for _, r := range g.Rules {
				if strings.HasPrefix(r.Alert, "KnForwardAdapter") && wordUp.MatchString(r.Expr) {
					t.Errorf("%s: %s reads up, which upstream's adapter, scraped by the same job, sets too", rulesFile, r.Alert)
				}
			}
		}
	})
}
