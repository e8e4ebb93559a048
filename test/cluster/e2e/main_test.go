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
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
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
	adapterSelector = "sources.knative.dev/role=adapter"
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

func TestMain(m *testing.M) {
	if err := allowAllScenariosAtOnce(); err != nil {
		fmt.Fprintf(os.Stderr, "e2e: %v\n", err)
		os.Exit(2)
	}
	if err := connect(); err != nil {
		fmt.Fprintf(os.Stderr, "e2e: %v\n(the cluster comes from `make cluster-up`)\n", err)
		os.Exit(1)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	err := ensureInstalled(ctx)
	cancel()
	if err != nil {
		fmt.Fprintf(os.Stderr, "e2e: %v\n", err)
		os.Exit(1)
	}
	os.Exit(m.Run())
}

// scenarioSlots is how many parallel tests go test may run at once here:
// more than there are scenarios. Every scenario is a parallel test, and
// some wait for others (stages_test.go): at go test's default (GOMAXPROCS,
// 2 on this machine) two waiting scenarios would hold both slots while the
// ones they wait for never start.
const scenarioSlots = 32

func allowAllScenariosAtOnce() error {
	flag.Parse()
	f := flag.Lookup("test.parallel")
	if n, err := strconv.Atoi(f.Value.String()); err == nil && n >= scenarioSlots {
		return nil
	}
	return flag.Set("test.parallel", strconv.Itoa(scenarioSlots))
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
