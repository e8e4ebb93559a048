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

package heartbeats

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	cecontext "github.com/cloudevents/sdk-go/v2/context"
	cehttp "github.com/cloudevents/sdk-go/v2/protocol/http"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	adapterv2 "knative.dev/eventing/pkg/adapter/v2"

	"knative.dev/event-forwarding-proxy/delivery"
)

// watchSources keeps s in step with the labelled ConfigMaps of every
// namespace until ctx ends; it returns once the first list is applied.
func watchSources(ctx context.Context, kc kubernetes.Interface, s *scheduler, logger *zap.SugaredLogger) error {
	f := informers.NewSharedInformerFactoryWithOptions(kc, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.LabelSelector = SourceLabel + "=true"
	}))
	inf := f.Core().V1().ConfigMaps().Informer()
	apply := func(obj any) {
		cm, ok := obj.(*corev1.ConfigMap)
		if !ok {
			return
		}
		src, err := SourceFrom(cm)
		if err != nil {
			logger.Errorw("Invalid heartbeat source: not served", zap.String("source", src.Key()), zap.Error(err))
			s.remove(src.Key())
			return
		}
		s.set(src)
	}
	_, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    apply,
		UpdateFunc: func(_, obj any) { apply(obj) },
		DeleteFunc: func(obj any) {
			if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			if cm, ok := obj.(*corev1.ConfigMap); ok {
				s.remove(cm.Namespace + "/" + cm.Name)
			}
		},
	})
	if err != nil {
		return err
	}
	f.Start(ctx.Done())
	sctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if !cache.WaitForCacheSync(sctx.Done(), inf.HasSynced) {
		return errors.New("the heartbeat sources were not listed within a minute: can this process list and watch configmaps in every namespace?")
	}
	return nil
}

// send delivers one heartbeat of src with the SDK client, with upstream's
// retry policy; an event not delivered is logged.
func (a *Adapter) send(ctx context.Context, src Source, seq uint64) bool {
	e := cloudevents.NewEvent()
	e.SetID(fmt.Sprintf("%s-%d", src.Key(), seq))
	e.SetSource(src.EventSource())
	e.SetType(EventType)
	_ = e.SetData(cloudevents.ApplicationJSON, map[string]any{"sequence": seq, "period": src.Period.String()})
	ctx = cecontext.WithTarget(ctx, src.Sink.String())
	// adapter/v2's client sets Kn-Namespace to its own namespace after this
	// one; the proxy and Knative read the first, the tenant's.
	ctx = cehttp.WithCustomHeader(ctx, http.Header{delivery.HeaderNamespace: {src.Namespace}})
	ctx = cecontext.WithRetriesExponentialBackoff(ctx, 50*time.Millisecond, 5)
	ctx = adapterv2.ContextWithMetricTag(ctx, &adapterv2.MetricTag{Name: src.Name, Namespace: src.Namespace, ResourceGroup: "configmaps"})
	res := a.client.Send(ctx, e)
	if cloudevents.IsACK(res) {
		return true
	}
	a.logger.Errorw("Heartbeat not delivered", zap.String("source", src.Key()), zap.String("sink", src.Sink.Redacted()),
		zap.String("id", e.ID()), zap.Stringer("route", a.sender.Route()), zap.Error(res))
	return false
}
