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

// Package h2server serves HTTP/2 over cleartext TCP with prior knowledge
// (h2c) for net/http's server, in place of golang.org/x/net/http2's.
//
// It exists for the calls the proxy holds: x/net/http2 runs every stream's
// handler on a goroutine that lives as long as the stream, with a 4 KiB
// write buffer, so each held call costs a goroutine and its stack however
// little it does. Here a handler may detach its stream (Detach): the
// handler returns, its goroutine ends, and the stream stays open, holding
// a small record, until whoever has the answer writes it and ends the
// stream. Frames are written by the goroutine that has them under the
// connection's write lock, as delivery/h2c's client does; nothing is
// queued. docs/architecture.md tells where it sits.
package h2server

import (
	"context"
	"crypto/tls"
	"io"
	"log"
	"math"
	"net"
	"net/http"
	"sync"
	"time"

	"golang.org/x/net/http2"
)

// Server is the HTTP/2 side of an http.Server (Configure). The zero value
// serves with the defaults given below.
type Server struct {
	// MaxConcurrentStreams bounds the streams a caller may have open on
	// one connection, counting a stream until its handler is done with
	// it, even if the caller reset it (250 if zero).
	MaxConcurrentStreams uint32
	// StreamWindow and ConnWindow are what the caller may send on a
	// stream and on the connection before we read it: 256 KiB and 4 MiB if
	// zero.
	StreamWindow int32
	ConnWindow   int32
	// MaxHeaderBytes bounds a request's header list as RFC 9113 counts
	// it (http.DefaultMaxHeaderBytes if zero); a request over it gets a
	// 431.
	MaxHeaderBytes int
	// IdleTimeout closes a connection that carried no stream for this
	// long (none if zero).
	IdleTimeout time.Duration
	// SendPingTimeout: a connection silent for this long gets a PING, and
	// is closed if PingTimeout passes without its ack (30 s and 15 s if
	// zero).
	SendPingTimeout time.Duration
	PingTimeout     time.Duration
	// WriteTimeout bounds one write to a caller's socket: a caller that
	// stops reading while its windows let us send loses the connection
	// (30 s if zero).
	WriteTimeout time.Duration
	// ErrorLog logs handler panics and broken connections (the
	// http.Server's, or log's default, if nil).
	ErrorLog *log.Logger

	mu       sync.Mutex
	conns    map[*conn]struct{}
	shutdown bool
}

// nextProtoUnencryptedHTTP2 is the key under which net/http hands over a
// cleartext connection that began with the HTTP/2 preface (Go 1.24+).
const nextProtoUnencryptedHTTP2 = "unencrypted_http2"

// Configure makes hs serve h2c with prior knowledge through s. hs must
// enable unencrypted HTTP/2 in its Protocols; its Shutdown sends every
// connection a GOAWAY and lets it close once its streams are done.
func (s *Server) Configure(hs *http.Server) {
	if hs.TLSNextProto == nil {
		hs.TLSNextProto = map[string]func(*http.Server, *tls.Conn, http.Handler){}
	}
	hs.TLSNextProto[nextProtoUnencryptedHTTP2] = s.serveUnencrypted
	// net/http puts its own HTTP/2 server in unless "h2" is taken.
	hs.TLSNextProto["h2"] = s.serveTLS
	hs.RegisterOnShutdown(s.goAwayAll)
}

// serveUnencrypted serves a connection net/http handed over, its preface
// already read. h is net/http's wrapper, which knows the connection's base
// context.
func (s *Server) serveUnencrypted(hs *http.Server, tc *tls.Conn, h http.Handler) {
	u, ok := tc.NetConn().(interface{ UnencryptedNetConn() net.Conn })
	if !ok {
		s.logf(hs, "h2server: net/http handed over a connection it did not mark as cleartext")
		_ = tc.NetConn().Close()
		return
	}
	s.serveHandedOver(hs, u.UnencryptedNetConn(), h)
}

// serveTLS serves an HTTP/2 connection negotiated by TLS, whose preface is
// still to come.
func (s *Server) serveTLS(hs *http.Server, tc *tls.Conn, h http.Handler) {
	_ = tc.SetReadDeadline(time.Now().Add(10 * time.Second))
	preface := make([]byte, len(http2.ClientPreface))
	if _, err := io.ReadFull(tc, preface); err != nil || string(preface) != http2.ClientPreface {
		_ = tc.Close()
		return
	}
	_ = tc.SetReadDeadline(time.Time{})
	s.serveHandedOver(hs, tc, h)
}

// serveHandedOver serves a connection hs handed over, with the base
// context h (net/http's wrapper) knows.
func (s *Server) serveHandedOver(hs *http.Server, nc net.Conn, h http.Handler) {
	ctx := context.Background()
	if b, ok := h.(interface{ BaseContext() context.Context }); ok {
		ctx = b.BaseContext()
	}
	logger := s.ErrorLog
	if logger == nil {
		logger = hs.ErrorLog
	}
	s.ServeConn(ctx, nc, h, logger)
}

func (s *Server) logf(hs *http.Server, format string, args ...any) {
	switch {
	case s.ErrorLog != nil:
		s.ErrorLog.Printf(format, args...)
	case hs != nil && hs.ErrorLog != nil:
		hs.ErrorLog.Printf(format, args...)
	default:
		log.Printf(format, args...)
	}
}

// ServeConn serves nc, whose client preface (the 24 bytes of "PRI * ...")
// has been read, until it closes. ctx is the connection's base context:
// every request's context derives from it. logger may be nil.
func (s *Server) ServeConn(ctx context.Context, nc net.Conn, h http.Handler, logger *log.Logger) {
	if logger == nil {
		logger = log.Default()
	}
	c := newConn(s, ctx, nc, h, logger)
	if !s.track(c) {
		c.closeWith(errShutdown)
		return
	}
	defer s.untrack(c)
	c.serve()
}

func (s *Server) track(c *conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.shutdown {
		return false
	}
	if s.conns == nil {
		s.conns = make(map[*conn]struct{})
	}
	s.conns[c] = struct{}{}
	return true
}

func (s *Server) untrack(c *conn) {
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
}

// goAwayAll starts the graceful close of every connection: a GOAWAY, no
// new stream, and the close once the open streams are done.
func (s *Server) goAwayAll() {
	s.mu.Lock()
	s.shutdown = true
	conns := make([]*conn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	s.mu.Unlock()
	for _, c := range conns {
		c.goAway()
	}
}

func (s *Server) maxStreams() uint32 {
	if s.MaxConcurrentStreams == 0 {
		return 250
	}
	return s.MaxConcurrentStreams
}

func (s *Server) streamWindow() int64 { return int64(orDefault(s.StreamWindow, 256<<10)) }
func (s *Server) connWindow() int64   { return int64(orDefault(s.ConnWindow, 4<<20)) }

// headerListLimit is what SETTINGS_MAX_HEADER_LIST_SIZE announces: the
// header bytes, plus the 32 bytes RFC 9113 counts for each of ten fields,
// as x/net/http2 and net/http's HTTP/1.1 allow alike.
func (s *Server) headerListLimit() uint32 {
	n := orDefault(s.MaxHeaderBytes, http.DefaultMaxHeaderBytes)
	return uint32(min(int64(n)+10*32, math.MaxUint32))
}

func orDefault[T int | int32 | uint32 | time.Duration](v, def T) T {
	if v <= 0 {
		return def
	}
	return v
}
