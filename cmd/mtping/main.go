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

// Command mtping is the multi-tenant PingSource adapter that sends through
// the event-forwarding proxy: a drop-in for the image of upstream's
// pingsource-mt-adapter Deployment (docs/mtping.md).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"maps"
	"net/http"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"syscall"
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

	// Roots of its own for https sinks: the release's image holds no CA
	// files, and Go uses these only when it finds none.
	_ "golang.org/x/crypto/x509roots/fallback"
)

func main() {
	os.Exit(run())
}

func run() int {
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig file, used outside a pod (if unset, $KUBECONFIG)")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()

	// The logger needs the settings, and the settings the API server: what
	// fails before the logger exists goes to stderr.
	cfg, err := restConfig(*kubeconfig)
	if err != nil {
		fmt.Fprintln(os.Stderr, "mtping: no Kubernetes API server configuration:", err)
		return 1
	}
	cfg.QPS, cfg.Burst = 50, 100
	kc, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "mtping: Kubernetes client:", err)
		return 1
	}
	ec, err := versioned.NewForConfig(cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "mtping: Eventing client:", err)
		return 1
	}
	namespace := config.SystemNamespace(os.LookupEnv)
	settings, err := readSettings(ctx, kc, namespace)
	if err != nil {
		fmt.Fprintln(os.Stderr, "mtping:", err)
		return 1
	}
	env, err := mtping.EnvFromLookup(mtping.SettingsFirst(settings, os.LookupEnv))
	if err != nil {
		fmt.Fprintln(os.Stderr, "mtping: invalid configuration:", err)
		return 2
	}
	election, err := mtping.LeaderElectionFromSettings(settings)
	if err != nil {
		fmt.Fprintln(os.Stderr, "mtping: invalid configuration:", err)
		return 2
	}
	logger, err := telemetry.NewLoggerFromZapConfig(env.ZapConfig, env.LogLevel)
	if err != nil {
		fmt.Fprintln(os.Stderr, "mtping: invalid configuration: K_LOGGING_CONFIG:", err)
		return 2
	}
	defer func() { _ = logger.Sync() }()
	// The settings in effect, where an operator can check them: in a pod
	// they come from the controller's env and the adapter's ConfigMap.
	logger.Infow("Starting", zap.String("pod", env.PodName), zap.String("systemNamespace", env.SystemNamespace),
		zap.Stringer("drainTimeout", env.DrainTimeout), zap.Stringer("sinkTimeout", env.SinkTimeout), zap.Stringer("logLevel", logger.Level()),
		zap.Strings("settings", slices.Sorted(maps.Keys(settings))))
	reg := prometheus.NewRegistry()
	mp, err := newMeterProvider(ctx, env, reg)
	if err != nil {
		logger.Errorw("Cannot set up metrics", zap.Error(err))
		return 1
	}
	// Flushed last, with the drain's counts in.
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := mp.Shutdown(sctx); err != nil {
			logger.Warnw("Metrics not flushed at exit", zap.Error(err))
		}
	}()
	if env.Metrics.Protocol == metrics.ProtocolGRPC || env.Metrics.Protocol == metrics.ProtocolHTTPProtobuf {
		logger.Infow("Metrics pushed too (K_OBSERVABILITY_CONFIG)", zap.String("protocol", env.Metrics.Protocol),
			zap.Duration("exportInterval", env.Metrics.ExportInterval))
	}

	sp := adapter.SenderParams{Logger: logger, MeterProvider: mp, Timeout: env.SinkTimeout, SinkH2CHosts: env.SinkH2CHosts}
	if env.Tracing.Protocol != "" && env.Tracing.Protocol != tracing.ProtocolNone {
		tp, err := tracing.NewTracerProvider(ctx, env.Tracing, sdktrace.WithResource(resource.Default(mtping.Component)))
		if err != nil {
			logger.Errorw("Cannot set up tracing (K_OBSERVABILITY_CONFIG)", zap.Error(err))
			return 1
		}
		// Flushed last, after the drain's sends ended their spans.
		defer func() {
			sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if err := tp.Shutdown(sctx); err != nil {
				logger.Warnw("Spans not flushed at exit", zap.Error(err))
			}
		}()
		sp.TracerProvider = tp
		logger.Infow("Tracing on", zap.String("protocol", env.Tracing.Protocol), zap.Float64("samplingRate", env.Tracing.SamplingRate))
	}
	if id := identity(env); !id.IsZero() {
		sp.Tokens, sp.ProxyIdentity = kube.NewTokenRequester(kc), id
		logger.Infow("OIDC tokens on", zap.Stringer("identity", id))
	} else {
		logger.Info("OIDC tokens off: no service account of the adapter's own (SERVICE_ACCOUNT_NAME)")
	}
	// Trust bundles before the sender: the first tick's https sinks need them.
	sp.TrustRoots = delivery.NewTrustRoots()
	if err := trustbundles.Watch(ctx, kc, env.SystemNamespace, sp.TrustRoots, logger); err != nil {
		logger.Errorw("Cannot watch the trust bundles", zap.Error(err))
		return 1
	}
	// The route on the adapter's own Pod (controller-set SYSTEM_NAMESPACE
	// is its namespace), written from the first configuration on.
	podRoute := kube.NewPodRoute(kube.PodRouteParams{Client: kc, Namespace: env.SystemNamespace, Name: env.PodName, Component: mtping.Component, Logger: logger})
	sp.OnRouteChange = podRoute.Publish
	sender := adapter.NewSender(sp)
	if err := kube.WatchForwarding(ctx, kc, env.SystemNamespace, sender, logger); err != nil {
		logger.Errorw("Cannot watch the forwarding configuration", zap.Error(err))
		return 1
	}
	go podRoute.Run(ctx)
	a, err := mtping.New(mtping.Params{
		Sources: ec, Kube: kc, Sender: sender, Namespace: env.SystemNamespace, Identity: env.PodName,
		LeaderElection: election, Upstream: &env.Upstream,
		DrainTimeout: env.DrainTimeout, Logger: logger, MeterProvider: mp,
	})
	if err != nil {
		logger.Errorw("Cannot create the adapter", zap.Error(err))
		return 1
	}

	servers := []*http.Server{
		{Addr: ":" + strconv.Itoa(env.ProbesPort), Handler: a.ProbeHandler(), ReadHeaderTimeout: 10 * time.Second},
		telemetry.NewMetricsServer(env.MetricsPort, reg),
	}
	listeners, err := telemetry.Listen(context.Background(), servers...)
	if err != nil {
		logger.Errorw("Cannot listen", zap.Error(err))
		return 1
	}
	for i, s := range servers {
		go func() { _ = s.Serve(listeners[i]) }()
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		for _, s := range servers {
			_ = s.Shutdown(sctx)
		}
	}()

	if err := a.Run(ctx); err != nil {
		logger.Errorw("Adapter stopped", zap.Error(err))
		return 1
	}
	logger.Info("Stopped")
	return 0
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
