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

package e2e

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"knative.dev/event-forwarding-proxy/proxy/proxytest"
)

// limitSink is a destination that counts open TCP connections and records,
// per request, how much body came and whether it came whole. "?hdr=N" makes it
// answer with an N-byte X-Big header.
type limitSink struct {
	*httptest.Server
	open atomic.Int64 // connections accepted and not yet closed
	mu   sync.Mutex
	bods []sinkBody
}

type sinkBody struct {
	n     int
	whole bool
}

func newLimitSink(t *testing.T) *limitSink {
	t.Helper()
	s := &limitSink{}
	s.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		s.mu.Lock()
		s.bods = append(s.bods, sinkBody{n: len(b), whole: err == nil})
		s.mu.Unlock()
		if n, _ := strconv.Atoi(r.URL.Query().Get("hdr")); n > 0 {
			w.Header().Set("X-Big", strings.Repeat("b", n))
		}
	}))
	s.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		switch st {
		case http.StateNew:
			s.open.Add(1)
		case http.StateClosed, http.StateHijacked:
			s.open.Add(-1)
		}
	}
	s.Start()
	t.Cleanup(s.Close)
	return s
}

func (s *limitSink) bodies() []sinkBody {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]sinkBody(nil), s.bods...)
}

// raw writes a request on a new connection to p and returns the raw answer
// read until the proxy closes the connection or d passes, and how long it
// took.
func raw(t *testing.T, p *proc, req string, d time.Duration) ([]byte, time.Duration, error) {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(p.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	start := time.Now()
	if _, err := io.WriteString(conn, req); err != nil {
		t.Fatal(err)
	}
	_ = conn.SetReadDeadline(time.Now().Add(d))
	got, err := io.ReadAll(conn)
	return got, time.Since(start), err
}

// rawAnswer writes a request on a new connection and reads one response.
func rawAnswer(t *testing.T, p *proc, req string) *http.Response {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(p.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(conn, req); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("no answer: %v", err)
	}
	return resp
}

// TestLimitsBinary: each limit of the real binary at its edge. Under a
// limit the call passes; over it the caller gets the documented answer and
// the destination gets nothing whole (for a declared size, not even a
// connection).
func TestLimitsBinary(t *testing.T) {
	p := startProxy(t,
		"FORWARD_MAX_HEADER_BYTES=8192", "FORWARD_READ_HEADER_TIMEOUT=300ms",
		"FORWARD_MAX_EVENT_BYTES=1024", "FORWARD_BODY_IDLE_TIMEOUT=300ms")
	dest := newLimitSink(t)
	head := "POST / HTTP/1.1\r\nHost: proxy\r\nKn-Forward-To: " + dest.URL + "\r\n"
	pad := func(n int) string { return "X-Pad: " + strings.Repeat("p", n) + "\r\n" }

	t.Run("request headers under FORWARD_MAX_HEADER_BYTES pass", func(t *testing.T) {
		before := len(dest.bodies())
		resp := rawAnswer(t, p, head+pad(7*1024)+"Content-Length: 1\r\n\r\ne")
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || len(dest.bodies()) != before+1 {
			t.Errorf("status %d, %d forwarded; want 200 and 1", resp.StatusCode, len(dest.bodies())-before)
		}
	})

	t.Run("request headers past it (and Go's 4 KiB slack) get 431", func(t *testing.T) {
		before := len(dest.bodies())
		resp := rawAnswer(t, p, head+pad(8192+4096)+"Content-Length: 1\r\n\r\ne")
		resp.Body.Close()
		if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
			t.Errorf("status %d, want 431", resp.StatusCode)
		}
		if n := len(dest.bodies()) - before; n != 0 {
			t.Errorf("%d requests forwarded, want 0", n)
		}
	})

	t.Run("headers not finished within FORWARD_READ_HEADER_TIMEOUT: connection closed", func(t *testing.T) {
		before := len(dest.bodies())
		got, took, err := raw(t, p, head+"Content-Length: 1\r\n", 3*time.Second)
		if errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("the connection was still open after %s", took)
		}
		if len(got) > 0 && !bytes.HasPrefix(got, []byte("HTTP/1.1 400 ")) && !bytes.HasPrefix(got, []byte("HTTP/1.1 408 ")) {
			t.Errorf("answer %q, want the connection closed", got)
		}
		if took < 250*time.Millisecond {
			t.Errorf("closed after %s, before the timeout", took)
		}
		if n := len(dest.bodies()) - before; n != 0 {
			t.Errorf("%d requests forwarded, want 0", n)
		}
	})

	t.Run("declared body over FORWARD_MAX_EVENT_BYTES: 413, no connection", func(t *testing.T) {
		canary := proxytest.NewCanary(t)
		head := "POST / HTTP/1.1\r\nHost: proxy\r\nKn-Forward-To: " + canary.URL("127.0.0.1") + "\r\n"
		for _, async := range []string{"", "Prefer: respond-async\r\n"} {
			resp := rawAnswer(t, p, head+async+"Content-Length: 1025\r\n\r\n"+strings.Repeat("x", 1025))
			checkAnswer(t, readAnswer(t, resp), 413, "body_too_large")
		}
		canary.Settle(t)
		if n := canary.Accepted(); n != 0 {
			t.Errorf("the destination accepted %d connections, want 0", n)
		}
	})

	t.Run("chunked body over FORWARD_MAX_EVENT_BYTES: 413, never whole at the destination", func(t *testing.T) {
		dest := newLimitSink(t)
		head := "POST / HTTP/1.1\r\nHost: proxy\r\nKn-Forward-To: " + dest.URL + "\r\n"
		chunk := strings.Repeat("x", 512)
		body := strings.Repeat("200\r\n"+chunk+"\r\n", 8) + "0\r\n\r\n"
		for _, async := range []string{"", "Prefer: respond-async\r\n"} {
			resp := rawAnswer(t, p, head+async+"Transfer-Encoding: chunked\r\n\r\n"+body)
			checkAnswer(t, readAnswer(t, resp), 413, "body_too_large")
		}
		// Every record is in once the destination closed every connection
		// (the proxy abandons each it streamed a refused body on).
		eventually(t, 5*time.Second, "the destination's connections closed", func() bool { return dest.open.Load() == 0 })
		for _, b := range dest.bodies() {
			if b.whole {
				t.Errorf("the destination received a whole body of %d bytes", b.n)
			}
		}
	})

	t.Run("body stalled past FORWARD_BODY_IDLE_TIMEOUT: 400 bad_request", func(t *testing.T) {
		dest := newLimitSink(t)
		head := "POST / HTTP/1.1\r\nHost: proxy\r\nKn-Forward-To: " + dest.URL + "\r\n"
		resp := rawAnswer(t, p, head+"Content-Length: 10\r\n\r\nabc")
		checkAnswer(t, readAnswer(t, resp), 400, "bad_request")
		eventually(t, 5*time.Second, "the destination's connections closed", func() bool { return dest.open.Load() == 0 })
		for _, b := range dest.bodies() {
			if b.whole {
				t.Errorf("the destination received a whole body of %d bytes", b.n)
			}
		}
	})

	t.Run("response headers: under 64 KiB pass, over get 502 unreachable", func(t *testing.T) {
		resp := p.post(t, "e", "Kn-Forward-To", dest.URL+"/?hdr="+strconv.Itoa(60<<10))
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || len(resp.Header.Get("X-Big")) != 60<<10 {
			t.Errorf("under the cap: %d with %d header bytes, want 200 with %d", resp.StatusCode, len(resp.Header.Get("X-Big")), 60<<10)
		}
		checkAnswer(t, readAnswer(t, p.post(t, "e", "Kn-Forward-To", dest.URL+"/?hdr="+strconv.Itoa(70<<10))), 502, "unreachable")
	})
}

// TestMaxConnectionsBinary: the proxy holds at most FORWARD_MAX_CONNECTIONS
// inbound connections; one more is closed at once, and once the holders
// go, callers are served again.
func TestMaxConnectionsBinary(t *testing.T) {
	const limit = 5
	p := startProxy(t, fmt.Sprintf("FORWARD_MAX_CONNECTIONS=%d", limit))
	http.DefaultClient.CloseIdleConnections() // the start's health checks
	addr := strings.TrimPrefix(p.URL, "http://")
	var held []net.Conn
	refused := false
	for range limit + 1 {
		c, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, c)
		_ = c.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
		if _, err := c.Read(make([]byte, 1)); err != nil && !os.IsTimeout(err) {
			refused = true // closed by the proxy
			break
		}
	}
	if !refused {
		t.Fatalf("%d idle connections all stayed open, want at most %d", len(held), limit)
	}
	for _, c := range held {
		_ = c.Close()
	}
	eventually(t, 10*time.Second, "a caller served again", func() bool {
		resp, err := http.Post(p.URL, "text/plain", strings.NewReader("e"))
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusBadRequest // no Kn-Forward-To: the proxy's own answer
	})
}
