//go:build integration

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

package hostile

import (
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/net/http2"
)

// The attacks on raw sockets.

// maxConnections is FORWARD_MAX_CONNECTIONS of the connection flood.
const maxConnections = 64

func dial(t testing.TB, addr string) net.Conn {
	t.Helper()
	nc, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = nc.Close() })
	return nc
}

// closedByPeer reads nc until it ends or d passes, and reports whether the
// peer ended it (EOF or a reset), with what it read.
func closedByPeer(nc net.Conn, d time.Duration) (bool, []byte) {
	_ = nc.SetReadDeadline(time.Now().Add(d))
	got, err := io.ReadAll(nc)
	return !errors.Is(err, os.ErrDeadlineExceeded), got
}

// connectionFlood: 300 connections at once, each sending the HTTP/2
// preface, against FORWARD_MAX_CONNECTIONS=64 (the legitimate caller
// holds one). The proxy answers the first ones with its SETTINGS and
// closes the others as soon as it accepts them; once the flood is gone, a
// new connection is served again.
func connectionFlood(t testing.TB, a *arena) {
	const flood = 300
	conns := make([]net.Conn, flood)
	for i := range conns {
		conns[i] = dial(t, a.addr)
		if _, err := conns[i].Write([]byte(http2.ClientPreface)); err != nil && !isReset(err) {
			t.Fatal(err)
		}
	}
	// One deadline for every read: a proxy that neither serves nor
	// closes them does not hold the attack for 300 waits.
	deadline := time.Now().Add(closeWait)
	served, closed, neither := 0, 0, 0
	var firstNeither error
	for _, nc := range conns {
		_ = nc.SetReadDeadline(deadline)
		n, err := nc.Read(make([]byte, 9))
		switch {
		case n > 0:
			served++ // the server's SETTINGS
		case errors.Is(err, io.EOF) || isReset(err):
			closed++
		default:
			neither++
			if firstNeither == nil {
				firstNeither = err
			}
		}
	}
	t.Logf("connection flood: %d of %d connections served, %d closed by the proxy at once", served, flood, closed)
	if neither > 0 {
		t.Errorf("%d flood connections neither served nor closed: first %v", neither, firstNeither)
	}
	if served > maxConnections-1 || closed < flood-(maxConnections-1) {
		t.Errorf("%d connections served and %d closed, want at most %d served (FORWARD_MAX_CONNECTIONS less the legitimate caller's)",
			served, closed, maxConnections-1)
	}
	for _, nc := range conns {
		_ = nc.Close()
	}
	// Places are given back: a new caller is served.
	probe := &http.Client{Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true}, Timeout: 10 * time.Second}
	var status int
	deadline = time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if resp, err := probe.Get(a.proc.URL + "/healthz"); err == nil {
			status = resp.StatusCode
			resp.Body.Close()
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	a.saw("%d of %d served, %d closed at accept, %d neither; then a new caller got %d", served, flood, closed, neither, status)
	if status != http.StatusOK {
		t.Errorf("after the flood a new connection got %d, want /healthz answered", status)
	}
}

func isReset(err error) bool {
	return errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

// halfClosedCallers: 50 HTTP/1.1 callers each send a whole request to the
// sink, which holds it, and close their side of the connection. Each call
// is cancelled and its connection closed with no answer: never a 200 that
// a caller would take for a delivery.
func halfClosedCallers(t testing.TB, a *arena) {
	const callers = 50
	var (
		wg  sync.WaitGroup
		mu  sync.Mutex
		saw tally
	)
	for range callers {
		nc := dial(t, a.addr)
		req := "POST /attack HTTP/1.1\r\nHost: proxy\r\nKn-Forward-To: " + a.sink.URL + "/attack\r\nContent-Length: 1\r\n\r\ne"
		if _, err := io.WriteString(nc, req); err != nil {
			t.Fatal(err)
		}
		if err := nc.(*net.TCPConn).CloseWrite(); err != nil {
			t.Fatal(err)
		}
		wg.Go(func() {
			closed, got := closedByPeer(nc, 30*time.Second)
			var what string
			switch {
			case !closed:
				what = "still open after 30 s"
			case len(got) > 0:
				what = "read " + strings.SplitN(string(got), "\r\n", 2)[0]
			default:
				what = "closed with no answer"
			}
			mu.Lock()
			saw.add(what)
			mu.Unlock()
			_ = nc.Close()
		})
	}
	wg.Wait()
	a.saw("%d callers: %s", callers, &saw)
	saw.want(t, "closed with no answer", callers)
}

// slowHeaders: 20 HTTP/1.1 callers trickle a request head, one byte every
// 200 ms, for at most 30 s. The proxy closes each once
// FORWARD_READ_HEADER_TIMEOUT (2 s here) has passed, whatever it wrote
// before (a 408 or 400 at most).
func slowHeaders(t testing.TB, a *arena) {
	const callers = 20
	head := "POST / HTTP/1.1\r\nHost: proxy\r\nX-Slow: " + strings.Repeat("s", 200)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var took []time.Duration
	open := 0
	for range callers {
		nc := dial(t, a.addr)
		start := time.Now()
		done := make(chan struct{})
		wg.Go(func() {
			defer close(done)
			closed, got := closedByPeer(nc, 30*time.Second)
			if !closed {
				t.Error("a slow caller's connection was still open after 30 s")
			}
			if len(got) > 0 && !strings.HasPrefix(string(got), "HTTP/1.1 4") {
				t.Errorf("a slow caller read %.80q", got)
			}
			mu.Lock()
			if closed {
				took = append(took, time.Since(start))
			} else {
				open++
			}
			mu.Unlock()
		})
		wg.Go(func() {
			tick := time.NewTicker(200 * time.Millisecond)
			defer tick.Stop()
			for i := range len(head) {
				select {
				case <-done:
					return
				case <-tick.C:
				}
				if _, err := nc.Write([]byte{head[i]}); err != nil {
					return
				}
			}
		})
	}
	wg.Wait()
	t.Logf("slow headers: %d connections closed by the proxy after %s at the median", len(took), percentile(took, 0.5).Round(10*time.Millisecond))
	a.saw("%d of %d closed after %s at the median; %d still open after 30 s", len(took), callers, percentile(took, 0.5).Round(10*time.Millisecond), open)
}
