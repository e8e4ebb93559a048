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

package kube_test

import (
	"context"
	"os"

	"github.com/cloudevents/sdk-go/v2/event"
	"go.uber.org/zap"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	sourcesv1 "knative.dev/eventing/pkg/apis/sources/v1"

	"knative.dev/event-forwarding-proxy/adapter"
	"knative.dev/event-forwarding-proxy/adapter/kube"
	"knative.dev/event-forwarding-proxy/config"
)

// A multi-tenant source wires the sender in a few lines: one Sender per
// process, the live ConfigMap, the number of sources it serves, and a
// Send per event. (Compiled, not run: it needs a cluster.)
func Example() { //nolint:testableexamples // compiled, not run: it needs a cluster
	ctx := context.Background()
	logger := zap.NewExample().Sugar()
	restConfig, err := rest.InClusterConfig()
	if err != nil {
		logger.Fatal(err)
	}
	kc := kubernetes.NewForConfigOrDie(restConfig)

	// The route on the adapter's own Pod: a label and an Event per switch.
	podRoute := kube.NewPodRoute(kube.PodRouteParams{Client: kc, Namespace: "knative-eventing", Name: os.Getenv("POD_NAME"), Logger: logger})
	sender := adapter.NewSender(adapter.SenderParams{
		Logger:        logger,
		Tokens:        kube.NewTokenRequester(kc), // OIDC; nil without it
		ProxyIdentity: adapter.ServiceAccount{Namespace: "knative-eventing", Name: "pingsource-mt-adapter"},
		OnRouteChange: podRoute.Publish,
	})
	if err := kube.WatchForwarding(ctx, kc, config.SystemNamespace(os.LookupEnv), sender, logger); err != nil {
		logger.Fatal(err)
	}
	go podRoute.Run(ctx)

	var sources []*sourcesv1.PingSource // what the adapter serves
	sender.SetDirectSources(len(sources))
	for _, src := range sources {
		e := event.New()
		e.SetID("an id")
		e.SetType(sourcesv1.PingSourceEventType)
		e.SetSource(sourcesv1.PingSourceSource(src.Namespace, src.Name))
		_, _ = sender.Send(ctx, kube.TargetFor(src.Namespace, &src.Status.SourceStatus), e)
	}
}
