package proxy

import (
	"net/http"
	"strconv"

	"go.uber.org/zap"
	"golang.org/x/net/http2"

	"knative.dev/event-forwarding-proxy/config"
)

// NewServer returns the inbound server for h: HTTP/1.1 and h2c (prior
// knowledge) on cfg.Port, HTTP/2 sized for many held calls per connection,
// bounded header size and header read time, and no write timeout, which
// would cut legitimate long calls.
//
// HTTP/2 is served by golang.org/x/net/http2 with its random write
// scheduler rather than net/http's built-in copy, whose round-robin
// scheduler walks every open stream for each frame it writes: with tens of
// thousands of held calls on a connection, answering them costs time
// quadratic in their number (docs/benchmarks.md).
func NewServer(cfg *config.Proxy, h http.Handler, logger *zap.SugaredLogger) *http.Server {
	s := &http.Server{
		Addr:              ":" + strconv.Itoa(cfg.Port),
		Handler:           h,
		ReadHeaderTimeout: cfg.ReadHeaderTimeout,
		IdleTimeout:       cfg.IdleTimeout,
		MaxHeaderBytes:    cfg.MaxHeaderBytes,
		HTTP2:             HTTP2Config(cfg),
		ErrorLog:          zap.NewStdLog(logger.Desugar()),
		Protocols:         new(http.Protocols),
	}
	s.Protocols.SetHTTP1(true)
	s.Protocols.SetUnencryptedHTTP2(true)
	// The HTTP/2 settings come from s.HTTP2; ConfigureServer fails only
	// on a TLS configuration, which s has none of.
	if err := http2.ConfigureServer(s, &http2.Server{NewWriteScheduler: newWriteScheduler}); err != nil {
		logger.Errorw("Serving HTTP/2 with net/http's own server", zap.Error(err))
	}
	return s
}

func newWriteScheduler() http2.WriteScheduler { return http2.NewRandomWriteScheduler() }
