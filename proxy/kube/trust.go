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

package kube

import (
	"context"
	"errors"

	"go.uber.org/zap"
	"k8s.io/client-go/kubernetes"

	"knative.dev/event-forwarding-proxy/config"
	"knative.dev/event-forwarding-proxy/delivery"
	"knative.dev/event-forwarding-proxy/delivery/trustbundles"
)

// WatchTrustBundles returns the roots for https destinations: the system
// roots plus the trust bundles in cfg.TrustBundlesNamespace, watched with
// the process's Kubernetes credentials until ctx ends. It returns once
// the first bundles are loaded; pass the roots to proxy.WithTrustRoots.
func WatchTrustBundles(ctx context.Context, cfg *config.Proxy, logger *zap.SugaredLogger) (*delivery.TrustRoots, error) {
	rc, err := restConfig()
	if err != nil {
		return nil, err
	}
	if rc == nil {
		return nil, errors.New("FORWARD_TRUST_BUNDLES_NAMESPACE needs Kubernetes credentials: KUBECONFIG, or a pod's service account")
	}
	kc, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, err
	}
	roots := delivery.NewTrustRoots()
	if err := trustbundles.Watch(ctx, kc, cfg.TrustBundlesNamespace, roots, logger); err != nil {
		return nil, err
	}
	return roots, nil
}
