//go:build integration

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

package sender

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"knative.dev/event-forwarding-proxy/adapter"
	"knative.dev/event-forwarding-proxy/adapter/kube"
	"knative.dev/event-forwarding-proxy/config"
	"knative.dev/event-forwarding-proxy/test/apiserver"
	"knative.dev/event-forwarding-proxy/test/testproc"
)

const (
	systemNamespace = "knative-eventing"
	msgApplied      = "Event forwarding configured"
	msgInvalid      = "Invalid " + config.ForwardingConfigName + ": keeping the last good configuration"
	// flipWithin is how soon an edit must reach the next sends.
	flipWithin = 10 * time.Second
)

// configMaps edits config-event-forwarding through the API server.
type configMaps struct {
	tb testing.TB
	kc kubernetes.Interface
}

// put creates or replaces the ConfigMap's data and returns its new
// resourceVersion.
func (c configMaps) put(data map[string]string) string {
	c.tb.Helper()
	ctx := context.Background()
	cms := c.kc.CoreV1().ConfigMaps(systemNamespace)
	cm, err := cms.Get(ctx, config.ForwardingConfigName, metav1.GetOptions{})
	if err != nil {
		cm, err = cms.Create(ctx, &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: config.ForwardingConfigName, Namespace: systemNamespace}, Data: data,
		}, metav1.CreateOptions{})
	} else {
		cm.Data = data
		cm, err = cms.Update(ctx, cm, metav1.UpdateOptions{})
	}
	if err != nil {
		c.tb.Fatalf("writing %s: %v", config.ForwardingConfigName, err)
	}
	return cm.ResourceVersion
}

func (c configMaps) delete() {
	c.tb.Helper()
	err := c.kc.CoreV1().ConfigMaps(systemNamespace).Delete(context.Background(), config.ForwardingConfigName, metav1.DeleteOptions{})
	if err != nil {
		c.tb.Fatal(err)
	}
}

// TestLiveConfigFromTheAPIServer: an operator edits config-event-forwarding
// through a real API server and the next sends of a running sender follow
// within seconds, through the real proxy; a bad value is refused with an
// error naming its key and the route stays; the threshold is crossed both
// ways with hysteresis.
func TestLiveConfigFromTheAPIServer(t *testing.T) {
	t.Parallel()
	srv := apiserver.Start(t)
	kc, err := kubernetes.NewForConfig(srv.Config)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kc.CoreV1().Namespaces().Create(context.Background(),
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: systemNamespace}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	proxy := startProxy(t)
	sink := newSink(t)
	logger, logs := testLogger(t)
	s := adapter.NewSender(adapter.SenderParams{Logger: logger})
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	if err := kube.WatchForwarding(ctx, kc, systemNamespace, s, logger); err != nil {
		t.Fatal(err)
	}
	cms := configMaps{tb: t, kc: kc}
	d := newDriver(t, s, adapter.Target{URL: sink.url(t), Namespace: "tenant"}, "live")

	t.Run("ConfigMap edits flip the route", func(t *testing.T) {
		s.SetDirectSources(10)
		steps := []struct {
			name string
			data map[string]string // nil: delete the ConfigMap
			bad  string            // the key a bad value is reported under
			want adapter.Route
		}{
			{name: "absent: direct", want: adapter.RouteDirect},
			{name: "proxy set, 10 sources above threshold 5", data: map[string]string{"event-forwarding-proxy": proxy.URL, "event-forwarding-threshold": "5"}, want: adapter.RouteProxy},
			{name: "bad threshold: refused, route kept", data: map[string]string{"event-forwarding-proxy": proxy.URL, "event-forwarding-threshold": "-1"}, bad: "event-forwarding-threshold", want: adapter.RouteProxy},
			{name: "bad proxy URL: refused, route kept", data: map[string]string{"event-forwarding-proxy": "event-forwarding-proxy:8080", "event-forwarding-threshold": "5"}, bad: "event-forwarding-proxy", want: adapter.RouteProxy},
			{name: "threshold raised above the count: direct", data: map[string]string{"event-forwarding-proxy": proxy.URL, "event-forwarding-threshold": "100"}, want: adapter.RouteDirect},
			{name: "threshold 0: always", data: map[string]string{"event-forwarding-proxy": proxy.URL, "event-forwarding-threshold": "0"}, want: adapter.RouteProxy},
			{name: "proxy URL emptied: off", data: map[string]string{"event-forwarding-proxy": "", "event-forwarding-threshold": "0"}, want: adapter.RouteDirect},
			{name: "set again", data: map[string]string{"event-forwarding-proxy": proxy.URL, "event-forwarding-threshold": "0"}, want: adapter.RouteProxy},
			{name: "ConfigMap deleted: off", want: adapter.RouteDirect},
		}
		for i, st := range steps {
			t.Run(st.name, func(t *testing.T) {
				switch {
				case i == 0:
				case st.data == nil:
					cms.delete()
				default:
					rv := cms.put(st.data)
					if st.bad != "" {
						e := waitLogged(t, logs, msgInvalid, rv)
						if msg, _ := e.ContextMap()["error"].(string); !strings.HasPrefix(msg, st.bad+"=") {
							t.Errorf("the error %q does not name the key %s", msg, st.bad)
						}
					}
				}
				if st.bad != "" {
					for range 5 {
						if _, res := d.send(); res.Route != st.want {
							t.Fatalf("route %s after a bad value, want %s kept", res.Route, st.want)
						}
					}
					return
				}
				took := d.sendUntil(st.want, flipWithin)
				t.Logf("the next sends took route %s %s after the edit", st.want, took.Round(time.Millisecond))
			})
		}
		d.checkArrivals(sink)
	})

	t.Run("threshold crossings both ways", func(t *testing.T) {
		s.SetDirectSources(0)
		waitLogged(t, logs, msgApplied, cms.put(map[string]string{"event-forwarding-proxy": proxy.URL, "event-forwarding-threshold": "100"}))
		dx := newDriver(t, s, adapter.Target{URL: sink.url(t), Namespace: "tenant"}, "crossing")
		steps := []struct {
			sources int
			want    adapter.Route
		}{
			{50, adapter.RouteDirect}, {100, adapter.RouteDirect}, {101, adapter.RouteProxy},
			{95, adapter.RouteProxy}, {90, adapter.RouteProxy}, {89, adapter.RouteDirect},
			{99, adapter.RouteDirect}, {150, adapter.RouteProxy}, {0, adapter.RouteDirect},
		}
		for _, st := range steps {
			s.SetDirectSources(st.sources)
			for range 3 {
				if _, res := dx.send(); res.Route != st.want || res.Fallback {
					t.Fatalf("%d sources: route %s (fallback %v), want %s", st.sources, res.Route, res.Fallback, st.want)
				}
			}
		}
		dx.checkArrivals(sink)
		if got := proxy.metric("kn_forward_requests_total", `outcome="accepted"`); got < 12 {
			t.Errorf("the proxy accepted %v events, want at least the 12 of the crossings", got)
		}
	})

	t.Run("held sends switch the route, and the hold brings it back", func(t *testing.T) {
		s.SetDirectSources(1) // far under the sources' threshold throughout
		waitLogged(t, logs, msgApplied, cms.put(map[string]string{"event-forwarding-proxy": proxy.URL, "event-forwarding-threshold": "100",
			"event-forwarding-inflight-threshold": "3", "event-forwarding-inflight-hold": "1s"}))
		slow := testproc.NewSink(t, &testproc.SinkOptions{Hold: testproc.HoldAll})
		var held sync.WaitGroup
		for i := range 4 {
			held.Go(func() {
				if _, err := s.Send(ctxFor(t, time.Minute), adapter.Target{URL: mustURL(t, slow.URL)}, pingEvent("slow-"+strconv.Itoa(i))); err != nil {
					t.Errorf("held send %d: %v", i, err)
				}
			})
			eventually(t, 10*time.Second, "the slow sink holds the send", func() bool { return slow.Count() == i+1 })
		}
		dx := newDriver(t, s, adapter.Target{URL: sink.url(t), Namespace: "tenant"}, "held")
		if _, res := dx.send(); res.Route != adapter.RouteProxy || res.Fallback {
			t.Fatalf("with 4 direct sends held over a threshold of 3: route %s (fallback %v), want the proxy", res.Route, res.Fallback)
		}
		if e := logs.FilterMessage("Forwarding through the event-forwarding proxy").All(); len(e) == 0 ||
			e[len(e)-1].ContextMap()["reason"] != "direct sends in flight over the in-flight threshold" {
			t.Errorf("the switch to the proxy was not logged with its reason: %v", e)
		}
		slow.Release()
		held.Wait()
		took := dx.sendUntil(adapter.RouteDirect, flipWithin)
		t.Logf("direct again %s after the held sends ended (hold 1s)", took.Round(time.Millisecond))
		dx.checkArrivals(sink)
	})
}
