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
	"os"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	"go.opentelemetry.io/otel"
	"go.uber.org/zap"
	adapterv2 "knative.dev/eventing/pkg/adapter/v2"
	kubeclient "knative.dev/pkg/client/injection/kube/client"
	"knative.dev/pkg/logging"

	"knative.dev/event-forwarding-proxy/adapter"
	"knative.dev/event-forwarding-proxy/adapter/forwarding"
	"knative.dev/event-forwarding-proxy/adapter/kube"
)

// Component names the adapter: in its logs, metrics and Events.
const Component = "heartbeats"

// Env is the adapter's environment: upstream's adapter/v2 settings
// (NAMESPACE, K_LOGGING_CONFIG, K_OBSERVABILITY_CONFIG, K_SINK_TIMEOUT...)
// and its own.
type Env struct {
	adapterv2.EnvConfig
	// SystemNamespace holds config-event-forwarding.
	SystemNamespace string `envconfig:"SYSTEM_NAMESPACE" default:"knative-eventing"`
	// MaxInflightSends bounds the sends in flight at once; a tick that
	// finds them all taken is skipped and logged.
	MaxInflightSends int `envconfig:"MAX_INFLIGHT_SENDS" default:"10000"`
	// DrainTimeout bounds the wait for running sends at shutdown.
	DrainTimeout time.Duration `envconfig:"DRAIN_TIMEOUT" default:"20s"`
	// PodName is the adapter's own Pod, in NAMESPACE (or SystemNamespace),
	// labelled with the route. If unset, the host name: a Pod's, in one.
	PodName string `envconfig:"POD_NAME"`
	// ServiceAccount is the adapter's own service account, in NAMESPACE
	// (or SystemNamespace): the identity whose OIDC token the proxy gets
	// in Kn-Forward-Authorization. If unset, the one whose token the pod
	// has mounted; outside a pod, none, and no token is sent.
	ServiceAccount string `envconfig:"SERVICE_ACCOUNT_NAME"`
}

// identity returns the service account the adapter presents to the
// proxy, or the zero value when it has none.
func (e *Env) identity() adapter.ServiceAccount {
	if e.ServiceAccount != "" {
		ns, _ := e.pod()
		return adapter.ServiceAccount{Namespace: ns, Name: e.ServiceAccount}
	}
	sa, err := kube.TokenServiceAccount(kube.ServiceAccountToken)
	if err != nil {
		return adapter.ServiceAccount{}
	}
	return sa
}

// pod returns the namespace and name of the adapter's own Pod.
func (e *Env) pod() (namespace, name string) {
	namespace, name = e.Namespace, e.PodName
	if namespace == "" {
		namespace = e.SystemNamespace
	}
	if name == "" {
		name, _ = os.Hostname()
	}
	return namespace, name
}

// NewEnv is the adapter/v2 EnvConfigConstructor.
func NewEnv() adapterv2.EnvConfigAccessor { return &Env{} }

// Adapter sends the heartbeats of every source.
type Adapter struct {
	env      *Env
	logger   *zap.SugaredLogger
	sender   *adapter.Sender
	podRoute *kube.PodRoute
	client   cloudevents.Client
}

// NewAdapter is the adapter/v2 AdapterConstructor. It does not use the
// client the shared main built: it builds the same one from the same
// configuration, with the forwarding option added.
func NewAdapter(ctx context.Context, env adapterv2.EnvConfigAccessor, built cloudevents.Client) adapterv2.Adapter {
	logger := logging.FromContext(ctx)
	if c, ok := built.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
	e := env.(*Env)
	params := adapter.SenderParams{
		Logger:         logger,
		MeterProvider:  otel.GetMeterProvider(),
		TracerProvider: otel.GetTracerProvider(),
	}
	if t := e.GetSinktimeout(); t > 0 {
		params.Timeout = time.Duration(t) * time.Second
	}
	// With auth on, the proxy takes only callers that present a token:
	// the adapter's own identity, which the TokenRequest API mints.
	if id := e.identity(); !id.IsZero() {
		params.Tokens, params.ProxyIdentity = kube.NewTokenRequester(kubeclient.Get(ctx)), id
		logger.Infow("OIDC tokens on", zap.Stringer("identity", id))
	} else {
		logger.Info("OIDC tokens off: no service account of the adapter's own (SERVICE_ACCOUNT_NAME)")
	}
	ns, pod := e.pod()
	podRoute := kube.NewPodRoute(kube.PodRouteParams{Client: kubeclient.Get(ctx), Namespace: ns, Name: pod, Component: Component, Logger: logger})
	params.OnRouteChange = podRoute.Publish
	sender := adapter.NewSender(params)
	cfg := adapterv2.GetClientConfig(ctx)
	cfg.Options = append(cfg.Options, forwarding.Option(sender))
	client, err := adapterv2.NewClient(cfg)
	if err != nil {
		logger.Fatalw("Building the CloudEvents client", zap.Error(err))
	}
	return &Adapter{env: e, logger: logger, sender: sender, podRoute: podRoute, client: client}
}

// Start serves every heartbeat source until ctx ends, then waits for the
// running sends, at most DrainTimeout.
func (a *Adapter) Start(ctx context.Context) error {
	kc := kubeclient.Get(ctx)
	if err := kube.WatchForwarding(ctx, kc, a.env.SystemNamespace, a.sender, a.logger); err != nil {
		return err
	}
	go a.podRoute.Run(ctx)
	s := newScheduler(ctx, a.env.MaxInflightSends, a.send, a.sender.SetDirectSources, a.logger)
	if err := watchSources(ctx, kc, s, a.logger); err != nil {
		return err
	}
	<-ctx.Done()
	s.drain(a.env.DrainTimeout)
	a.sender.CloseIdleConnections()
	return nil
}
