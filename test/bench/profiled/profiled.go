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

// Package profiled runs the proxy's handler chain in-process, configured
// from the environment exactly as cmd/proxy is, with net/http/pprof and
// CPU-profile start and stop on the metrics port: the bench's way to see
// where the proxy's memory per held call and CPU per request go (the real
// binary has no pprof endpoint).
package profiled

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"runtime"
	rpprof "runtime/pprof"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.uber.org/zap"
	"golang.org/x/net/http2"

	"knative.dev/event-forwarding-proxy/config"
	"knative.dev/event-forwarding-proxy/internal/telemetry"
	"knative.dev/event-forwarding-proxy/proxy"
	"knative.dev/event-forwarding-proxy/test/bench/h2cserver"
)

// Paths on the metrics port, besides /metrics and /debug/pprof/.
const (
	// PathCPUStart starts a CPU profile into the file named by ?file=.
	PathCPUStart = "/prof/cpu/start"
	// PathCPUStop stops it.
	PathCPUStop = "/prof/cpu/stop"
	// PathGC runs a garbage collection (before a heap profile).
	PathGC = "/prof/gc"
)

// EnvH2Server, set to "xnet", makes Serve serve h2c with
// golang.org/x/net/http2 and its random write scheduler (package
// h2cserver) instead of net/http's built-in h2c: an experiment on the
// proxy's inbound side that changes nothing else.
const EnvH2Server = "BENCH_PROXY_H2_SERVER"

// Serve serves the proxy on PORT and metrics plus profiling on
// METRICS_PORT until ctx ends.
func Serve(ctx context.Context) error {
	cfg, err := config.ProxyFromEnv(os.LookupEnv, config.MemoryLimit())
	if err != nil {
		return err
	}
	reg := prometheus.NewRegistry()
	mp, err := telemetry.NewPrometheusMeterProvider(reg)
	if err != nil {
		return err
	}
	p := proxy.New(cfg, zap.NewNop().Sugar(), proxy.WithMeterProvider(mp))
	srv := p.Server(cfg, zap.NewNop().Sugar())
	msrv := &http.Server{Addr: ":" + strconv.Itoa(cfg.MetricsPort), Handler: mux(reg), ReadHeaderTimeout: 10 * time.Second}
	served := make(chan error, 2)
	for _, s := range []*http.Server{srv, msrv} {
		ln, err := net.Listen("tcp", s.Addr)
		if err != nil {
			return err
		}
		if s == srv && os.Getenv(EnvH2Server) == "xnet" {
			go func() { served <- h2cserver.Serve(ctx, ln, srv, xnetServer(cfg)) }()
			continue
		}
		go func() { served <- s.Serve(ln) }()
	}
	select {
	case err = <-served:
	case <-ctx.Done():
	}
	return errors.Join(err, srv.Close(), msrv.Close())
}

// xnetServer is the HTTP/2 tuning of cfg for golang.org/x/net/http2.
func xnetServer(cfg *config.Proxy) *http2.Server {
	return &http2.Server{
		MaxConcurrentStreams:         uint32(cfg.H2MaxConcurrentStreams),
		MaxUploadBufferPerConnection: int32(cfg.H2ConnWindowBytes),
		MaxUploadBufferPerStream:     int32(cfg.H2StreamWindowBytes),
		IdleTimeout:                  cfg.IdleTimeout,
		ReadIdleTimeout:              30 * time.Second,
		PingTimeout:                  15 * time.Second,
		NewWriteScheduler:            h2cserver.RandomScheduler,
	}
}

func mux(reg *prometheus.Registry) *http.ServeMux {
	m := http.NewServeMux()
	m.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	m.HandleFunc("/debug/pprof/", pprof.Index)
	m.HandleFunc("/debug/pprof/profile", pprof.Profile)
	m.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	m.HandleFunc("/debug/pprof/trace", pprof.Trace)
	var cpu cpuProfile
	m.HandleFunc("POST "+PathCPUStart, cpu.start)
	m.HandleFunc("POST "+PathCPUStop, cpu.stop)
	m.HandleFunc("POST "+PathGC, func(w http.ResponseWriter, _ *http.Request) {
		runtime.GC()
		w.WriteHeader(http.StatusNoContent)
	})
	return m
}

type cpuProfile struct {
	mu sync.Mutex
	f  *os.File
}

func (c *cpuProfile) start(w http.ResponseWriter, r *http.Request) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.f != nil {
		http.Error(w, "already profiling", http.StatusConflict)
		return
	}
	f, err := os.Create(r.URL.Query().Get("file"))
	if err == nil {
		err = rpprof.StartCPUProfile(f)
	}
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	c.f = f
	w.WriteHeader(http.StatusNoContent)
}

func (c *cpuProfile) stop(w http.ResponseWriter, _ *http.Request) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.f == nil {
		http.Error(w, "not profiling", http.StatusConflict)
		return
	}
	rpprof.StopCPUProfile()
	err := c.f.Close()
	c.f = nil
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
