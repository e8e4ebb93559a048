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

// Package kubetest holds what tests of informers on client-go's fake
// clientsets share. For tests only.
package kubetest

import (
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	k8stesting "k8s.io/client-go/testing"
)

// Fake is what a generated fake clientset offers (kubernetes, eventing).
type Fake interface {
	PrependWatchReactor(resource string, reaction k8stesting.WatchReactionFunc)
	Tracker() k8stesting.ObjectTracker
}

// WatchStarted returns a function that waits until an informer's watch of
// resource is registered with the fake's tracker. The fake's watch has no
// resource versions: an object written after the informer's list but
// before its watch is never seen, so a test writes only after the wait.
// Call it before the informer starts.
func WatchStarted(kc Fake, resource string) func(t *testing.T) {
	started := make(chan struct{})
	var once sync.Once
	kc.PrependWatchReactor(resource, func(a k8stesting.Action) (bool, watch.Interface, error) {
		var opts metav1.ListOptions
		if wa, ok := a.(k8stesting.WatchActionImpl); ok {
			opts = wa.ListOptions
		}
		w, err := kc.Tracker().Watch(a.GetResource(), a.GetNamespace(), opts)
		if err == nil {
			once.Do(func() { close(started) })
		}
		return true, w, err
	})
	return func(t *testing.T) {
		t.Helper()
		select {
		case <-started:
		case <-time.After(30 * time.Second):
			t.Fatalf("no watch of %s started in 30 s", resource)
		}
	}
}
