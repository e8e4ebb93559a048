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
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// heldBackPolicy refuses every new Pod of the adapter: a replica the HPA
// adds cannot start, as one that cannot be scheduled, and the Deployment
// has an unavailable replica until the policy goes.
const heldBackPolicy = `
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: e2e-adapter-replica-held-back}
spec:
  failurePolicy: Fail
  matchConstraints:
    namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: knative-eventing}}
    resourceRules:
    - apiGroups: [""]
      apiVersions: [v1]
      operations: [CREATE]
      resources: [pods]
  matchConditions:
  - name: adapter
    expression: "has(object.metadata.labels) && object.metadata.labels.exists(k, k == 'sources.knative.dev/role' && object.metadata.labels[k] == 'adapter')"
  validations:
  - expression: "false"
    message: "e2e: this adapter replica is held back"
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: e2e-adapter-replica-held-back}
spec:
  policyName: e2e-adapter-replica-held-back
  validationActions: [Deny]
`

// holdBackAdapterPods installs heldBackPolicy, waits until the API server
// enforces it (a dry-run Pod with the adapter's labels is refused), and
// returns what removes it (also run at cleanup).
func holdBackAdapterPods(ctx context.Context, t *testing.T) (release func()) {
	t.Helper()
	probe := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "e2e-held-back-", Labels: map[string]string{"sources.knative.dev/role": "adapter"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "probe", Image: "dev.local/pause:v1"}}},
	}
	refused := func(ctx context.Context) (bool, error) {
		_, err := cluster.kube.CoreV1().Pods(systemNamespace).Create(ctx, probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return err != nil && strings.Contains(err.Error(), "held back"), err
	}
	var last error
	apply(ctx, t, "", heldBackPolicy)
	release = sync.OnceFunc(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		for _, resource := range []string{"validatingadmissionpolicybindings", "validatingadmissionpolicies"} {
			gvr := schema.GroupVersionResource{Group: "admissionregistration.k8s.io", Version: "v1", Resource: resource}
			err := cluster.dynamic.Resource(gvr).Delete(ctx, "e2e-adapter-replica-held-back", metav1.DeleteOptions{})
			if err != nil && !apierrors.IsNotFound(err) {
				t.Errorf("removing the held-back policy: %v", err)
			}
		}
		// Until the API server lets adapter Pods in again.
		eventually(t, time.Minute, 500*time.Millisecond, func() string { return fmt.Sprintf("the held-back policy still enforced: %v", last) }, func() bool {
			var held bool
			held, last = refused(ctx)
			return !held
		})
	})
	t.Cleanup(release)
	eventually(t, time.Minute, 500*time.Millisecond, func() string { return fmt.Sprintf("the held-back policy not enforced: %v", last) }, func() bool {
		var held bool
		held, last = refused(ctx)
		return held
	})
	return release
}
