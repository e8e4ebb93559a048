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

package h2server_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"knative.dev/event-forwarding-proxy/proxy/internal/h2server"
)

// seedWriter builds the frames of a seed, with its own HPACK state as a
// connection's first frames have.
type seedWriter struct {
	buf bytes.Buffer
	fr  *http2.Framer
	enc *hpack.Encoder
	hb  bytes.Buffer
}

func newSeedWriter() *seedWriter {
	s := &seedWriter{}
	s.fr = http2.NewFramer(&s.buf, nil)
	s.enc = hpack.NewEncoder(&s.hb)
	return s
}

func (s *seedWriter) block(kv ...string) []byte {
	s.hb.Reset()
	for i := 0; i+1 < len(kv); i += 2 {
		_ = s.enc.WriteField(hpack.HeaderField{Name: kv[i], Value: kv[i+1]})
	}
	return append([]byte(nil), s.hb.Bytes()...)
}

func (s *seedWriter) request(id uint32, method string, end bool, extra ...string) {
	kv := append([]string{":method", method, ":scheme", "http", ":path", "/fuzz", ":authority", "f.test"}, extra...)
	_ = s.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: s.block(kv...), EndStream: end, EndHeaders: true})
}

func fuzzSeeds() [][]byte {
	var seeds [][]byte
	add := func(build func(s *seedWriter)) {
		s := newSeedWriter()
		build(s)
		seeds = append(seeds, s.buf.Bytes())
	}
	add(func(s *seedWriter) {}) // nothing after the SETTINGS
	add(func(s *seedWriter) { s.request(1, "GET", true) })
	add(func(s *seedWriter) {
		s.request(1, "POST", false, "content-length", "5")
		_ = s.fr.WriteData(1, true, []byte("hello"))
	})
	add(func(s *seedWriter) { // trailers
		s.request(1, "POST", false, "trailer", "x-t")
		_ = s.fr.WriteData(1, false, []byte("body"))
		_ = s.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: s.block("x-t", "v"), EndStream: true, EndHeaders: true})
	})
	add(func(s *seedWriter) { // continuation
		b := s.block(":method", "GET", ":scheme", "http", ":path", "/c", ":authority", "a", "x-long", "0123456789abcdef")
		_ = s.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: b[:5], EndStream: true})
		_ = s.fr.WriteContinuation(1, false, b[5:12])
		_ = s.fr.WriteContinuation(1, true, b[12:])
	})
	add(func(s *seedWriter) { // padding
		s.request(1, "POST", false)
		_ = s.fr.WriteDataPadded(1, false, []byte("padded"), make([]byte, 40))
		_ = s.fr.WriteDataPadded(1, true, nil, make([]byte, 255))
	})
	add(func(s *seedWriter) { // ping and window updates
		_ = s.fr.WritePing(false, [8]byte{1, 2, 3, 4, 5, 6, 7, 8})
		_ = s.fr.WriteWindowUpdate(0, 1<<20)
		s.request(1, "GET", true)
		_ = s.fr.WriteWindowUpdate(1, 1000)
		_ = s.fr.WritePing(true, [8]byte{})
	})
	add(func(s *seedWriter) { // settings
		_ = s.fr.WriteSettings(
			http2.Setting{ID: http2.SettingInitialWindowSize, Val: 1},
			http2.Setting{ID: http2.SettingMaxFrameSize, Val: 16384},
			http2.Setting{ID: http2.SettingHeaderTableSize, Val: 0},
		)
		s.request(1, "GET", true)
		_ = s.fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 70000})
		_ = s.fr.WriteSettingsAck()
	})
	add(func(s *seedWriter) { // resets, priority, goaway
		s.request(1, "POST", false)
		_ = s.fr.WritePriority(1, http2.PriorityParam{StreamDep: 0, Weight: 10})
		_ = s.fr.WriteRSTStream(1, http2.ErrCodeCancel)
		s.request(3, "GET", true)
		_ = s.fr.WriteGoAway(0, http2.ErrCodeNo, nil)
	})
	add(func(s *seedWriter) { // several streams, a body left open
		for id := uint32(1); id < 20; id += 2 {
			s.request(id, "POST", false, "x-n", fmt.Sprint(id))
			_ = s.fr.WriteData(id, id%3 == 0, bytes.Repeat([]byte{byte(id)}, int(id)*100))
		}
	})
	return seeds
}

// FuzzRequestFrames feeds arbitrary bytes, after the client preface and an
// empty SETTINGS frame, to a server over a real loopback connection, then
// half-closes it. Whatever the bytes, the server must not panic, must
// return from ServeConn once the client is gone, and every handler it
// started must return.
func FuzzRequestFrames(f *testing.F) {
	for _, seed := range fuzzSeeds() {
		f.Add(seed)
	}
	srv := &h2server.Server{MaxConcurrentStreams: 8, StreamWindow: 65535, ConnWindow: 1 << 20, MaxHeaderBytes: 4096}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { _ = ln.Close() })
	logger := log.New(io.Discard, "", 0)
	var head bytes.Buffer
	head.WriteString(http2.ClientPreface)
	_ = http2.NewFramer(&head, nil).WriteSettings()

	f.Fuzz(func(t *testing.T, frames []byte) {
		var started, returned atomic.Int32
		h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			started.Add(1)
			defer returned.Add(1)
			n, err := io.Copy(io.Discard, r.Body)
			if err != nil {
				return
			}
			w.Header().Set("X-Read", fmt.Sprint(n))
			_, _ = io.WriteString(w, "ok")
		})
		cc, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer cc.Close()
		sc, err := ln.Accept()
		if err != nil {
			t.Fatal(err)
		}
		served := make(chan struct{})
		go func() {
			defer close(served)
			_ = sc.SetReadDeadline(time.Now().Add(wait))
			preface := make([]byte, len(http2.ClientPreface))
			if _, err := io.ReadFull(sc, preface); err != nil {
				_ = sc.Close()
				return
			}
			_ = sc.SetReadDeadline(time.Time{})
			srv.ServeConn(context.Background(), sc, h, logger)
		}()
		drained := make(chan struct{})
		go func() {
			defer close(drained)
			_, _ = io.Copy(io.Discard, cc)
		}()
		_ = cc.SetWriteDeadline(time.Now().Add(wait))
		if _, err := cc.Write(append(head.Bytes()[:head.Len():head.Len()], frames...)); err != nil {
			t.Logf("writing the frames: %v", err) // the server may close first
		}
		_ = cc.(*net.TCPConn).CloseWrite()

		timeout := time.NewTimer(wait)
		defer timeout.Stop()
		select {
		case <-served:
		case <-timeout.C:
			t.Fatalf("ServeConn still running %v after the client closed its side", wait)
		}
		_ = cc.Close()
		select {
		case <-drained:
		case <-timeout.C:
			t.Fatal("the client's reader did not end")
		}
		// A handler's goroutine was started before ServeConn returned, yet
		// may not have run: none may be left in runHandler, and every
		// handler that ran must have returned.
		for goroutinesIn(runHandlerFrame) > 0 || returned.Load() != started.Load() {
			select {
			case <-timeout.C:
				t.Fatalf("%d handlers started, %d returned, %d goroutines in runHandler",
					started.Load(), returned.Load(), goroutinesIn(runHandlerFrame))
			case <-time.After(time.Millisecond):
			}
		}
	})
}
