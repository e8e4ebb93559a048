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
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"knative.dev/event-forwarding-proxy/proxy/proxytest"
)

// TestConnLimitListener: at the limit, a new connection is closed as soon
// as it is accepted, and the refusal is reported; once a connection
// closes, its place is free for the next one.
func TestConnLimitListener(t *testing.T) {
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	core, logs := observer.New(zapcore.InfoLevel)
	ln := NewConnLimitListener(raw, 2, zap.New(core).Sugar())
	t.Cleanup(func() { _ = ln.Close() })
	accepted := make(chan net.Conn, 8)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted <- c
		}
	}()
	dial := func() net.Conn {
		t.Helper()
		c, err := net.DialTimeout("tcp", raw.Addr().String(), 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		return c
	}
	// closedByServer waits for c's read to end: EOF or a reset, the
	// server's close; a deadline means it is still open.
	closedByServer := func(c net.Conn, within time.Duration) bool {
		_ = c.SetReadDeadline(time.Now().Add(within))
		_, err := c.Read(make([]byte, 1))
		var ne net.Error
		return err != nil && !(errors.As(err, &ne) && ne.Timeout())
	}
	recv := func(what string) net.Conn {
		t.Helper()
		select {
		case c := <-accepted:
			return c
		case <-time.After(10 * time.Second):
			t.Fatalf("no %s", what)
			return nil
		}
	}
	_, second := dial(), dial()
	held := recv("first connection accepted")
	recv("second connection accepted")
	third := dial()
	if !closedByServer(third, 10*time.Second) {
		t.Fatal("a connection beyond the limit stayed open")
	}
	proxytest.Eventually(t, 5*time.Second, func() bool {
		return logs.FilterMessage("Refused connections beyond FORWARD_MAX_CONNECTIONS").Len() == 1
	}, "the refusal reported")
	if closedByServer(second, 100*time.Millisecond) {
		t.Fatal("a connection within the limit was closed")
	}
	_ = held.Close()
	_ = held.Close() // a second Close gives no second place back
	fourth := dial()
	got := recv("connection once a place was free")
	if _, err := fourth.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 1)
	if _, err := io.ReadFull(got, b); err != nil || b[0] != 'x' {
		t.Fatalf("the fourth connection carried %q, %v", b, err)
	}
	if !closedByServer(dial(), 10*time.Second) {
		t.Fatal("a connection beyond the limit stayed open after a double Close")
	}
}
