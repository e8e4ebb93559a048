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

package proxy

import (
	"net/http"
	"strconv"

	"go.uber.org/zap"

	"knative.dev/event-forwarding-proxy/config"
	"knative.dev/event-forwarding-proxy/proxy/internal/h2server"
)

// NewServer returns the inbound server for h: HTTP/1.1 and h2c (prior
// knowledge) on cfg.Port, HTTP/2 sized for many held calls per connection,
// bounded header size and header read time, and no write timeout, which
// would cut legitimate long calls.
//
// HTTP/2 is served by h2server rather than golang.org/x/net/http2 or
// net/http's copy of it: those give every stream a goroutine and a 4 KiB
// write buffer for as long as it is open, where h2server lets a held call
// keep neither (the memory per held call in docs/benchmarks.md). Its
// writers write their own frames, so no scheduler walks the open streams
// for each frame written either.
func NewServer(cfg *config.Proxy, h http.Handler, logger *zap.SugaredLogger) *http.Server {
	errorLog := zap.NewStdLog(logger.Desugar())
	s := &http.Server{
		Addr:              ":" + strconv.Itoa(cfg.Port),
		Handler:           h,
		ReadHeaderTimeout: cfg.ReadHeaderTimeout,
		IdleTimeout:       cfg.IdleTimeout,
		MaxHeaderBytes:    cfg.MaxHeaderBytes,
		ErrorLog:          errorLog,
		Protocols:         new(http.Protocols),
	}
	s.Protocols.SetHTTP1(true)
	s.Protocols.SetUnencryptedHTTP2(true)
	hc := HTTP2Config(cfg)
	h2 := &h2server.Server{
		MaxConcurrentStreams: uint32(hc.MaxConcurrentStreams),
		StreamWindow:         int32(hc.MaxReceiveBufferPerStream),
		ConnWindow:           int32(hc.MaxReceiveBufferPerConnection),
		MaxHeaderBytes:       cfg.MaxHeaderBytes,
		IdleTimeout:          cfg.IdleTimeout,
		SendPingTimeout:      hc.SendPingTimeout,
		PingTimeout:          hc.PingTimeout,
		ErrorLog:             errorLog,
	}
	h2.Configure(s)
	return s
}
