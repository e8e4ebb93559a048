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
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"knative.dev/event-forwarding-proxy/adapter/kube"
)

// heartbeatsManifest runs cmd/heartbeats, the sample source on eventing's
// adapter/v2, in a test's namespace with the least RBAC it needs: its
// sources are labelled ConfigMaps in any namespace, config-event-forwarding
// is in knative-eventing, it reads its own Pod, records Events about it and mints
// its own token for the proxy. Its metrics are adapter/v2's Prometheus
// exporter on 9090, as upstream's K_OBSERVABILITY_CONFIG asks.
const heartbeatsManifest = `
apiVersion: v1
kind: ServiceAccount
metadata: {name: heartbeats, namespace: "{{NAMESPACE}}"}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: "{{NAMESPACE}}-heartbeats"}
rules:
- {apiGroups: [""], resources: [configmaps], verbs: [get, list, watch]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: "{{NAMESPACE}}-heartbeats"}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: "{{NAMESPACE}}-heartbeats"}
subjects: [{kind: ServiceAccount, name: heartbeats, namespace: "{{NAMESPACE}}"}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: heartbeats, namespace: "{{NAMESPACE}}"}
rules:
- {apiGroups: [""], resources: [pods], verbs: [get]}
- {apiGroups: [""], resources: [events], verbs: [create, patch]}
- {apiGroups: [""], resources: [serviceaccounts/token], resourceNames: [heartbeats], verbs: [create]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: heartbeats, namespace: "{{NAMESPACE}}"}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: heartbeats}
subjects: [{kind: ServiceAccount, name: heartbeats, namespace: "{{NAMESPACE}}"}]
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: heartbeats, namespace: "{{NAMESPACE}}"}
spec:
  replicas: 1
  selector: {matchLabels: {app: heartbeats}}
  template:
    metadata: {labels: {app: heartbeats}}
    spec:
      serviceAccountName: heartbeats
      containers:
      - name: heartbeats
        image: dev.local/heartbeats:v1
        imagePullPolicy: IfNotPresent
        env:
        - {name: NAMESPACE, valueFrom: {fieldRef: {fieldPath: metadata.namespace}}}
        - {name: POD_NAME, valueFrom: {fieldRef: {fieldPath: metadata.name}}}
        - {name: SYSTEM_NAMESPACE, value: knative-eventing}
        - {name: K_OBSERVABILITY_CONFIG, value: '{"metrics":{"protocol":"prometheus"}}'}
        # adapter/v2's Prometheus server defaults to this port, yet in this
        # pod it listened only once the variable was set (seen here, cause
        # not found).
        - {name: METRICS_PROMETHEUS_PORT, value: "9090"}
        ports: [{name: metrics, containerPort: 9090}]
        resources: {requests: {cpu: 10m, memory: 32Mi}}
        securityContext:
          runAsNonRoot: true
          allowPrivilegeEscalation: false
          capabilities: {drop: [ALL]}
          seccompProfile: {type: RuntimeDefault}
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: heartbeat
  namespace: "{{NAMESPACE}}"
  labels: {sources.event-forwarding.knative.dev/heartbeats: "true"}
data:
  sink: http://e2esink.{{NAMESPACE}}.svc.cluster.local/heartbeat
  period: 1s
`

// TestHeartbeats: a source built on adapter/v2 with one option forwards
// through the proxy in the cluster, authenticated with its own token, once
// config-event-forwarding puts its sources over the threshold, and its Pod
// shows the route (label and Event) where kubectl looks.
func TestHeartbeats(t *testing.T) {
	heartbeatsStage.begin(t) // before t.Parallel: see stages_test.go
	t.Parallel()
	after(t, upgradeStage) // its sink made beside the OIDC scenario
	ctx := t.Context()
	ns := newNamespace(ctx, t, "heartbeats")
	s := newSink(ctx, t, ns)
	after(t, oidcStage)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		// The source first: while its namespace terminates, another
		// run's adapter would still serve it, and the proxy refuses that
		// adapter a sink outside its own namespace.
		_ = cluster.kube.CoreV1().ConfigMaps(ns).Delete(ctx, "heartbeat", metav1.DeleteOptions{})
		name := ns + "-heartbeats"
		_ = cluster.kube.RbacV1().ClusterRoleBindings().Delete(ctx, name, metav1.DeleteOptions{})
		_ = cluster.kube.RbacV1().ClusterRoles().Delete(ctx, name, metav1.DeleteOptions{})
	})
	apply(ctx, t, ns, heartbeatsManifest)
	var pod corev1.Pod
	eventually(t, 2*time.Minute, time.Second, func() string { return "the heartbeats pod is not ready" }, func() bool {
		for _, p := range podsOf(ctx, t, ns, "app=heartbeats") {
			if ready(p) {
				pod = p
				return true
			}
		}
		return false
	})
	heartbeats := func() int {
		n := 0
		for _, r := range s.records(ctx, t) {
			if r.Path == "/heartbeat" {
				n++
			}
		}
		return n
	}
	n := 0
	eventually(t, time.Minute, time.Second, func() string { return fmt.Sprintf("%d heartbeats at the sink", n) }, func() bool {
		n = heartbeats()
		return n >= 2
	})

	// adapter/v2 starts its Prometheus server on its own schedule.
	var scrapeErr error
	eventually(t, time.Minute, time.Second, func() string { return fmt.Sprint(scrapeErr) }, func() bool {
		_, scrapeErr = tryScrape(ctx, pod, adapterPort)
		return scrapeErr == nil
	})
	setForwardingKey(ctx, t, "event-forwarding-threshold", "0")
	before := senderCounts(ctx, t, []corev1.Pod{pod})[pod.Name]
	var now map[string]float64
	eventually(t, time.Minute, time.Second, func() string { return fmt.Sprintf("sends %v, from %v", now, before) }, func() bool {
		now = senderCounts(ctx, t, []corev1.Pod{pod})[pod.Name]
		return now["proxy/delivered"]-before["proxy/delivered"] >= 3
	})
	if now["fallbacks"] != before["fallbacks"] {
		t.Errorf("%v heartbeats fell back to direct: the proxy refused them", now["fallbacks"]-before["fallbacks"])
	}
	from := heartbeats()
	eventually(t, time.Minute, time.Second, func() string {
		return fmt.Sprintf("%d heartbeats at the sink since forwarding, want 3", heartbeats()-from)
	}, func() bool {
		return heartbeats()-from >= 3
	})

	// The Event carries the Pod's UID (kubectl describe pod finds it by
	// that), which the source read with its get on pods.
	eventually(t, time.Minute, time.Second, func() string { return "no ForwardingThroughProxy Event about the Pod's UID" }, func() bool {
		evs, err := cluster.kube.CoreV1().Events(ns).List(ctx, metav1.ListOptions{
			FieldSelector: "involvedObject.name=" + pod.Name + ",involvedObject.uid=" + string(pod.UID) + ",reason=" + kube.ReasonForwardingThroughProxy})
		return err == nil && len(evs.Items) > 0
	})
}
