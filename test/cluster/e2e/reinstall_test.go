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
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// ensureInstalled puts the cluster back as the scenarios expect to find
// it, if an earlier run left it otherwise: the Knative Operator stopped,
// and the project installed with kubectl (test/cluster/project.sh), its
// adapter image in place. TestOperator and the Operator benchmark end
// with Eventing under the Operator and upstream's adapter or an
// override: a cluster torn down next (make test) need not pay for a
// reinstall, and a cluster kept for another run gets it here.
func ensureInstalled(ctx context.Context) error {
	operator, err := cluster.kube.AppsV1().Deployments(operatorNamespace).Get(ctx, operatorName, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		return fmt.Errorf("the Operator's Deployment: %w", err)
	case operator.Spec.Replicas == nil || *operator.Spec.Replicas != 0 || operator.Status.Replicas != 0:
		if err := setOperatorReplicas(ctx, 0); err != nil {
			return err
		}
	}
	why, err := notInstalled(ctx)
	if err != nil || why == "" {
		return err
	}
	fmt.Printf("e2e: %s: installing the project again (test/cluster/project.sh)\n", why)
	return runProjectInstall(ctx)
}

// notInstalled says what is not as project.sh installs it, or "".
func notInstalled(ctx context.Context) (string, error) {
	d, err := cluster.kube.AppsV1().Deployments(systemNamespace).Get(ctx, adapterName, metav1.GetOptions{})
	if err != nil {
		return "", fmt.Errorf("the adapter's Deployment: %w", err)
	}
	if image := d.Spec.Template.Spec.Containers[0].Image; !strings.HasPrefix(image, projectAdapterImage) {
		return "the adapter runs " + image, nil
	}
	if _, err := cluster.dynamic.Resource(ksvcGVR).Namespace(systemNamespace).Get(ctx, proxyService, metav1.GetOptions{}); apierrors.IsNotFound(err) {
		return "the proxy's Knative Service is gone", nil
	} else if err != nil {
		return "", fmt.Errorf("the proxy's Knative Service: %w", err)
	}
	if _, err := cluster.kube.AutoscalingV2().HorizontalPodAutoscalers(systemNamespace).Get(ctx, adapterHPAName, metav1.GetOptions{}); apierrors.IsNotFound(err) {
		return "the adapter's HPA is gone", nil
	} else if err != nil {
		return "", fmt.Errorf("the adapter's HPA: %w", err)
	}
	return "", nil
}

// setOperatorReplicas sets the Operator's replicas and waits, two
// minutes at most, until it runs as many, all ready.
func setOperatorReplicas(ctx context.Context, replicas int32) error {
	if err := scaleDeployment(ctx, operatorNamespace, operatorName, replicas); err != nil {
		return fmt.Errorf("the Operator: %w", err)
	}
	return nil
}

// scaleDeployment sets the replicas of deployment in namespace and waits,
// two minutes at most, until its status says they are all there and
// ready, and no other pod is left.
func scaleDeployment(ctx context.Context, namespace, deployment string, replicas int32) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	b, _ := json.Marshal(map[string]any{"spec": map[string]any{"replicas": replicas}})
	deploys := cluster.kube.AppsV1().Deployments(namespace)
	if _, err := deploys.Patch(ctx, deployment, types.MergePatchType, b, metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("replicas of %s/%s: %w", namespace, deployment, err)
	}
	var last string
	for {
		d, err := deploys.Get(ctx, deployment, metav1.GetOptions{})
		if err != nil {
			last = err.Error()
		} else {
			s := d.Status
			last = fmt.Sprintf("%d pods, %d ready, %d available", s.Replicas, s.ReadyReplicas, s.AvailableReplicas)
			if s.ObservedGeneration == d.Generation && s.Replicas == replicas && s.ReadyReplicas == replicas && s.AvailableReplicas == replicas {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s/%s not at %d replicas (%s): %w", namespace, deployment, replicas, last, ctx.Err())
		case <-time.After(time.Second):
		}
	}
}

// runProjectInstall runs test/cluster/project.sh, the install make
// cluster-up ends with.
func runProjectInstall(ctx context.Context) error {
	out, err := exec.CommandContext(ctx, filepath.Join(repoRoot, "test/cluster/project.sh")).CombinedOutput()
	if err != nil {
		return fmt.Errorf("test/cluster/project.sh: %w\n%s", err, out)
	}
	return nil
}
