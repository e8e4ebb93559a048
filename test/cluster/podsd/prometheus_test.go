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
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/relabel"
	yamlv2 "go.yaml.in/yaml/v2"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// repoRoot is the repository root, seen from this package's directory.
const repoRoot = "../../.."

// adapterJob is the kit's scrape job for the PingSource adapter, in
// config/monitoring/scrape-config.yaml; the cluster's Prometheus runs it.
const adapterJob = "pingsource-mt-adapter"

// scrapeJob is the part of a scrape job the kit and the cluster set,
// decoded strictly: a key of neither fails.
type scrapeJob struct {
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
	HTTPSDConfigs []struct {
		URL             string `yaml:"url"`
		RefreshInterval string `yaml:"refresh_interval"`
	} `yaml:"http_sd_configs"`
	RelabelConfigs []*relabel.Config `yaml:"relabel_configs"`
}

// scrapeJobs decodes the scrape_configs of a Prometheus configuration.
func scrapeJobs(t *testing.T, what string, b []byte) map[string]scrapeJob {
	t.Helper()
	var c struct {
		Global        map[string]string `yaml:"global"`
		ScrapeConfigs []scrapeJob       `yaml:"scrape_configs"`
	}
	if err := yamlv2.UnmarshalStrict(b, &c); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	jobs := map[string]scrapeJob{}
	for _, j := range c.ScrapeConfigs {
		if _, dup := jobs[j.JobName]; dup {
			t.Fatalf("%s: job %s twice", what, j.JobName)
		}
		jobs[j.JobName] = j
	}
	return jobs
}

// clusterPrometheusConfig returns the prometheus.yml monitoring.sh gives
// the cluster's Prometheus, from the manifest it applies.
func clusterPrometheusConfig(t *testing.T) []byte {
	t.Helper()
	cmd := exec.Command("bash", filepath.Join(repoRoot, "test/cluster/monitoring.sh"), "manifest")
	out, err := cmd.Output()
	if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
		t.Fatalf("monitoring.sh manifest: %v\n%s", err, ee.Stderr)
	} else if err != nil {
		t.Fatalf("monitoring.sh manifest: %v", err)
	}
	for _, doc := range regexp.MustCompile(`(?m)^---[ \t]*$`).Split(string(out), -1) {
		var cm corev1.ConfigMap
		if err := yaml.Unmarshal([]byte(doc), &cm); err != nil {
			t.Fatalf("monitoring.sh manifest: %v\n%s", err, doc)
		}
		if cm.Kind == "ConfigMap" && cm.Name == "prometheus" {
			return []byte(cm.Data["prometheus.yml"])
		}
	}
	t.Fatalf("monitoring.sh manifest: no ConfigMap prometheus\n%s", out)
	return nil
}

// upstreamAdapter returns Eventing's pingsource-mt-adapter Deployment, from
// the eventing module this project builds against: the adapter runs in it
// with only the dispatcher container's image replaced.
func upstreamAdapter(t *testing.T) appsv1.Deployment {
	t.Helper()
	cmd := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "knative.dev/eventing")
	cmd.Dir = repoRoot
	out, err := cmd.Output()
	if err != nil || strings.TrimSpace(string(out)) == "" {
		t.Fatalf("the eventing module: %v %s", err, out)
	}
	file := filepath.Join(strings.TrimSpace(string(out)), "config/core/deployments/pingsource-mt-adapter.yaml")
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var d appsv1.Deployment
	if err := yaml.UnmarshalStrict(b, &d); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	return d
}

// clusterPods returns, as podsd decodes them, a Running pod of the
// adapter's Deployment with IP ip, and pods of the cluster's Prometheus and
// proxy, annotated for scraping at the same IP.
func clusterPods(t *testing.T, d appsv1.Deployment, ip string, adapterMetricsPort int32) []pod {
	t.Helper()
	adapter := corev1.Pod{ObjectMeta: d.Spec.Template.ObjectMeta, Spec: *d.Spec.Template.Spec.DeepCopy()}
	adapter.Name, adapter.Namespace = d.Name+"-5d9c8b7f4-x1", d.Namespace
	for _, c := range adapter.Spec.Containers {
		for i, p := range c.Ports {
			if p.Name == "metrics" && adapterMetricsPort != 0 {
				c.Ports[i].ContainerPort = adapterMetricsPort // the slice is the pod's
			}
		}
	}
	prom := corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "prometheus-6c5f-x1", Namespace: "monitoring",
			Annotations: map[string]string{"prometheus.io/scrape": "true", "prometheus.io/port": "9090"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{
			{Name: "prometheus", Ports: []corev1.ContainerPort{{ContainerPort: 9090}}}, {Name: "podsd"}}},
	}
	proxy := corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "event-forwarding-proxy-00001-deployment-x1", Namespace: d.Namespace,
			Labels:      map[string]string{"serving.knative.dev/service": "event-forwarding-proxy"},
			Annotations: map[string]string{"prometheus.io/scrape": "true", "prometheus.io/port": "9095", "prometheus.io/path": "/metrics"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{
			{Name: "proxy", Ports: []corev1.ContainerPort{{Name: "user-port", ContainerPort: 8080}}},
			{Name: "queue-proxy", Ports: []corev1.ContainerPort{{Name: "http-usermetric", ContainerPort: 9091}, {Name: "metrics", ContainerPort: 9090}}}}},
	}
	list := corev1.PodList{Items: []corev1.Pod{adapter, prom, proxy}}
	for i := range list.Items {
		list.Items[i].Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: ip}
	}
	b, err := json.Marshal(list)
	if err != nil {
		t.Fatal(err)
	}
	return decodePods(t, string(b))
}

// TestClusterScrapesTheAdapterAsTheKit checks the cluster's prometheus.yml
// as monitoring.sh makes it: its jobs are podsd's annotated pods and the
// kit's adapter job, with the kit's relabeling verbatim and podsd's /pods
// of the kit's namespace in place of kubernetes_sd_configs. Fed podsd's
// targets for the adapter's pod (Eventing's Deployment), Prometheus's and
// a proxy pod, the adapter job keeps exactly the dispatcher container's
// metrics port, and no pod is scraped by both jobs.
func TestClusterScrapesTheAdapterAsTheKit(t *testing.T) {
	const kitFile = "config/monitoring/scrape-config.yaml"
	kitConfig, err := os.ReadFile(filepath.Join(repoRoot, kitFile))
	if err != nil {
		t.Fatal(err)
	}
	kit := scrapeJobs(t, kitFile, kitConfig)[adapterJob]
	jobs := scrapeJobs(t, "the cluster's prometheus.yml", clusterPrometheusConfig(t))
	if got := slices.Sorted(maps.Keys(jobs)); !slices.Equal(got, []string{adapterJob, "pods"}) {
		t.Fatalf("jobs %v, want pods and %s", got, adapterJob)
	}
	job := jobs[adapterJob]
	marshal := func(v any) string {
		b, err := yamlv2.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	if len(kit.KubernetesSDConfigs) != 1 || len(kit.KubernetesSDConfigs[0].Namespaces.Names) != 1 {
		t.Fatalf("%s: job %s discovers pods of %d configs, want one namespace", kitFile, adapterJob, len(kit.KubernetesSDConfigs))
	}
	ns := kit.KubernetesSDConfigs[0].Namespaces.Names[0]
	for _, tc := range []struct {
		name      string
		got, want any
	}{
		{name: "relabel_configs", got: marshal(job.RelabelConfigs), want: marshal(kit.RelabelConfigs)},
		{name: "honor_labels", got: job.HonorLabels != nil && *job.HonorLabels == *kit.HonorLabels, want: true},
		{name: "metrics_path", got: job.MetricsPath, want: kit.MetricsPath},
		{name: "no kubernetes_sd_configs", got: len(job.KubernetesSDConfigs), want: 0},
		{name: "podsd's pods of the kit's namespace", got: len(job.HTTPSDConfigs) == 1 && job.HTTPSDConfigs[0].URL == "http://127.0.0.1:8000/pods?namespace="+ns, want: true},
		{name: "the pods job is podsd's annotated pods", got: len(jobs["pods"].HTTPSDConfigs) == 1 && jobs["pods"].HTTPSDConfigs[0].URL == "http://127.0.0.1:8000/targets", want: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.got != tc.want {
				t.Errorf("got %v, want %v", tc.got, tc.want)
			}
		})
	}

	d := upstreamAdapter(t)
	if d.Namespace != ns {
		t.Fatalf("the adapter's Deployment is in %s, the kit's job discovers %s", d.Namespace, ns)
	}
	// podsd's /pods?namespace=ns: the API lists that namespace's pods.
	var inNamespace []pod
	pods := clusterPods(t, d, "10.244.0.7", 0)
	for _, p := range pods {
		if p.Metadata.Namespace == ns {
			inNamespace = append(inNamespace, p)
		}
	}
	var kept []labels.Labels
	for _, g := range containerPorts(inNamespace) {
		for _, target := range g.Targets {
			m := map[string]string{"__address__": target}
			for k, v := range g.Labels {
				m[k] = v
			}
			if l, keep := relabel.Process(labels.FromMap(m), job.RelabelConfigs...); keep {
				kept = append(kept, l)
			}
		}
	}
	adapterPod := d.Name + "-5d9c8b7f4-x1"
	if len(kept) != 1 {
		t.Fatalf("the adapter job keeps %v, want the adapter pod's metrics port alone", kept)
	}
	want := map[string]string{"__address__": "10.244.0.7:9090", "namespace": ns, "pod": adapterPod, "container": "dispatcher"}
	for k, v := range want {
		if got := kept[0].Get(k); got != v {
			t.Errorf("kept target: %s = %q, want %q (%v)", k, got, v, kept[0])
		}
	}
	for _, g := range annotated(pods) {
		if g.Labels["pod"] == adapterPod {
			t.Errorf("the pods job scrapes the adapter's pod too: %v", g)
		}
	}
}
