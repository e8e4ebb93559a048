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
// with the pod's service-account token, the Running pods annotated
// prometheus.io/scrape: "true" (port prometheus.io/port, path
// prometheus.io/path), each target labelled with its namespace and pod.
package main

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"log"
	"net"
	"net/http"
	"os"
	"time"
)

const sa = "/var/run/secrets/kubernetes.io/serviceaccount/"

type podList struct {
	Items []struct {
		Metadata struct {
			Name        string            `json:"name"`
			Namespace   string            `json:"namespace"`
			Annotations map[string]string `json:"annotations"`
		} `json:"metadata"`
		Status struct {
			PodIP string `json:"podIP"`
		} `json:"status"`
	} `json:"items"`
}

type group struct {
	Targets []string          `json:"targets"`
	Labels  map[string]string `json:"labels"`
}

func main() {
	ca, err := os.ReadFile(sa + "ca.crt")
	if err != nil {
		log.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca)
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{Proxy: nil, TLSClientConfig: &tls.Config{RootCAs: pool}}}
	api := "https://" + net.JoinHostPort(os.Getenv("KUBERNETES_SERVICE_HOST"), os.Getenv("KUBERNETES_SERVICE_PORT")) +
		"/api/v1/pods?fieldSelector=status.phase%3DRunning"
	http.HandleFunc("/targets", func(w http.ResponseWriter, r *http.Request) {
		token, err := os.ReadFile(sa + "token") // re-read: the kubelet rotates it
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		req, _ := http.NewRequestWithContext(r.Context(), http.MethodGet, api, nil)
		req.Header.Set("Authorization", "Bearer "+string(token))
		resp, err := client.Do(req)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		var pods podList
		if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&pods) != nil {
			http.Error(w, "listing pods: "+resp.Status, http.StatusBadGateway)
			return
		}
		groups := []group{}
		for _, p := range pods.Items {
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
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(groups)
	})
	log.Fatal(http.ListenAndServe("127.0.0.1:8000", nil))
}
