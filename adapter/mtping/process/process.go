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

// Package process is the PingSource adapter's process: the Kubernetes and
// Eventing clients, its settings, telemetry, the Sender and its live
// configuration, the adapter and its probe and metrics servers.
// cmd/mtping reads its flag and calls Run.
package process

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"os"
	"slices"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.uber.org/zap"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"knative.dev/eventing/pkg/client/clientset/versioned"
	kle "knative.dev/pkg/leaderelection"
	"knative.dev/pkg/observability/metrics"
	"knative.dev/pkg/observability/resource"
	"knative.dev/pkg/observability/tracing"

	"knative.dev/event-forwarding-proxy/adapter"
	"knative.dev/event-forwarding-proxy/adapter/kube"
	"knative.dev/event-forwarding-proxy/adapter/mtping"
	"knative.dev/event-forwarding-proxy/config"
	"knative.dev/event-forwarding-proxy/delivery"
	"knative.dev/event-forwarding-proxy/delivery/trustbundles"
	"knative.dev/event-forwarding-proxy/internal/telemetry"
)

// Exit statuses of Run besides 0.
const (
	exitFailed  = 1 // could not start, or the adapter stopped on an error
	exitInvalid = 2 // a setting does not parse
)

// clients are the API clients the adapter uses.
type clients struct {
	kube   kubernetes.Interface
	events versioned.Interface
}

// Run runs the adapter until ctx ends, then lets its sends finish within
// the drain timeout. kubeconfig, if set, names the API server's
// configuration (else in-cluster, else $KUBECONFIG); lookup reads the
// environment (os.LookupEnv). It returns the process's exit status: 0
// after a clean stop, 1 on a failure, 2 on an invalid setting.
func Run(ctx context.Context, kubeconfig string, lookup func(string) (string, bool)) int {
	// The logger needs the settings, and the settings the API server: what
	// fails before the logger exists goes to stderr.
	c, err := newClients(kubeconfig)
	if err != nil {
		fmt.Fprintln(os.Stderr, "mtping:", err)
		return exitFailed
	}
	settings, err := readSettings(ctx, c.kube, config.SystemNamespace(lookup))
	if err != nil {
		fmt.Fprintln(os.Stderr, "mtping:", err)
		return exitFailed
	}
	env, err := mtping.EnvFromLookup(mtping.SettingsFirst(settings, lookup))
	if err != nil {
		fmt.Fprintln(os.Stderr, "mtping: invalid configuration:", err)
		return exitInvalid
	}
	election, err := mtping.LeaderElectionFromSettings(settings)
	if err != nil {
		fmt.Fprintln(os.Stderr, "mtping: invalid configuration:", err)
		return exitInvalid
	}
	logger, err := telemetry.NewLoggerFromZapConfig(env.ZapConfig, env.LogLevel)
	if err != nil {
		fmt.Fprintln(os.Stderr, "mtping: invalid configuration: K_LOGGING_CONFIG:", err)
		return exitInvalid
	}
	defer func() { _ = logger.Sync() }()
	// The settings in effect, where an operator can check them: in a pod
	// they come from the controller's env and the adapter's ConfigMap.
	logger.Infow("Starting", zap.String("pod", env.PodName), zap.String("systemNamespace", env.SystemNamespace),
		zap.Stringer("drainTimeout", env.DrainTimeout), zap.Stringer("sinkTimeout", env.SinkTimeout), zap.Stringer("logLevel", logger.Level()),
		zap.Strings("settings", slices.Sorted(maps.Keys(settings))))
	if err := runAdapter(ctx, c, env, election, logger); err != nil {
		logger.Errorw(err.Error(), zap.Error(errors.Unwrap(err)))
		return exitFailed
	}
	logger.Info("Stopped")
	return 0
}

// runAdapter sets up telemetry, the Sender and the adapter, and runs the
// adapter with its servers until ctx ends. Its error's message says what
// failed, as the log's message, and wraps the cause.
func runAdapter(ctx context.Context, c clients, env mtping.Env, election *kle.Config, logger *zap.SugaredLogger) error {
	reg := prometheus.NewRegistry()
	mp, err := newMeterProvider(ctx, env, reg)
	if err != nil {
		return failed("Cannot set up metrics", err)
	}
	// Flushed last, with the drain's counts in.
	defer flush(logger, "Metrics not flushed at exit", mp.Shutdown)
	if env.Metrics.Protocol == metrics.ProtocolGRPC || env.Metrics.Protocol == metrics.ProtocolHTTPProtobuf {
		logger.Infow("Metrics pushed too (K_OBSERVABILITY_CONFIG)", zap.String("protocol", env.Metrics.Protocol),
			zap.Duration("exportInterval", env.Metrics.ExportInterval))
	}
	sp := adapter.SenderParams{Logger: logger, MeterProvider: mp, Timeout: env.SinkTimeout, SinkH2CHosts: env.SinkH2CHosts}
	if env.Tracing.Protocol != "" && env.Tracing.Protocol != tracing.ProtocolNone {
		tp, err := tracing.NewTracerProvider(ctx, env.Tracing, sdktrace.WithResource(resource.Default(mtping.Component)))
		if err != nil {
			return failed("Cannot set up tracing (K_OBSERVABILITY_CONFIG)", err)
		}
		// Flushed last, after the drain's sends ended their spans.
		defer flush(logger, "Spans not flushed at exit", tp.Shutdown)
		sp.TracerProvider = tp
		logger.Infow("Tracing on", zap.String("protocol", env.Tracing.Protocol), zap.Float64("samplingRate", env.Tracing.SamplingRate))
	}
	sender, podRoute, err := newSender(ctx, c, env, sp, logger)
	if err != nil {
		return err
	}
	go podRoute.Run(ctx)
	a, err := mtping.New(mtping.Params{
		Sources: c.events, Kube: c.kube, Sender: sender, Namespace: env.SystemNamespace, Identity: env.PodName,
		LeaderElection: election, Upstream: &env.Upstream,
		DrainTimeout: env.DrainTimeout, Logger: logger, MeterProvider: mp,
	})
	if err != nil {
		return failed("Cannot create the adapter", err)
	}
	stop, err := serve(env, a.ProbeHandler(), reg)
	if err != nil {
		return failed("Cannot listen", err)
	}
	defer stop()
	if err := a.Run(ctx); err != nil {
		return failed("Adapter stopped", err)
	}
	return nil
}

// newSender makes the Sender with OIDC tokens (when the adapter has a
// service account of its own) and eventing's trust bundles, and watches
// config-event-forwarding for it; the Pod route it publishes its route
// on is for the caller to run.
func newSender(ctx context.Context, c clients, env mtping.Env, sp adapter.SenderParams, logger *zap.SugaredLogger) (*adapter.Sender, *kube.PodRoute, error) {
	if id := identity(env); !id.IsZero() {
		sp.Tokens, sp.ProxyIdentity = kube.NewTokenRequester(c.kube), id
		logger.Infow("OIDC tokens on", zap.Stringer("identity", id))
	} else {
		logger.Info("OIDC tokens off: no service account of the adapter's own (SERVICE_ACCOUNT_NAME)")
	}
	// Trust bundles before the sender: the first tick's https sinks need them.
	sp.TrustRoots = delivery.NewTrustRoots()
	if err := trustbundles.Watch(ctx, c.kube, env.SystemNamespace, sp.TrustRoots, logger); err != nil {
		return nil, nil, failed("Cannot watch the trust bundles", err)
	}
	// The route on the adapter's own Pod (controller-set SYSTEM_NAMESPACE
	// is its namespace), written from the first configuration on.
	podRoute := kube.NewPodRoute(kube.PodRouteParams{Client: c.kube, Namespace: env.SystemNamespace, Name: env.PodName, Component: mtping.Component, Logger: logger})
	sp.OnRouteChange = podRoute.Publish
	sender := adapter.NewSender(sp)
	if err := kube.WatchForwarding(ctx, c.kube, env.SystemNamespace, sender, logger); err != nil {
		return nil, nil, failed("Cannot watch the forwarding configuration", err)
	}
	return sender, podRoute, nil
}

// serve starts the probe and metrics servers; stop shuts them down.
func serve(env mtping.Env, probes http.Handler, reg *prometheus.Registry) (stop func(), _ error) {
	servers := []*http.Server{
		{Addr: ":" + strconv.Itoa(env.ProbesPort), Handler: probes, ReadHeaderTimeout: 10 * time.Second},
		telemetry.NewMetricsServer(env.MetricsPort, reg),
	}
	listeners, err := telemetry.Listen(context.Background(), servers...)
	if err != nil {
		return nil, err
	}
	for i, s := range servers {
		go func() { _ = s.Serve(listeners[i]) }()
	}
	return func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		for _, s := range servers {
			_ = s.Shutdown(sctx)
		}
	}, nil
}

// startError is a failure to start or run, with the log message that
// says what failed.
type startError struct {
	msg string
	err error
}

func (e startError) Error() string { return e.msg }
func (e startError) Unwrap() error { return e.err }

func failed(msg string, err error) error { return startError{msg: msg, err: err} }

// flush runs shutdown (a provider's) within 5 s, logging msg if it fails.
func flush(logger *zap.SugaredLogger, msg string, shutdown func(context.Context) error) {
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := shutdown(sctx); err != nil {
		logger.Warnw(msg, zap.Error(err))
	}
}

// newClients makes the Kubernetes and Eventing clients from the API
// server's configuration (restConfig).
func newClients(kubeconfig string) (clients, error) {
	cfg, err := restConfig(kubeconfig)
	if err != nil {
		return clients{}, fmt.Errorf("no Kubernetes API server configuration: %w", err)
	}
	cfg.QPS, cfg.Burst = 50, 100
	kc, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return clients{}, fmt.Errorf("the Kubernetes client: %w", err)
	}
	ec, err := versioned.NewForConfig(cfg)
	if err != nil {
		return clients{}, fmt.Errorf("the Eventing client: %w", err)
	}
	return clients{kube: kc, events: ec}, nil
}

// newMeterProvider serves the adapter's metrics through reg (Prometheus on
// METRICS_PORT, which the kit and the adapter's HPA scrape), and pushes
// them too when K_OBSERVABILITY_CONFIG's metrics ask for OTLP.
func newMeterProvider(ctx context.Context, env mtping.Env, reg *prometheus.Registry) (*sdkmetric.MeterProvider, error) {
	otlp, err := telemetry.NewOTLPMetricReader(ctx, env.Metrics)
	if err != nil {
		return nil, err
	}
	if otlp == nil {
		return telemetry.NewPrometheusMeterProvider(reg)
	}
	return telemetry.NewPrometheusMeterProvider(reg, sdkmetric.WithReader(otlp), sdkmetric.WithResource(resource.Default(mtping.Component)))
}

// readSettings reads the adapter's ConfigMap, trying again for up to a
// minute while the API server cannot answer (a node starting, say).
func readSettings(ctx context.Context, kc kubernetes.Interface, namespace string) (map[string]string, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	var settings map[string]string
	var last error
	err := wait.PollUntilContextCancel(ctx, time.Second, true, func(ctx context.Context) (bool, error) {
		settings, last = mtping.ReadSettings(ctx, kc, namespace)
		if apierrors.IsForbidden(last) || apierrors.IsUnauthorized(last) {
			return false, last // no retry mends RBAC
		}
		return last == nil, nil
	})
	if err != nil && last != nil {
		return nil, last
	}
	return settings, err
}

// restConfig is --kubeconfig when given; in a pod, the in-cluster
// configuration; elsewhere $KUBECONFIG (or ~/.kube/config).
func restConfig(kubeconfig string) (*rest.Config, error) {
	if kubeconfig != "" {
		return clientcmd.BuildConfigFromFlags("", kubeconfig)
	}
	cfg, err := rest.InClusterConfig()
	if err == nil {
		return cfg, nil
	}
	if !errors.Is(err, rest.ErrNotInCluster) {
		return nil, err
	}
	return clientcmd.NewNonInteractiveDeferredLoadingClientConfig(
		clientcmd.NewDefaultClientConfigLoadingRules(), &clientcmd.ConfigOverrides{}).ClientConfig()
}

// identity is the adapter's own service account: SERVICE_ACCOUNT_NAME in
// the system namespace, or in a pod the account of its mounted token.
func identity(env mtping.Env) adapter.ServiceAccount {
	if env.ServiceAccount != "" {
		return adapter.ServiceAccount{Namespace: env.SystemNamespace, Name: env.ServiceAccount}
	}
	sa, err := kube.TokenServiceAccount(kube.ServiceAccountToken)
	if err != nil {
		return adapter.ServiceAccount{}
	}
	return sa
}
