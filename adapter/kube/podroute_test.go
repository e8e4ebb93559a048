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
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	ktesting "k8s.io/client-go/testing"

	"knative.dev/event-forwarding-proxy/adapter"
	"knative.dev/event-forwarding-proxy/test/testproc"
)

const (
	podNamespace = "knative-eventing"
	podName      = "adapter-0"
)

// podRouteFixture is a fake API server holding the adapter's Pod, and a
// PodRoute recording about it on its own goroutine.
type podRouteFixture struct {
	kc    *fake.Clientset
	pr    *PodRoute
	logs  *observer.ObservedLogs
	reads atomic.Int32
	done  chan struct{} // closed when Run returns
}

// newPodRouteFixture starts Run; onRead, when set, runs before the fake
// answers each read of the Pod (number n, from 1) and may fail it.
func newPodRouteFixture(t *testing.T, withPod bool, onRead func(n int32) error) *podRouteFixture {
	t.Helper()
	var objs []runtime.Object
	if withPod {
		objs = append(objs, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: podNamespace, Name: podName, UID: "uid-1",
			Labels: map[string]string{"app": "adapter"}}})
	}
	f := &podRouteFixture{kc: fake.NewClientset(objs...), done: make(chan struct{})}
	f.kc.PrependReactor("get", "pods", func(ktesting.Action) (bool, runtime.Object, error) {
		n := f.reads.Add(1)
		if onRead != nil {
			if err := onRead(n); err != nil {
				return true, nil, err
			}
		}
		return false, nil, nil // the tracker answers
	})
	core, logs := observer.New(zap.InfoLevel)
	f.logs = logs
	f.pr = NewPodRoute(PodRouteParams{Client: f.kc, Namespace: podNamespace, Name: podName, Component: "test-adapter",
		Logger: zap.New(core).Sugar(), RetryDelay: time.Millisecond, RetryMax: 2 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	go func() { f.pr.Run(ctx); close(f.done) }()
	t.Cleanup(func() { cancel(); <-f.done })
	return f
}

// podWrites are the fake's actions that would change a Pod.
func (f *podRouteFixture) podWrites() []ktesting.Action {
	var out []ktesting.Action
	for _, a := range f.kc.Actions() {
		if a.GetResource().Resource == "pods" && a.GetVerb() != "get" && a.GetVerb() != "list" && a.GetVerb() != "watch" {
			out = append(out, a)
		}
	}
	return out
}

// events are the Pod's Events, oldest first.
func (f *podRouteFixture) events(t *testing.T) []corev1.Event {
	t.Helper()
	list, err := f.kc.CoreV1().Events(podNamespace).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sort.Slice(list.Items, func(i, j int) bool { return list.Items[i].FirstTimestamp.Before(&list.Items[j].FirstTimestamp) })
	return list.Items
}

func (f *podRouteFixture) logged(level zapcore.Level, prefix string) int {
	n := 0
	for _, e := range f.logs.All() {
		if e.Level == level && strings.HasPrefix(e.Message, prefix) {
			n++
		}
	}
	return n
}

func change(seq uint64, route adapter.Route) adapter.RouteChange {
	return adapter.RouteChange{Seq: seq, Route: route, Reason: "test reason " + route.String(), DirectSources: int(seq), DirectInflight: 3, ProxyInflight: 4}
}

// TestPodRouteLatestWins: while the API server holds the read of the Pod,
// a thousand switches are published without blocking; once it answers,
// the change taken before and the latest route are recorded, about the
// Pod's UID, and nothing writes the Pod.
func TestPodRouteLatestWins(t *testing.T) {
	entered, release := make(chan struct{}), make(chan struct{})
	f := newPodRouteFixture(t, true, func(n int32) error {
		if n == 1 {
			close(entered)
			<-release
		}
		return nil
	})
	f.pr.Publish(change(0, adapter.RouteDirect))
	receive(t, entered, "the read of the Pod")
	last := change(1001, adapter.RouteProxy)
	for seq := uint64(1); seq < last.Seq; seq++ {
		f.pr.Publish(change(seq, adapter.Route(seq%2)))
	}
	f.pr.Publish(last)
	f.pr.Publish(change(5, adapter.RouteDirect)) // late, from a racing switch
	close(release)

	testproc.Eventually(t, 10*time.Second, "two Events", func() bool { return len(f.events(t)) >= 2 })
	type summary struct{ Type, Reason, UID, Message, Source string }
	var got []summary
	for _, e := range f.events(t) {
		got = append(got, summary{e.Type, e.Reason, string(e.InvolvedObject.UID), e.Message, e.Source.Component})
	}
	want := []summary{
		{"Normal", ReasonSendingDirect, "uid-1", "Sending directly to the sinks: test reason direct (0 direct sources; sends in flight: 3 direct, 4 through the proxy)", "test-adapter"},
		{"Normal", ReasonForwardingThroughProxy, "uid-1", "Forwarding through the event-forwarding proxy: test reason proxy (1001 direct sources; sends in flight: 3 direct, 4 through the proxy)", "test-adapter"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Events (-want +got):\n%s", diff)
	}
	if n := f.reads.Load(); n != 1 {
		t.Errorf("%d reads of the Pod, want 1", n)
	}
	if w := f.podWrites(); len(w) != 0 {
		t.Errorf("the Pod was written: %v", w)
	}
}

// TestPodRouteRetriesAFailedRead: a read of the Pod the API server refuses
// is tried again after the backoff, without a new change, and the failure
// is logged once for that change; the Event follows, with the UID.
func TestPodRouteRetriesAFailedRead(t *testing.T) {
	f := newPodRouteFixture(t, true, func(n int32) error {
		if n <= 3 {
			return apierrors.NewServiceUnavailable("etcd is slow")
		}
		return nil
	})
	f.pr.Publish(change(0, adapter.RouteProxy))
	testproc.Eventually(t, 10*time.Second, "one Event", func() bool { return len(f.events(t)) == 1 })
	if e := f.events(t)[0]; e.Reason != ReasonForwardingThroughProxy || e.InvolvedObject.UID != "uid-1" {
		t.Errorf("Event %s about UID %q, want %s about the Pod's uid-1", e.Reason, e.InvolvedObject.UID, ReasonForwardingThroughProxy)
	}
	if n := f.reads.Load(); n != 4 {
		t.Errorf("%d reads, want 3 refused and 1 answered", n)
	}
	if n := f.logged(zapcore.WarnLevel, "Cannot read the adapter's Pod to record its route"); n != 1 {
		t.Errorf("%d warnings for one change, want 1", n)
	}
	if n := f.logged(zapcore.InfoLevel, "The adapter's Pod is read again"); n != 1 {
		t.Errorf("%d recoveries logged, want 1", n)
	}

	f.pr.Publish(change(1, adapter.RouteDirect))
	testproc.Eventually(t, 10*time.Second, "the second Event", func() bool { return len(f.events(t)) == 2 })
	if n := f.reads.Load(); n != 4 {
		t.Errorf("%d reads, want no more once the Pod is known", n)
	}
}

// TestPodRouteForbidden: without RBAC to read the Pod, the adapter warns
// once and still records the Events, without the UID it cannot learn.
func TestPodRouteForbidden(t *testing.T) {
	f := newPodRouteFixture(t, true, func(int32) error {
		return apierrors.NewForbidden(corev1.Resource("pods"), podName, nil)
	})
	f.pr.Publish(change(0, adapter.RouteProxy))
	testproc.Eventually(t, 10*time.Second, "the Event", func() bool { return len(f.events(t)) == 1 })
	if e := f.events(t)[0]; e.Reason != ReasonForwardingThroughProxy || e.InvolvedObject.Name != podName || e.InvolvedObject.UID != "" {
		t.Errorf("Event %s about %s (UID %q), want %s about %s", e.Reason, e.InvolvedObject.Name, e.InvolvedObject.UID, ReasonForwardingThroughProxy, podName)
	}
	f.pr.Publish(change(1, adapter.RouteDirect))
	testproc.Eventually(t, 10*time.Second, "the second Event", func() bool { return len(f.events(t)) == 2 })
	if n := f.logged(zapcore.WarnLevel, "Cannot read the adapter's Pod"); n != 1 {
		t.Errorf("%d warnings, want 1", n)
	}
	if n := f.reads.Load(); n != 1 {
		t.Errorf("%d reads, want 1: a forbidden read is not tried again", n)
	}
}

// TestPodRouteWithoutAPod: with no Pod of that name, or no name at all,
// Run says so once at Info and returns; Publish still never blocks.
func TestPodRouteWithoutAPod(t *testing.T) {
	t.Run("no such pod", func(t *testing.T) {
		f := newPodRouteFixture(t, false, nil)
		f.pr.Publish(change(0, adapter.RouteDirect))
		receive(t, f.done, "Run returns")
		for seq := range uint64(10) {
			f.pr.Publish(change(seq+1, adapter.Route(seq%2)))
		}
		if n := f.reads.Load(); n != 1 {
			t.Errorf("%d reads, want the one that found no Pod", n)
		}
		if n := f.logged(zapcore.InfoLevel, "The route is not shown on a Pod"); n != 1 || f.logs.Len() != 1 {
			t.Errorf("logs %v: want the one Info line", f.logs.All())
		}
		if evs := f.events(t); len(evs) != 0 {
			t.Errorf("Events %v about a Pod that does not exist", evs)
		}
	})
	t.Run("no name", func(t *testing.T) {
		kc := fake.NewClientset()
		core, logs := observer.New(zap.InfoLevel)
		pr := NewPodRoute(PodRouteParams{Client: kc, Namespace: podNamespace, Logger: zap.New(core).Sugar()})
		pr.Publish(change(0, adapter.RouteProxy))
		pr.Run(context.Background()) // returns at once
		pr.Publish(change(1, adapter.RouteDirect))
		if logs.Len() != 1 || logs.All()[0].Level != zapcore.InfoLevel {
			t.Errorf("logs %v: want one Info line", logs.All())
		}
		if a := kc.Actions(); len(a) != 0 {
			t.Errorf("API calls %v without a Pod name", a)
		}
	})
}

// TestPodRoutePublishIsSafeForConcurrentUse: racing switches leave the
// highest Seq in the slot.
func TestPodRoutePublishIsSafeForConcurrentUse(t *testing.T) {
	pr := NewPodRoute(PodRouteParams{Client: fake.NewClientset(), Name: podName})
	var wg sync.WaitGroup
	for g := range uint64(8) {
		wg.Go(func() {
			for i := range uint64(100) {
				pr.Publish(change(g*100+i, adapter.Route(i%2)))
			}
		})
	}
	wg.Wait()
	if c, ok := pr.take(); !ok || c.Seq != 799 {
		t.Errorf("slot holds Seq %d (%v), want 799", c.Seq, ok)
	}
}

// receive waits for ch to be closed, failing the test after 10 s.
func receive(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: not within 10 s", what)
	}
}
