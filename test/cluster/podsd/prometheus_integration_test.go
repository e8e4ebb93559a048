//go:build integration

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
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
)

// requireTool returns the path of a Prometheus binary. Never a skip: the
// Makefile installs it.
func requireTool(t *testing.T, name string) string {
	t.Helper()
	path, err := exec.LookPath(name)
	if err != nil {
		t.Fatalf("%s is not on PATH: run `make test` (or `make prometheus-tools`), which installs Debian's prometheus package (prometheus and promtool)", name)
	}
	return path
}

// metricsServer serves text as /metrics; it returns its port.
func metricsServer(t *testing.T, text string) int32 {
	t.Helper()
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		io.WriteString(w, text)
	}))
	t.Cleanup(s.Close)
	port, err := strconv.Atoi(s.URL[strings.LastIndex(s.URL, ":")+1:])
	if err != nil {
		t.Fatal(err)
	}
	return int32(port)
}

// TestPrometheusFindsTheAdapter runs Debian's Prometheus (the cluster's)
// with the prometheus.yml monitoring.sh makes, promtool's check first, and
// podsd in front of a fake API server listing the adapter's pod (from
// Eventing's Deployment), a proxy pod and Prometheus's own, all on
// loopback. Prometheus must scrape each pod once: the adapter by the kit's
// job, with the kit's labels, the annotated pods by the pods job.
func TestPrometheusFindsTheAdapter(t *testing.T) {
	prometheus, promtool := requireTool(t, "prometheus"), requireTool(t, "promtool")
	dir := t.TempDir()
	config := clusterPrometheusConfig(t)
	if out, err := exec.Command(promtool, "check", "config", writeFile(t, dir, "checked.yml", config)).CombinedOutput(); err != nil {
		t.Fatalf("promtool check config: %v\n%s", err, out)
	}

	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	promAddr := l.Addr().String()
	l.Close()
	_, promPort, _ := net.SplitHostPort(promAddr)

	d := upstreamAdapter(t)
	pods := clusterPods(t, d, "127.0.0.1", metricsServer(t, "kn_forward_mtping_leases_held 1\n"))
	adapterPod := pods[0].Metadata.Name
	pods[1].Metadata.Annotations["prometheus.io/port"] = promPort
	pods[2].Metadata.Annotations["prometheus.io/port"] = strconv.Itoa(int(metricsServer(t, "kn_forward_capacity 900\n")))
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ns := "" // every namespace: /api/v1/pods
		if rest, ok := strings.CutPrefix(r.URL.Path, "/api/v1/namespaces/"); ok {
			ns, _, _ = strings.Cut(rest, "/")
		}
		list := podList{Items: []pod{}}
		for _, p := range pods {
			if ns == "" || p.Metadata.Namespace == ns {
				list.Items = append(list.Items, p)
			}
		}
		json.NewEncoder(w).Encode(list)
	}))
	t.Cleanup(api.Close)
	sd := lister{api: api.URL, client: api.Client(), token: func() ([]byte, error) { return []byte("t"), nil }}
	mux := http.NewServeMux()
	mux.Handle("/targets", sd.handler(annotated))
	mux.Handle("/pods", sd.handler(containerPorts))
	podsd := httptest.NewServer(mux)
	t.Cleanup(podsd.Close)

	// podsd's address, and every interval at 1 s.
	config = bytes.ReplaceAll(config, []byte("http://127.0.0.1:8000"), []byte(podsd.URL))
	config = bytes.ReplaceAll(config, []byte("interval: 10s"), []byte("interval: 1s"))
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, prometheus, "--config.file="+writeFile(t, dir, "prometheus.yml", config),
		"--storage.tsdb.path="+filepath.Join(dir, "data"), "--web.listen-address="+promAddr, "--log.level=warn")
	var logs bytes.Buffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		cmd.Wait()
		if t.Failed() {
			t.Logf("prometheus:\n%s", logs.String())
		}
	})

	want := []string{
		fmt.Sprintf("pingsource-mt-adapter %s %s dispatcher 1", d.Namespace, adapterPod),
		fmt.Sprintf("pods %s %s  1", d.Namespace, pods[2].Metadata.Name),
		fmt.Sprintf("pods monitoring %s  1", pods[1].Metadata.Name),
	}
	var got []string
	for deadline := time.Now().Add(60 * time.Second); ; {
		got = query(t, "http://"+promAddr, "up")
		if strings.Join(got, "\n") == strings.Join(want, "\n") || time.Now().After(deadline) {
			break
		}
		select {
		case <-time.After(500 * time.Millisecond):
		case <-t.Context().Done():
		}
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("up: got\n%s\nwant (job namespace pod container value)\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if got := query(t, "http://"+promAddr, "kn_forward_mtping_leases_held"); len(got) != 1 || got[0] != want[0] {
		t.Errorf("kn_forward_mtping_leases_held: %v, want %s", got, want[0])
	}
}

// query evaluates expr and returns each sample as "job namespace pod
// container value", sorted; an error before Prometheus is ready is no
// sample.
func query(t *testing.T, prom, expr string) []string {
	t.Helper()
	resp, err := http.Get(prom + "/api/v1/query?query=" + url.QueryEscape(expr))
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	var body struct {
		Data struct {
			Result []struct {
				Metric map[string]string `json:"metric"`
				Value  [2]any            `json:"value"`
			} `json:"result"`
		} `json:"data"`
	}
	if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&body) != nil {
		return nil
	}
	var out []string
	for _, r := range body.Data.Result {
		m := r.Metric
		out = append(out, fmt.Sprintf("%s %s %s %s %v", m["job"], m["namespace"], m["pod"], m["container"], r.Value[1]))
	}
	sort.Strings(out)
	return out
}

func writeFile(t *testing.T, dir, name string, b []byte) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
