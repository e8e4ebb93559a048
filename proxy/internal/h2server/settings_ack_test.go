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

package h2server

import (
	"bytes"
	"context"
	"io"
	"log"
	"net"
	"net/http"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// TestSettingsAckPrecedesTheDataItAllows pins h2spec's 6.9.2/1, which
// failed now and then under load: a caller sets SETTINGS_INITIAL_WINDOW_SIZE
// to 0, opens a stream whose answer then waits for the window, and raises
// the window to 1; it waits for the SETTINGS ack, then for one byte of
// DATA. The raised window must not let the answer's writer go before the
// ack is written, or its DATA may precede the ack. The race is made
// deterministic by holding the connection's write lock, as a writer busy
// on a slow socket does, while the SETTINGS frame comes in: once the
// reading goroutine waits for the lock, the new window must not be in
// force yet.
func TestSettingsAckPrecedesTheDataItAllows(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	cc, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	sc, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	_ = cc.SetDeadline(time.Now().Add(10 * time.Second)) // a broken server fails the test, never hangs it
	if _, err := io.WriteString(cc, http2.ClientPreface); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(sc, make([]byte, len(http2.ClientPreface))); err != nil {
		t.Fatal(err)
	}
	s := &Server{}
	served := make(chan struct{})
	go func() {
		defer close(served)
		s.ServeConn(context.Background(), sc, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			_, _ = w.Write([]byte("ab")) // more than the window allows
		}), log.New(io.Discard, "", 0))
	}()
	defer func() { <-served }()
	defer cc.Close() // runs first: ServeConn ends with the connection

	fr := http2.NewFramer(cc, cc)
	check := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	check(fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 0}))
	// next reads frames up to one that want accepts.
	next := func(what string, want func(http2.Frame) bool) http2.Frame {
		t.Helper()
		for {
			f, err := fr.ReadFrame()
			if err != nil {
				t.Fatalf("waiting for %s: %v", what, err)
			}
			if want(f) {
				return f
			}
		}
	}
	isAck := func(f http2.Frame) bool {
		sf, ok := f.(*http2.SettingsFrame)
		return ok && sf.IsAck()
	}
	next("the server's SETTINGS", func(f http2.Frame) bool {
		sf, ok := f.(*http2.SettingsFrame)
		return ok && !sf.IsAck()
	})
	check(fr.WriteSettingsAck())
	next("the ack of the first SETTINGS", isAck)

	var block bytes.Buffer
	enc := hpack.NewEncoder(&block)
	for _, kv := range [][2]string{{":method", "GET"}, {":scheme", "http"}, {":authority", "x"}, {":path", "/"}} {
		check(enc.WriteField(hpack.HeaderField{Name: kv[0], Value: kv[1]}))
	}
	check(fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: block.Bytes(), EndStream: true, EndHeaders: true}))
	// The answer's HEADERS are out: its writer waits for the window.
	next("the answer's HEADERS", func(f http2.Frame) bool {
		_, ok := f.(*http2.HeadersFrame)
		return ok
	})

	var c *conn
	s.mu.Lock()
	for k := range s.conns {
		c = k
	}
	s.mu.Unlock()
	c.w.Lock()
	check(fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 1}))
	// The reading goroutine comes to wait for the lock, to write the ack.
	for deadline := time.Now().Add(10 * time.Second); c.w.Waiting() == 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			c.w.Unlock()
			t.Fatal("nothing came to wait for the write lock after the second SETTINGS")
		}
	}
	c.mu.Lock()
	inForce := c.ctl.Peer.InitialWindow
	c.mu.Unlock()
	c.w.Unlock()
	if inForce != 0 {
		t.Errorf("the raised window (%d) was in force while its ack could not be written", inForce)
	}

	// On the wire: the ack, then the one byte the window allows.
	f := next("the ack or DATA", func(f http2.Frame) bool {
		_, data := f.(*http2.DataFrame)
		return data || isAck(f)
	})
	if !isAck(f) {
		t.Fatalf("got %v before the ack of the SETTINGS that allowed it", f.Header())
	}
	f = next("DATA", func(f http2.Frame) bool {
		_, ok := f.(*http2.DataFrame)
		return ok
	})
	if n := len(f.(*http2.DataFrame).Data()); n != 1 {
		t.Errorf("DATA of %d bytes, want the 1 the window allows", n)
	}
}
