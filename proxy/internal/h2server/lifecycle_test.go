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
	"crypto/sha256"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/http2"

	"knative.dev/event-forwarding-proxy/internal/h2raw"
	"knative.dev/event-forwarding-proxy/proxy/internal/h2server"
)

// shutdown runs f's Shutdown on its own goroutine; the channel gives its
// result.
func shutdown(f *fixture) <-chan error {
	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		defer cancel()
		done <- f.hs.Shutdown(ctx)
	}()
	return done
}

// TestShutdownGoAway: Shutdown sends GOAWAY(NO_ERROR) naming the last
// stream; new streams are refused, the open one completes, then the
// connection closes and Shutdown returns.
func TestShutdownGoAway(t *testing.T) {
	g := newGate(t)
	f := startServer(t, nil, holdHandler(g))
	c := h2raw.Connect(t, f.addr)
	c.Get(1, "/")
	c.Alive() // the server has stream 1
	done := shutdown(f)
	c.Until("the GOAWAY", func() bool { return c.GoAway != nil })
	if c.GoAway.Code != http2.ErrCodeNo || c.GoAway.LastID != 1 {
		t.Errorf("GOAWAY %v naming stream %d, want NO_ERROR and 1", c.GoAway.Code, c.GoAway.LastID)
	}
	c.Get(3, "/")
	c.WantReset(3, http2.ErrCodeRefusedStream)
	select {
	case err := <-done:
		t.Fatalf("Shutdown returned (%v) with a stream open", err)
	default:
	}
	g.open()
	if st := c.OK(1, "200"); string(st.Body) != "released" {
		t.Errorf("body %q", st.Body)
	}
	c.WantClosed()
	_ = c.Conn.Close()
	if err := recv(t, done, "Shutdown to return"); err != nil {
		t.Errorf("Shutdown: %v", err)
	}
}

// TestShutdownIdleConnection: a connection with no stream gets its GOAWAY
// and is closed at once.
func TestShutdownIdleConnection(t *testing.T) {
	f := startServer(t, nil, okHandler)
	c := h2raw.Connect(t, f.addr)
	c.Get(1, "/")
	c.OK(1, "200")
	done := shutdown(f)
	c.WantGoAway(http2.ErrCodeNo)
	_ = c.Conn.Close()
	if err := recv(t, done, "Shutdown to return"); err != nil {
		t.Errorf("Shutdown: %v", err)
	}
}

// TestShutdownLastAnswerArrives: a large answer written while the
// connection is going away reaches Go's client whole: closing the
// connection after the last stream must not destroy it in flight.
func TestShutdownLastAnswerArrives(t *testing.T) {
	payload := pattern(8 << 20)
	started := make(chan struct{})
	going := make(chan struct{})
	f := startServer(t, nil, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(started)
		<-going
		_, _ = w.Write(payload)
	}))
	f.hs.RegisterOnShutdown(func() { close(going) })
	type result struct {
		body []byte
		err  error
	}
	results := make(chan result, 1)
	go func() {
		resp, err := f.client(t).Get(f.url)
		if err != nil {
			results <- result{err: err}
			return
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		results <- result{body, err}
	}()
	recv(t, started, "the handler")
	done := shutdown(f)
	r := recv(t, results, "the answer")
	if r.err != nil || sha256.Sum256(r.body) != sha256.Sum256(payload) {
		t.Errorf("answer during shutdown: %d of %d bytes, %v", len(r.body), len(payload), r.err)
	}
	if err := recv(t, done, "Shutdown to return"); err != nil {
		t.Errorf("Shutdown: %v", err)
	}
}

// TestIdleTimeout: a connection without streams for IdleTimeout gets a
// GOAWAY and is closed; one with an open stream is not.
func TestIdleTimeout(t *testing.T) {
	const idle = 100 * time.Millisecond
	g := newGate(t)
	f := startServer(t, &h2server.Server{IdleTimeout: idle}, holdHandler(g))
	c := h2raw.Connect(t, f.addr)
	c.Get(1, "/")
	blockedIn(t, "holdHandler")
	// A connection opened after c's stream, and idle, is closed: c has
	// been without a stream for longer than IdleTimeout by then, had its
	// open stream not counted.
	idler := h2raw.Connect(t, f.addr)
	idler.WantGoAway(http2.ErrCodeNo)
	c.Alive()
	g.open()
	c.OK(1, "200")
	c.WantGoAway(http2.ErrCodeNo)
	if c.GoAway.LastID != 1 {
		t.Errorf("GOAWAY names stream %d, want 1", c.GoAway.LastID)
	}
	if strings.Contains(f.log.String(), "idle") {
		t.Errorf("an idle close was logged:\n%s", f.log)
	}
}

// TestPingTimeout: a caller silent for SendPingTimeout gets a PING; one
// that does not answer it within PingTimeout is disconnected.
func TestPingTimeout(t *testing.T) {
	f := startServer(t, &h2server.Server{SendPingTimeout: 100 * time.Millisecond, PingTimeout: 100 * time.Millisecond}, okHandler)
	c := h2raw.Connect(t, f.addr)
	c.NoPingAck = true
	for c.Step() != nil {
	}
	if len(c.Pings) == 0 {
		t.Error("closed without a PING first")
	}
	eventually(t, "the close logged", func() bool { return strings.Contains(f.log.String(), "PING") })
}

// TestPingAnswered: a caller that answers the PINGs keeps its connection.
func TestPingAnswered(t *testing.T) {
	f := startServer(t, &h2server.Server{SendPingTimeout: 50 * time.Millisecond, PingTimeout: 100 * time.Millisecond}, okHandler)
	c := h2raw.Connect(t, f.addr)
	c.Until("three PINGs", func() bool { return len(c.Pings) >= 3 })
	c.Get(1, "/")
	c.OK(1, "200")
}

// TestClientCloseCancelsRequest: a caller that closes its socket mid-stream
// cancels the request's context.
func TestClientCloseCancelsRequest(t *testing.T) {
	canceled := make(chan error, 1)
	f := startServer(t, nil, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "partial")
		_ = http.NewResponseController(w).Flush()
		<-r.Context().Done()
		canceled <- r.Context().Err()
	}))
	c := h2raw.Connect(t, f.addr)
	c.Request(1, "POST", "/", false)
	c.Data(1, []byte("half a body"), false)
	c.Until("the partial answer", func() bool { st := c.Streams[1]; return st != nil && len(st.Body) > 0 })
	_ = c.Conn.Close()
	if err := recv(t, canceled, "the request's context to end"); err == nil {
		t.Error("context done without an error")
	}
}

// TestHTTP1StillServed: the server's HTTP/1.1 side is untouched.
func TestHTTP1StillServed(t *testing.T) {
	f := startServer(t, nil, http.HandlerFunc(echo))
	resp, err := http.Post(f.url+"/h1", "text/plain", strings.NewReader("over HTTP/1.1"))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.ProtoMajor != 1 || string(body) != "over HTTP/1.1" {
		t.Errorf("%s: %q", resp.Proto, body)
	}
	http.DefaultClient.CloseIdleConnections()
}

// TestGoingAwayCloseLosesNothing: the connection closes after its last
// stream while the caller is still sending (here PINGs, as a WINDOW_UPDATE
// or an ack would come) and still reading a large answer. Closing a socket
// with unread input sends a TCP reset, which throws away what is still
// queued for the caller: the answer must nonetheless arrive whole, with its
// END_STREAM, before the connection's end.
func TestGoingAwayCloseLosesNothing(t *testing.T) {
	const size = 4 << 20
	g := newGate(t)
	f := startServer(t, nil, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		<-g.ch
		_, _ = w.Write(make([]byte, size))
	}))
	c := h2raw.Connect(t, f.addr, http2.Setting{ID: http2.SettingInitialWindowSize, Val: 1<<31 - 1})
	c.Check(c.Framer.WriteWindowUpdate(0, 1<<31-1-65535))
	c.Get(1, "/")
	c.Alive()
	done := shutdown(f)
	c.Until("the GOAWAY", func() bool { return c.GoAway != nil })
	// One frame, one Write: the pinger's frames never interleave with the
	// acks the reading side writes.
	var ping bytes.Buffer
	_ = http2.NewFramer(&ping, nil).WritePing(false, [8]byte{'p'})
	stop := make(chan struct{})
	pinged := make(chan struct{})
	go func() {
		defer close(pinged)
		for {
			select {
			case <-stop:
				return
			case <-time.After(200 * time.Microsecond):
			}
			if _, err := c.Conn.Write(ping.Bytes()); err != nil {
				return
			}
		}
	}()
	defer func() { close(stop); <-pinged }()
	g.open()
	st := c.Stream(1)
	// A slow reader, a frame per tick: the server's queue stays full.
	slow := time.NewTicker(200 * time.Microsecond)
	defer slow.Stop()
	for !st.Ended && st.RST == nil && c.ClosedErr == nil {
		<-slow.C
		c.Step()
	}
	if !st.Ended || len(st.Body) != size {
		t.Fatalf("%d of %d bytes, END_STREAM %v, reset %v, before the connection ended: %v\nserver log:\n%s",
			len(st.Body), size, st.Ended, st.RST, c.ClosedErr, f.log)
	}
	for c.ClosedErr == nil {
		c.Step()
	}
	_ = c.Conn.Close()
	if err := recv(t, done, "Shutdown to return"); err != nil {
		t.Errorf("Shutdown: %v", err)
	}
}
