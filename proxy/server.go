package proxy

import (
	"net/http"
	"strconv"

	"go.uber.org/zap"

	"knative.dev/event-forwarding-proxy/config"
)

// NewServer returns the inbound server for h: HTTP/1.1 and h2c (prior
// knowledge) on cfg.Port, HTTP/2 sized for many held calls per connection,
// bounded header size and header read time, and no write timeout, which
// would cut legitimate long calls.
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
	return s
}
