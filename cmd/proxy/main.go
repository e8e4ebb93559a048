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
	"fmt"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"

	"knative.dev/event-forwarding-proxy/config"
	"knative.dev/event-forwarding-proxy/internal/telemetry"
	"knative.dev/event-forwarding-proxy/proxy/process"

	// Roots of its own for https sinks: the release's image holds no CA
	// files, and Go uses these only when it finds none.
	_ "golang.org/x/crypto/x509roots/fallback"
)

func main() {
	os.Exit(run())
}

// run reads the environment, then runs the proxy until SIGTERM or SIGINT
// and its drain (process.Run).
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
	return process.Run(ctx, cfg, logger)
}
