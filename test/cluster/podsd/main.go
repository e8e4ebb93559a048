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

// Command podsd gives Prometheus its targets over HTTP service discovery
// (http_sd_configs): Debian's Prometheus 2.42 is built without
// kubernetes_sd_configs. It runs beside Prometheus in its pod and lists,
// with the pod's service-account token, the Running pods, of the
// namespace the query parameter `namespace` names if any:
//
//   - /targets: the pods annotated prometheus.io/scrape: "true" (port
//     prometheus.io/port, path prometheus.io/path), each target labelled
//     with its namespace and pod;
//   - /pods: every declared port of every container, with the
//     __meta_kubernetes_* labels kubernetes_sd_configs' role pod gives it,
//     so that a job's relabel_configs written for that role run unchanged.
package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"log"
	"net"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"strconv"
	"time"
)

const sa = "/var/run/secrets/kubernetes.io/serviceaccount/"

type pod struct {
	Metadata struct {
		Name        string            `json:"name"`
		Namespace   string            `json:"namespace"`
		Labels      map[string]string `json:"labels"`
		Annotations map[string]string `json:"annotations"`
	} `json:"metadata"`
	Spec struct {
		Containers []struct {
			Name  string `json:"name"`
			Ports []struct {
				Name          string `json:"name"`
				ContainerPort int    `json:"containerPort"`
			} `json:"ports"`
		} `json:"containers"`
	} `json:"spec"`
	Status struct {
		PodIP string `json:"podIP"`
	} `json:"status"`
}

type podList struct {
	Items []pod `json:"items"`
}

type group struct {
	Targets []string          `json:"targets"`
	Labels  map[string]string `json:"labels"`
}

// annotated is /targets: the pods annotated for scraping.
func annotated(pods []pod) []group {
	groups := []group{}
	for _, p := range pods {
		a := p.Metadata.Annotations
		if a["prometheus.io/scrape"] != "true" || a["prometheus.io/port"] == "" || p.Status.PodIP == "" {
			continue
		}
		labels := map[string]string{"namespace": p.Metadata.Namespace, "pod": p.Metadata.Name}
		if path := a["prometheus.io/path"]; path != "" {
			labels["__metrics_path__"] = path
		}
		groups = append(groups, group{Targets: []string{net.JoinHostPort(p.Status.PodIP, a["prometheus.io/port"])}, Labels: labels})
	}
	return groups
}

// invalidLabelChars are the characters Prometheus replaces with _ in the
// name of a pod's label or annotation meta label.
var invalidLabelChars = regexp.MustCompile(`[^a-zA-Z0-9_]`)

// containerPorts is /pods: one target per declared container port of each
// pod with an IP, as kubernetes_sd_configs' role pod gives it.
func containerPorts(pods []pod) []group {
	groups := []group{}
	for _, p := range pods {
		if p.Status.PodIP == "" {
			continue
		}
		meta := map[string]string{
			"__meta_kubernetes_namespace": p.Metadata.Namespace,
			"__meta_kubernetes_pod_name":  p.Metadata.Name,
			"__meta_kubernetes_pod_ip":    p.Status.PodIP,
		}
		for k, v := range p.Metadata.Labels {
			k = invalidLabelChars.ReplaceAllString(k, "_")
			meta["__meta_kubernetes_pod_label_"+k] = v
			meta["__meta_kubernetes_pod_labelpresent_"+k] = "true"
		}
		for k, v := range p.Metadata.Annotations {
			k = invalidLabelChars.ReplaceAllString(k, "_")
			meta["__meta_kubernetes_pod_annotation_"+k] = v
			meta["__meta_kubernetes_pod_annotationpresent_"+k] = "true"
		}
		for _, c := range p.Spec.Containers {
			for _, port := range c.Ports {
				labels := map[string]string{
					"__meta_kubernetes_pod_container_name":        c.Name,
					"__meta_kubernetes_pod_container_port_name":   port.Name,
					"__meta_kubernetes_pod_container_port_number": strconv.Itoa(port.ContainerPort),
				}
				for k, v := range meta {
					labels[k] = v
				}
				groups = append(groups, group{Targets: []string{net.JoinHostPort(p.Status.PodIP, strconv.Itoa(port.ContainerPort))}, Labels: labels})
			}
		}
	}
	return groups
}

// lister lists the Running pods from the API server.
type lister struct {
	api    string // https://host:port
	client *http.Client
	token  func() ([]byte, error)
}

// handler serves the groups targets makes of the Running pods, of the
// namespace the query names, or of every namespace.
func (l lister) handler(targets func([]pod) []group) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		pods, status, err := l.list(r.Context(), r.URL.Query().Get("namespace"))
		if err != nil {
			http.Error(w, err.Error(), status)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(targets(pods))
	}
}

// list returns the Running pods of namespace ("" for all), or an error
// and the status to answer with.
func (l lister) list(ctx context.Context, namespace string) ([]pod, int, error) {
	token, err := l.token()
	if err != nil {
		return nil, http.StatusInternalServerError, err
	}
	path := "/api/v1/pods"
	if namespace != "" {
		path = "/api/v1/namespaces/" + url.PathEscape(namespace) + "/pods"
	}
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, l.api+path+"?fieldSelector=status.phase%3DRunning", nil)
	req.Header.Set("Authorization", "Bearer "+string(token))
	resp, err := l.client.Do(req)
	if err != nil {
		return nil, http.StatusBadGateway, err
	}
	defer resp.Body.Close()
	var pods podList
	if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&pods) != nil {
		return nil, http.StatusBadGateway, errors.New("listing pods: " + resp.Status)
	}
	return pods.Items, http.StatusOK, nil
}

func main() {
	ca, err := os.ReadFile(sa + "ca.crt")
	if err != nil {
		log.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca)
	l := lister{
		api:    "https://" + net.JoinHostPort(os.Getenv("KUBERNETES_SERVICE_HOST"), os.Getenv("KUBERNETES_SERVICE_PORT")),
		client: &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{Proxy: nil, TLSClientConfig: &tls.Config{RootCAs: pool}}},
		token:  func() ([]byte, error) { return os.ReadFile(sa + "token") }, // re-read: the kubelet rotates it
	}
	http.Handle("/targets", l.handler(annotated))
	http.Handle("/pods", l.handler(containerPorts))
	log.Fatal(http.ListenAndServe("127.0.0.1:8000", nil))
}
