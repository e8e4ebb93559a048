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

// Package h2cserver serves HTTP/1.1 and h2c (HTTP/2 with prior knowledge)
// on one listener with golang.org/x/net/http2's server, which, unlike
// net/http's built-in h2c, takes a write scheduler.
package h2cserver

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"net"
	"net/http"
	"sync"
	"time"

	"golang.org/x/net/http2"
)

// h2cPreface opens every HTTP/2 connection with prior knowledge.
var h2cPreface = []byte(http2.ClientPreface)

// RandomScheduler makes an http2.Server write frames with the random
// write scheduler, whose cost per frame grows with the streams that have
// frames queued, not with every open stream. net/http's built-in h2c
// server uses a round-robin scheduler that walks every open stream of a
// connection each time it looks for a frame to write: with 100,000 held
// calls on one connection each frame written costs milliseconds.
func RandomScheduler() http2.WriteScheduler { return http2.NewRandomWriteScheduler() }

// Serve serves h1.Handler on ln until ctx ends: connections that open
// with the HTTP/2 preface go to h2, the others to h1. It closes every
// connection before it returns.
func Serve(ctx context.Context, ln net.Listener, h1 *http.Server, h2 *http2.Server) error {
	h := h1.Handler
	h1conns := &chanListener{addr: ln.Addr(), conns: make(chan net.Conn), done: make(chan struct{})}
	var wg sync.WaitGroup
	conns := &connSet{m: map[net.Conn]struct{}{}}
	wg.Go(func() { _ = h1.Serve(h1conns) })
	go func() {
		<-ctx.Done()
		_ = ln.Close()
	}()
	var err error
	for {
		var c net.Conn
		if c, err = ln.Accept(); err != nil {
			break
		}
		wg.Go(func() {
			conns.add(c)
			defer conns.remove(c)
			br := bufio.NewReaderSize(c, 4096)
			_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
			head, perr := br.Peek(len(h2cPreface))
			_ = c.SetReadDeadline(time.Time{})
			bc := &bufConn{Conn: c, r: br}
			if perr == nil && bytes.Equal(head, h2cPreface) {
				h2.ServeConn(bc, &http2.ServeConnOpts{Context: ctx, Handler: h, BaseConfig: h1})
				return
			}
			select {
			case h1conns.conns <- bc:
			case <-ctx.Done():
				_ = c.Close()
			}
		})
	}
	close(h1conns.done)
	_ = h1.Close()
	conns.closeAll()
	wg.Wait()
	select {
	case <-ctx.Done():
		return nil // stopped: the error is the listener's closing
	default:
		return err
	}
}

// bufConn is a connection whose first bytes were peeked into r.
type bufConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *bufConn) Read(p []byte) (int, error) { return c.r.Read(p) }

// chanListener hands connections accepted elsewhere to an http.Server.
type chanListener struct {
	addr  net.Addr
	conns chan net.Conn
	done  chan struct{}
}

func (l *chanListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, errors.New("listener closed")
	}
}

func (l *chanListener) Close() error   { return nil }
func (l *chanListener) Addr() net.Addr { return l.addr }

// connSet tracks the HTTP/2 connections so that shutdown closes them.
type connSet struct {
	mu sync.Mutex
	m  map[net.Conn]struct{}
}

func (s *connSet) add(c net.Conn) {
	s.mu.Lock()
	s.m[c] = struct{}{}
	s.mu.Unlock()
}

func (s *connSet) remove(c net.Conn) {
	s.mu.Lock()
	delete(s.m, c)
	s.mu.Unlock()
}

func (s *connSet) closeAll() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for c := range s.m {
		_ = c.Close()
	}
}
