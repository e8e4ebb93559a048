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

// Command proxy is the event-forwarding proxy: a stateless Knative Service
// that forwards each event to the destination named in its Kn-Forward-To
// header and holds the long synchronous calls for the senders.
package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"knative.dev/event-forwarding-proxy/config"
	"knative.dev/event-forwarding-proxy/internal/telemetry"
	"knative.dev/event-forwarding-proxy/proxy"
	"knative.dev/event-forwarding-proxy/proxy/kube"

	// Roots of its own for https sinks: the release's image holds no CA
	// files, and Go uses these only when it finds none.
	_ "golang.org/x/crypto/x509roots/fallback"
)

func main() {
	os.Exit(run())
}

func run() int {
	cfg, err := config.ProxyFromEnv(os.LookupEnv, config.MemoryLimit())
	if err != nil {
		fmt.Fprintln(os.Stderr, "proxy: invalid configuration:", err)
		return 2
	}
	logger := telemetry.NewLogger(cfg.LogLevel)
	defer func() { _ = logger.Sync() }()
	if limit, ok := config.SoftMemoryLimit(os.LookupEnv, config.MemoryLimit()); ok {
		debug.SetMemoryLimit(limit)
		logger.Infow("Soft memory limit set from the container's limit", "bytes", limit)
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()

	reg := prometheus.NewRegistry()
	mp, err := telemetry.NewPrometheusMeterProvider(reg)
	if err != nil {
		logger.Errorw("Cannot set up metrics", "error", err)
		return 1
	}
	opts := []proxy.Option{proxy.WithMeterProvider(mp)}
	tp, err := telemetry.NewTracerProvider(ctx, telemetry.TraceParams{
		Exporter: cfg.TraceExporter, SamplingRatio: cfg.TraceSamplingRatio, ServiceName: "event-forwarding-proxy",
	})
	if err != nil {
		logger.Errorw("Cannot set up tracing", "error", err)
		return 1
	}
	if tp != nil {
		opts = append(opts, proxy.WithTracerProvider(tp))
		defer func() {
			sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_ = tp.Shutdown(sctx)
		}()
	}
	if cfg.Auth == "oidc" {
		actx, cancel := context.WithTimeout(ctx, time.Minute)
		a, err := kube.NewAuthenticator(actx, cfg)
		cancel()
		if err != nil {
			logger.Errorw("Cannot set up caller authentication", "error", err)
			return 1
		}
		opts = append(opts, proxy.WithAuthenticator(a))
	}
	if cfg.TrustBundlesNamespace != "" {
		roots, err := kube.WatchTrustBundles(ctx, cfg, logger)
		if err != nil {
			logger.Errorw("Cannot load the trust bundles", "namespace", cfg.TrustBundlesNamespace, "error", err)
			return 1
		}
		opts = append(opts, proxy.WithTrustRoots(roots))
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

	// Drain: readiness fails and new calls are refused at once; held calls
	// run to completion, bounded by the drain timeout.
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
	return 0
}
