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

// Package process is the proxy's process from its configuration on: the
// telemetry, the Kubernetes parts (caller authentication, trust bundles),
// the handler chain on its port, the drain at the end. cmd/proxy reads the
// environment and calls Run. It links the Kubernetes client, as proxy/kube
// does, and the proxy package does not.
package process

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"knative.dev/event-forwarding-proxy/config"
	"knative.dev/event-forwarding-proxy/internal/telemetry"
	"knative.dev/event-forwarding-proxy/proxy"
	"knative.dev/event-forwarding-proxy/proxy/kube"
)

// Run serves the proxy as cfg says until ctx ends, then drains: readiness
// fails and new calls are refused at once, held calls run to completion
// within the drain timeout. It returns the process's exit status: 0 after
// a drain, 1 when the proxy could not start or its server stopped.
func Run(ctx context.Context, cfg *config.Proxy, logger *zap.SugaredLogger) int {
	reg := prometheus.NewRegistry()
	opts, shutdown, err := options(ctx, cfg, logger, reg)
	defer shutdown()
	if err != nil {
		logger.Errorw("Cannot start", "error", err)
		return 1
	}
	p := proxy.New(cfg, logger, opts...)
	srv := p.Server(cfg, logger)
	msrv := telemetry.NewMetricsServer(cfg.MetricsPort, reg)
	servers := []*http.Server{srv, msrv}
	listeners, err := telemetry.Listen(context.Background(), servers...)
	if err != nil {
		logger.Errorw("Cannot listen", "error", err)
		return 1
	}
	listeners[0] = proxy.NewFramingListener(proxy.NewConnLimitListener(listeners[0], cfg.MaxConnections, logger), cfg.MaxHeaderBytes)
	served := make(chan error, len(servers))
	for i, s := range servers {
		go func() { served <- s.Serve(listeners[i]) }()
	}
	logger.Infow("Forwarding events", "addr", srv.Addr, "metricsAddr", msrv.Addr, "maxInflight", cfg.MaxInflight,
		"memoryBudgetBytes", cfg.MemoryBudgetBytes,
		"allowedHosts", cfg.AllowedHosts, "maxTimeout", cfg.MaxTimeout.String())

	select {
	case err := <-served:
		logger.Errorw("Server stopped", "error", err)
		return 1
	case <-ctx.Done():
	}
	drain(cfg, logger, p, srv, msrv)
	return 0
}

// options builds what proxy.New takes besides the configuration: metrics
// (served through reg), tracing, caller authentication and trust bundles,
// as cfg asks. shutdown flushes the tracer; call it even on error.
func options(ctx context.Context, cfg *config.Proxy, logger *zap.SugaredLogger, reg *prometheus.Registry) (_ []proxy.Option, shutdown func(), _ error) {
	shutdown = func() {}
	mp, err := telemetry.NewPrometheusMeterProvider(reg)
	if err != nil {
		return nil, shutdown, fmt.Errorf("setting up metrics: %w", err)
	}
	opts := []proxy.Option{proxy.WithMeterProvider(mp)}
	tp, err := telemetry.NewTracerProvider(ctx, telemetry.TraceParams{
		Exporter: cfg.TraceExporter, SamplingRatio: cfg.TraceSamplingRatio, ServiceName: "event-forwarding-proxy",
	})
	if err != nil {
		return nil, shutdown, fmt.Errorf("setting up tracing: %w", err)
	}
	if tp != nil {
		opts = append(opts, proxy.WithTracerProvider(tp))
		shutdown = func() {
			sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_ = tp.Shutdown(sctx)
		}
	}
	if cfg.Auth == "oidc" {
		actx, cancel := context.WithTimeout(ctx, time.Minute)
		a, err := kube.NewAuthenticator(actx, cfg)
		cancel()
		if err != nil {
			return nil, shutdown, fmt.Errorf("setting up caller authentication: %w", err)
		}
		opts = append(opts, proxy.WithAuthenticator(a))
	}
	if cfg.TrustBundlesNamespace != "" {
		roots, err := kube.WatchTrustBundles(ctx, cfg, logger)
		if err != nil {
			return nil, shutdown, fmt.Errorf("loading the trust bundles of namespace %s: %w", cfg.TrustBundlesNamespace, err)
		}
		opts = append(opts, proxy.WithTrustRoots(roots))
	}
	return opts, shutdown, nil
}

// drain ends p: it refuses new calls, waits the quiet period for the
// endpoints to drop the pod, lets held calls finish within the drain
// timeout, then stops the servers.
func drain(cfg *config.Proxy, logger *zap.SugaredLogger, p *proxy.Proxy, srv, msrv *http.Server) {
	p.Drain()
	logger.Infow("Draining", "held", p.Limiter.Inflight(), "timeout", cfg.DrainTimeout.String())
	time.Sleep(cfg.DrainQuietPeriod)
	dctx, cancel := context.WithTimeout(context.Background(), cfg.DrainTimeout)
	defer cancel()
	if err := p.Shutdown(dctx); err != nil {
		logger.Warnw("Drain deadline passed with calls still held", "held", p.Limiter.Inflight(), "error", err)
	}
	sctx, scancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer scancel()
	if err := srv.Shutdown(sctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		logger.Warnw("Server shutdown", "error", err)
	}
	_ = msrv.Shutdown(sctx)
	logger.Info("Drained")
}
