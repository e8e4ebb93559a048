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

// Package trustbundles keeps a delivery.TrustRoots equal to the trust
// bundles Eventing distributes: ConfigMaps in the system namespace, read
// through the Kubernetes API. It is apart from delivery so that the
// transports, and every binary or test that links only them, need no
// Kubernetes client.
package trustbundles

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"knative.dev/event-forwarding-proxy/delivery"
)

// Label, set to "true", marks the ConfigMaps that hold trust
// bundles: PEM CA certificates, under any key. Eventing labels its own
// (from its self-signed issuer or cert-manager's trust-manager) this way
// and propagates them from its system namespace.
const Label = "networking.knative.dev/trust-bundle"

// Watch keeps roots' bundles equal to the certificates of the ConfigMaps
// labelled Label=true in namespace, until ctx ends:
// added, changed and deleted ConfigMaps take effect for every connection
// opened after. It returns once the first list is applied, or an error
// when the watch cannot sync within a minute (RBAC: the process needs get,
// list and watch on configmaps in namespace).
func Watch(ctx context.Context, kc kubernetes.Interface, namespace string, roots *delivery.TrustRoots, logger *zap.SugaredLogger) error {
	return watchWithin(ctx, kc, namespace, roots, logger, time.Minute)
}

func watchWithin(ctx context.Context, kc kubernetes.Interface, namespace string, roots *delivery.TrustRoots, logger *zap.SugaredLogger, within time.Duration) error {
	if logger == nil {
		logger = zap.NewNop().Sugar()
	}
	selector := labels.Set{Label: "true"}.AsSelector()
	f := informers.NewSharedInformerFactoryWithOptions(kc, 0, informers.WithNamespace(namespace),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = selector.String() }))
	cms := f.Core().V1().ConfigMaps()
	lister := cms.Lister().ConfigMaps(namespace)
	var (
		mu     sync.Mutex // the handlers' goroutine and this one reload
		loaded [sha256.Size]byte
	)
	reload := func() {
		mu.Lock()
		defer mu.Unlock()
		list, err := lister.List(selector)
		if err != nil {
			logger.Errorw("Cannot list the trust bundles: keeping the last ones", zap.Error(err))
			return
		}
		bundles, names := bundleData(list)
		// Resyncs and unrelated edits change nothing: keep the roots, and
		// the pools derived from them.
		sum := sha256.Sum256(bytes.Join(append(bundles, []byte(strings.Join(names, "\x00"))), []byte{0}))
		if sum == loaded {
			return
		}
		loaded = sum
		n := roots.SetBundles(bundles)
		logger.Infow("Trust bundles loaded", zap.String("namespace", namespace),
			zap.Strings("configMaps", names), zap.Int("certificates", n))
	}
	// Until the first list is in, the adds are that list: one reload
	// after the sync loads it, and logs it, once.
	changed := func() {
		if cms.Informer().HasSynced() {
			reload()
		}
	}
	if _, err := cms.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { changed() },
		UpdateFunc: func(any, any) { changed() },
		DeleteFunc: func(any) { changed() },
	}); err != nil {
		return fmt.Errorf("watching trust bundles in %s: %w", namespace, err)
	}
	f.Start(ctx.Done())
	sctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	if !cache.WaitForCacheSync(sctx.Done(), cms.Informer().HasSynced) {
		return fmt.Errorf("trust bundles in %s not synced within %s: can this process get, list and watch configmaps there?", namespace, within)
	}
	reload()
	return nil
}

// bundleData returns the values of every key of cms, ConfigMaps sorted by
// name, and their names.
func bundleData(cms []*corev1.ConfigMap) ([][]byte, []string) {
	slices.SortFunc(cms, func(a, b *corev1.ConfigMap) int { return strings.Compare(a.Name, b.Name) })
	var bundles [][]byte
	names := make([]string, 0, len(cms))
	for _, cm := range cms {
		names = append(names, cm.Name)
		for _, k := range sortedKeys(cm.Data) {
			bundles = append(bundles, []byte(cm.Data[k]))
		}
		for _, k := range sortedKeys(cm.BinaryData) {
			bundles = append(bundles, cm.BinaryData[k])
		}
	}
	return bundles, names
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
