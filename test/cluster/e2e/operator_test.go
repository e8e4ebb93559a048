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

package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	kle "knative.dev/pkg/leaderelection"

	"knative.dev/event-forwarding-proxy/adapter/mtping"
)

var knativeEventingGVR = schema.GroupVersionResource{Group: "operator.knative.dev", Version: "v1beta1", Resource: "knativeeventings"}

// The Operator flavour's KnativeEventing, as an operator adopting the
// Operator writes it for the Eventing already running: the release the
// cluster runs (the Knative release of the eventing module, v0.X.Y being
// 1.(X-27).Y), Eventing's core only, since this cluster builds no channel
// or broker images, every image from the cluster's own, tagged {{TAG}}
// (${NAME} is the last part of the release's image name), and no pods
// for what is not built. The project's adapter image is added by
// docs/install.md's Operator block, as a key of spec.registry.override.
const knativeEventingManifest = `
apiVersion: operator.knative.dev/v1beta1
kind: KnativeEventing
metadata: {name: knative-eventing, namespace: knative-eventing}
spec:
  version: "{{RELEASE}}"
  manifests:
    - URL: /var/run/ko/knative-eventing/${VERSION}/1-eventing-crds.yaml
    - URL: /var/run/ko/knative-eventing/${VERSION}/2-eventing-core.yaml
  registry:
    default: dev.local/eventing-${NAME}:{{TAG}}
  workloads:
    - {name: job-sink, replicas: 0}
    - {name: request-reply, replicas: 0}
`

// The scenario's sources fire every 2 s, as each of its steps waits for
// two ticks; the benchmark's every 5 s, as docs/benchmarks.md reports.
const (
	operatorSources       = 10
	operatorSchedule      = "*/2 * * * * *"
	operatorTick          = 2 * time.Second
	operatorBenchSchedule = "*/5 * * * * *"
	operatorBenchTick     = 5 * time.Second
	operatorNamespace     = "knative-operator"
	operatorName          = "knative-operator"
)

// operatorTicks are the operator sources' ticks, firing every every, as
// checkStepTicks counts them.
func operatorTicks(every time.Duration) tickedSources {
	return tickedSources{name: "/pingsources/op-", sources: operatorSources, every: every}
}

const operatorSourceManifest = `
apiVersion: sources.knative.dev/v1
kind: PingSource
metadata: {name: "{{NAME}}", namespace: "{{NAMESPACE}}"}
spec:
  schedule: "{{SCHEDULE}}"
  data: '{"operator":"{{NAME}}"}'
  sink:
    ref: {apiVersion: serving.knative.dev/v1, kind: Service, name: e2esink}
    uri: /operator
`

// TestOperator runs the drop-in on Eventing managed by the Knative
// Operator (test/cluster/operator.sh installs it, stopped): the Operator
// takes the running Eventing over through a KnativeEventing; a change of
// the Operator's images (what an Eventing upgrade through it does) puts
// upstream's adapter image back over a patched Deployment;
// docs/install.md's Operator block puts the project's image in the
// KnativeEventing; the Operator's next change of every image rolls out
// Eventing but not the adapter; the Operator's way back puts upstream's image
// back. Ten PingSources fire every 2 s throughout: no tick fires twice,
// each step's ticks are logged. The Operator runs for this scenario only
// (stopOperator).
func TestOperator(t *testing.T) {
	t.Parallel()
	// The sources are made ready, idle, during the seed load (as the
	// adapter scenario's, before its 2,000), and fire, to a sink of their
	// own, once it is over.
	after(t, upgradeStage, oidcStage, heartbeatsStage, seedSourcesStage)
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Minute)
	defer cancel()
	s := newSink(ctx, t, newNamespace(ctx, t, "operator"))
	addOperatorSources(ctx, t, s, idleSchedule)
	after(t, seedLoadStage)
	for i := range operatorSources {
		setSchedule(ctx, t, s.namespace, fmt.Sprintf("op-%d", i), operatorSchedule)
	}
	after(t, installStage, realPathStage, oidcStage, heartbeatsStage, adapterStage)
	buckets := mtping.Buckets(kle.ComponentConfig{Component: mtping.Component, Buckets: adapterBuckets})
	moves := recordMoves(ctx, t, buckets)
	t.Cleanup(func() { stopOperator(t) })
	scaleOperator(ctx, t, 1)
	steps := newStepLog()
	firing := func(t *testing.T, step string) { t.Helper(); operatorSourcesFiring(ctx, t, s, step) }
	firing(t, "installed with kubectl")
	start := time.Now()

	t.Run("the Operator takes Eventing over", func(t *testing.T) {
		steps.mark("takeover")
		apply(ctx, t, systemNamespace, knativeEventing(t, eventingVersion(t), eventingVersion(t)))
		waitKnativeEventing(ctx, t)
		// The Operator merges its manifest three ways, from what was last
		// applied: the adapter keeps the project's image if kubectl last
		// applied the image the Operator applies, and gets the Operator's
		// otherwise (after an Eventing upgrade with kubectl, say). Which
		// one does not matter here; the next step makes it the Operator's.
		t.Logf("the adapter runs %s", adapterImage(ctx, t))
		firing(t, "under the Operator")
		checkPreflightRefusesKubectl(t)
	})

	t.Run("an image change by the Operator undoes a patch", func(t *testing.T) {
		// What an Eventing upgrade through the Operator does to every
		// image: here the same binaries under a second tag
		// (test/cluster/eventing.sh).
		steps.mark("Operator image change")
		apply(ctx, t, systemNamespace, knativeEventing(t, eventingVersion(t), eventingVersion(t)+"-next"))
		waitKnativeEventing(ctx, t)
		waitAdapter(ctx, t, upstreamAdapterImage+eventingVersion(t)+"-next", adapterAccount, 0)
		firing(t, "upstream's adapter, under the Operator")
	})

	t.Run("docs/install.md's Operator block", func(t *testing.T) {
		steps.mark("Operator install")
		docBlock(t, "operator-install")
		waitAdapter(ctx, t, projectAdapterImage, adapterAccount, 0)
		waitKnativeEventing(ctx, t)
		firing(t, "the project's adapter, under the Operator")
	})

	t.Run("the override survives the Operator's image changes", func(t *testing.T) {
		before := templateHashes(adapterPods(ctx, t))
		from := time.Now()
		steps.mark("Operator image change back")
		apply(ctx, t, systemNamespace, knativeEventing(t, eventingVersion(t), eventingVersion(t)))
		waitKnativeEventing(ctx, t)
		waitDeploymentImage(ctx, t, "eventing-controller", "dev.local/eventing-controller:"+eventingVersion(t))
		waitAdapter(ctx, t, projectAdapterImage, adapterAccount, 0)
		firing(t, "after the Operator's rollout of Eventing")
		// No rollout: the pods run the same template (the HPA may add or
		// remove some meanwhile).
		if after := templateHashes(adapterPods(ctx, t)); !slices.Equal(after, before) {
			t.Errorf("the adapter rolled out: pod templates %v, then %v", before, after)
		}
		checkTicks(t, s.records(ctx, t), from, buckets, moves.byBucket(), operatorTick)
	})

	t.Run("the Operator's way back", func(t *testing.T) {
		steps.mark("Operator way back")
		docBlock(t, "operator-rollback")
		waitAdapter(ctx, t, upstreamAdapterImage+eventingVersion(t), adapterAccount, 0)
		waitKnativeEventing(ctx, t)
		if _, err := cluster.kube.AutoscalingV2().HorizontalPodAutoscalers(systemNamespace).Get(ctx, adapterHPAName, metav1.GetOptions{}); err == nil {
			t.Error("the adapter's HPA is still there after the way back")
		}
		firing(t, "upstream's adapter, after the way back")
	})

	checkStepTicks(ctx, t, s, operatorTicks(operatorTick), steps, start)
}

// addOperatorSources makes operatorSources PingSources on schedule, to
// s, in its namespace, and waits until they are Ready.
func addOperatorSources(ctx context.Context, t testing.TB, s *sink, schedule string) {
	t.Helper()
	m := strings.ReplaceAll(operatorSourceManifest, "{{SCHEDULE}}", schedule)
	for i := range operatorSources {
		apply(ctx, t, s.namespace, strings.ReplaceAll(m, "{{NAME}}", fmt.Sprintf("op-%d", i)))
	}
	for i := range operatorSources {
		// Eventing readies sources one after the other: these may come
		// after the adapter scenario's 2,000.
		waitReady(ctx, t, pingSourceGVR, s.namespace, fmt.Sprintf("op-%d", i), scaleReadyBound)
	}
}

// operatorSourcesFiring waits until each of the operator sources has
// fired twice since the call.
func operatorSourcesFiring(ctx context.Context, t testing.TB, s *sink, step string) {
	t.Helper()
	from := time.Now()
	eventually(t, 2*time.Minute, time.Second, func() string { return step + ": the PingSources stopped firing" }, func() bool {
		by := ticksBySource(s.records(ctx, t))
		for _, tks := range by {
			if n := len(tks); n < 2 || !tks[n-2].After(from) {
				return false
			}
		}
		return len(by) == operatorSources
	})
}

// knativeEventing is the KnativeEventing of the Knative release of
// eventing module version, with every image of Eventing's tagged tag.
// Applied server-side, it leaves alone the keys others own
// (docs/install.md's override).
func knativeEventing(t testing.TB, version, tag string) string {
	t.Helper()
	return strings.NewReplacer("{{RELEASE}}", knativeRelease(t, version), "{{TAG}}", tag).Replace(knativeEventingManifest)
}

// adapterImage is the image the adapter's Deployment names.
func adapterImage(ctx context.Context, t testing.TB) string {
	t.Helper()
	d, err := cluster.kube.AppsV1().Deployments(systemNamespace).Get(ctx, adapterName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return d.Spec.Template.Spec.Containers[0].Image
}

// waitDeploymentImage waits until Deployment name of Eventing runs image
// on every replica.
func waitDeploymentImage(ctx context.Context, t testing.TB, name, image string) {
	t.Helper()
	var last string
	eventually(t, 3*time.Minute, time.Second, func() string { return name + ": " + last }, func() bool {
		d, err := cluster.kube.AppsV1().Deployments(systemNamespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			last = err.Error()
			return false
		}
		last = fmt.Sprintf("image %s, %d/%d updated and ready", d.Spec.Template.Spec.Containers[0].Image, d.Status.UpdatedReplicas, d.Status.ReadyReplicas)
		return d.Spec.Template.Spec.Containers[0].Image == image && d.Status.UpdatedReplicas == *d.Spec.Replicas &&
			d.Status.ReadyReplicas == *d.Spec.Replicas && d.Status.Replicas == *d.Spec.Replicas
	})
}

// knativeRelease is the Knative release of an eventing module version:
// v0.X.Y is 1.(X-27).Y.
func knativeRelease(t testing.TB, version string) string {
	t.Helper()
	var minor, patch int
	if _, err := fmt.Sscanf(version, "v0.%d.%d", &minor, &patch); err != nil {
		t.Fatalf("eventing version %s: %v", version, err)
	}
	return fmt.Sprintf("1.%d.%d", minor-27, patch)
}

// waitKnativeEventing waits until the Operator has reconciled the
// KnativeEventing's last change and reports it Ready.
func waitKnativeEventing(ctx context.Context, t testing.TB) {
	t.Helper()
	var last string
	eventually(t, 5*time.Minute, 2*time.Second, func() string { return "KnativeEventing: " + last }, func() bool {
		u, err := cluster.dynamic.Resource(knativeEventingGVR).Namespace(systemNamespace).Get(ctx, "knative-eventing", metav1.GetOptions{})
		if err != nil {
			last = err.Error()
			return false
		}
		last = fmt.Sprintf("generation %d, %v", u.GetGeneration(), u.Object["status"])
		observed, _, _ := unstructured.NestedInt64(u.Object, "status", "observedGeneration")
		return observed == u.GetGeneration() && conditionTrue(u, "Ready")
	})
}

// stopOperator stops the Operator, so that the scenarios of a next run
// on this cluster find Eventing under kubectl alone. Its KnativeEventing
// stays: deleting it would delete Eventing, or through the owner
// references the Operator set, have the garbage collector do so. The
// project is installed again by that run's start (ensureInstalled), not
// here: make test tears the cluster down next.
func stopOperator(t testing.TB) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	scaleOperator(ctx, t, 0)
}

// scaleOperator sets the Operator's replicas and waits for them.
func scaleOperator(ctx context.Context, t testing.TB, replicas int32) {
	t.Helper()
	if err := setOperatorReplicas(ctx, replicas); err != nil {
		t.Fatal(err)
	}
}

// templateHashes are the pod templates pods run (their ReplicaSets'
// pod-template-hash), sorted, each once.
func templateHashes(pods []corev1.Pod) []string {
	var out []string
	for _, p := range pods {
		out = append(out, p.Labels["pod-template-hash"])
	}
	slices.Sort(out)
	return slices.Compact(out)
}
