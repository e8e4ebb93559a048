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

// Package e2e runs the project's end-to-end scenarios on the one-node
// Kubernetes + Knative cluster of test/cluster (`make cluster-up`, then
// `make e2e-cluster`): the install as docs/install.md makes it, events
// through the real path (Traefik, the activator or queue-proxy, the proxy,
// a sink Knative Service), the seed scenario with PingSources, the adapter's
// high availability and upstream's controller. Without the cluster every
// test fails: nothing is skipped.
package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// The installed project's names (config/).
const (
	systemNamespace = "knative-eventing"
	proxyService    = "event-forwarding-proxy"
	proxyHost       = proxyService + "." + systemNamespace + ".svc.cluster.local"
	proxyAudience   = "event-forwarding-proxy"
	adapterName     = "pingsource-mt-adapter"
	forwardingCM    = "config-event-forwarding"
)

// cluster is what every test uses: clients of the cluster's API server.
var cluster struct {
	config  *rest.Config
	kube    kubernetes.Interface
	dynamic dynamic.Interface
	// ingress is Traefik's cluster-local entry point (host:port), which
	// serves Knative's cluster-local routes, the proxy's among them.
	ingress string
}

// The scenarios share the cluster's one install, so they run one at a
// time, in file order, but for two: the seed scenario ends with the
// HPA's five-minute window before the proxy scales back in, and the
// adapter's scenario, which never scales the proxy, runs during that
// window. Both are parallel tests, so they run after every other
// scenario, and the adapter's waits until the seed scenario's load is
// over: its PingSources deleted, its settings restored, every event
// accounted for. The seed scenario sets running before its t.Parallel,
// which returns in the adapter's scenario only once every top-level test
// has started: a run of the adapter's scenario alone does not wait.
// seedDeadline bounds the seed scenario, its wait for the HPA included.
const seedDeadline = 30 * time.Minute

var seedRun = struct {
	running  bool
	loadOver chan struct{}
}{loadOver: make(chan struct{})}

// afterSeedLoad waits until the seed scenario's load is over, if the
// seed scenario runs; it fails the test if that takes longer than the
// seed scenario's own deadline.
func afterSeedLoad(t testing.TB) {
	t.Helper()
	if !seedRun.running {
		return
	}
	select {
	case <-seedRun.loadOver:
	case <-time.After(seedDeadline):
		t.Fatalf("the seed scenario's load did not end within %v", seedDeadline)
	}
}

func TestMain(m *testing.M) {
	if err := connect(); err != nil {
		fmt.Fprintf(os.Stderr, "e2e: %v\n(the cluster comes from `make cluster-up`)\n", err)
		os.Exit(1)
	}
	os.Exit(m.Run())
}

func connect() error {
	kubeconfig := os.Getenv("KUBECONFIG")
	if kubeconfig == "" {
		kubeconfig = filepath.Join("..", "..", "..", ".cache", "cluster", "kubeconfig")
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return fmt.Errorf("kubeconfig %s: %w", kubeconfig, err)
	}
	cfg.QPS, cfg.Burst = 50, 100
	cluster.config = cfg
	if cluster.kube, err = kubernetes.NewForConfig(cfg); err != nil {
		return err
	}
	if cluster.dynamic, err = dynamic.NewForConfig(cfg); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	svc, err := cluster.kube.CoreV1().Services("traefik").Get(ctx, "traefik-internal", metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("Traefik's cluster-local service: %w", err)
	}
	cluster.ingress = fmt.Sprintf("%s:%d", svc.Spec.ClusterIP, svc.Spec.Ports[0].Port)
	return nil
}

// podsOf lists the pods matching selector in namespace.
func podsOf(ctx context.Context, t testing.TB, namespace, selector string) []corev1.Pod {
	t.Helper()
	list, err := cluster.kube.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		t.Fatalf("pods %s in %s: %v", selector, namespace, err)
	}
	return list.Items
}

// ready reports whether a pod is Running with every container ready and
// is not being deleted.
func ready(p corev1.Pod) bool {
	if p.DeletionTimestamp != nil || p.Status.Phase != corev1.PodRunning {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// eventually polls cond every interval until it returns true, failing the
// test with what describe says once within has passed.
func eventually(t testing.TB, within, interval time.Duration, describe func() string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %v: %s", within, describe())
		}
		time.Sleep(interval)
	}
}
