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

// Package monitoring checks the operator's kit in config/monitoring: the
// Prometheus rules (with promtool), the PrometheusRule generated from them,
// the Grafana dashboard, and every query in them against the metrics the
// proxy binary and the PingSource adapter binary (against a real API
// server) really export, scraped by a real Prometheus.
//
// The checks of files alone are unit tests. Those that run promtool,
// Prometheus or the proxy binary carry the integration build tag (`make
// integration`); promtool and prometheus must then be on PATH, which `make
// integration` ensures (Debian's prometheus package), and kube-apiserver and
// etcd in .cache/bin (`make tools`, test/apiserver).
package monitoring

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// repoRoot is the repository root, seen from this package's directory.
const repoRoot = "../.."

// Files under test, relative to the repository root.
const (
	rulesFile          = "config/monitoring/rules.yaml"
	prometheusRuleFile = "config/monitoring/prometheusrule.yaml"
	dashboardFile      = "config/monitoring/dashboard.json"
	// adapterFile is the async profile's Prometheus Adapter rule (owned
	// with the async profile; the tests check it agrees with the rules).
	adapterFile = "config/async/500-prometheus-adapter.yaml"
)

// Labels the generated scrape configuration gives the proxy target, as
// Kubernetes service discovery gives the pod's: the proxy's own namespace
// label clashes with the first and becomes exported_namespace.
const (
	targetNamespace = "knative-eventing"
	targetPod       = "event-forwarding-proxy-00001-deployment-5d9c-e2e"
	scrapeJob       = "event-forwarding-proxy"
)

// The PingSource adapter: its Deployment, Eventing's own (a file of the
// eventing module; the install replaces only the image of its container
// upstreamContainer), and the labels the kit's scrape job for it gives its
// target (its namespace is the adapter's SYSTEM_NAMESPACE).
const (
	upstreamAdapterFile = "config/core/deployments/pingsource-mt-adapter.yaml"
	upstreamContainer   = "dispatcher"
	mtpingNamespace     = "knative-eventing"
	mtpingPod           = "pingsource-mt-adapter-5d9c8b7f4-e2e"
	mtpingScrapeJob     = "pingsource-mt-adapter"
)

// repoFile returns the path of a repository file, as the tests see it.
func repoFile(name string) string {
	return filepath.Join(repoRoot, filepath.FromSlash(name))
}

// readRepoFile reads a repository file, failing the test if it cannot.
func readRepoFile(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(repoFile(name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// readEventingFile reads a file of the knative.dev/eventing module this
// project builds against (go.mod's version, in the module cache), failing
// the test if it cannot.
func readEventingFile(t *testing.T, name string) []byte {
	t.Helper()
	cmd := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "knative.dev/eventing")
	cmd.Dir = repoRoot
	out, err := cmd.Output()
	if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
		t.Fatalf("go list knative.dev/eventing: %v\n%s", err, ee.Stderr)
	} else if err != nil {
		t.Fatalf("go list knative.dev/eventing: %v", err)
	}
	dir := strings.TrimSpace(string(out))
	if dir == "" {
		t.Fatal("knative.dev/eventing is not in the module cache: run go mod download")
	}
	b, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(name)))
	if err != nil {
		t.Fatal(err)
	}
	return b
}
