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
	"fmt"
	"time"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"knative.dev/pkg/configmap/informer"

	"knative.dev/event-forwarding-proxy/config"
)

// ForwardingSetter receives each good configuration; *adapter.Sender is one.
type ForwardingSetter interface {
	SetForwarding(config.Forwarding)
}

// WatchForwarding applies config-event-forwarding in namespace to s, now
// and on every change, until ctx ends. It uses knative.dev/pkg's informed
// ConfigMap watcher; an absent (or deleted) ConfigMap means forwarding off.
// A ConfigMap with a bad value is logged as an error naming the key, and
// the last good configuration stays: a typo never crashes the adapter nor
// silently switches its route. It returns once the first configuration is
// applied, or an error when the watch cannot start within a minute (RBAC:
// the caller needs get, list and watch on configmaps in namespace); the
// watch then keeps trying until ctx ends.
func WatchForwarding(ctx context.Context, kc kubernetes.Interface, namespace string, s ForwardingSetter, logger *zap.SugaredLogger) error {
	return watchForwarding(ctx, kc, namespace, s, logger, time.Minute)
}

func watchForwarding(ctx context.Context, kc kubernetes.Interface, namespace string, s ForwardingSetter, logger *zap.SugaredLogger, within time.Duration) error {
	if logger == nil {
		logger = zap.NewNop().Sugar()
	}
	w := informer.NewInformedWatcher(kc, namespace)
	w.WatchWithDefault(corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: config.ForwardingConfigName, Namespace: namespace}},
		func(cm *corev1.ConfigMap) { apply(cm, s, logger) })
	started := make(chan error, 1)
	go func() { started <- w.Start(ctx.Done()) }()
	timer := time.NewTimer(within)
	defer timer.Stop()
	var err error
	select {
	case err = <-started:
	case <-timer.C:
		err = fmt.Errorf("not synced within %s: can this process get, list and watch configmaps in %s?", within, namespace)
	}
	if err != nil {
		return fmt.Errorf("watching ConfigMap %s/%s: %w", namespace, config.ForwardingConfigName, err)
	}
	return nil
}

// apply parses cm and hands a good configuration to s.
func apply(cm *corev1.ConfigMap, s ForwardingSetter, logger *zap.SugaredLogger) {
	f, err := config.NewForwardingFromMap(cm.Data)
	if err != nil {
		logger.Errorw("Invalid "+config.ForwardingConfigName+": keeping the last good configuration",
			zap.String("namespace", cm.Namespace), zap.String("resourceVersion", cm.ResourceVersion), zap.Error(err))
		return
	}
	logger.Infow("Event forwarding configured", zap.Stringer("forwarding", f),
		zap.String("namespace", cm.Namespace), zap.String("resourceVersion", cm.ResourceVersion))
	s.SetForwarding(*f)
}
