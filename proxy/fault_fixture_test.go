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
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/zap"

	"knative.dev/event-forwarding-proxy/delivery"
)

// faultProxy is an in-process proxy served as cmd/proxy serves it: the
// inbound server settings and the framing listener.
type faultProxy struct {
	*testProxy
	Addr string // host:port
}

// newFaultProxy builds a proxy from baseEnv plus env, with the framing
// listener in front of its server. trs, when not nil, replaces the
// transports built from the configuration.
func newFaultProxy(t testing.TB, env map[string]string, logger *zap.SugaredLogger, opts ...Option) *faultProxy {
	t.Helper()
	if logger == nil {
		logger = zap.NewNop().Sugar()
	}
	cfg := testConfig(t, env)
	p := New(cfg, logger, opts...)
	ts := httptest.NewUnstartedServer(nil)
	ts.Config = p.Server(cfg, logger)
	ts.Listener = NewFramingListener(ts.Listener, cfg.MaxHeaderBytes)
	ts.Start()
	t.Cleanup(func() {
		ts.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := p.Shutdown(ctx); err != nil {
			t.Errorf("calls still held when the test ended: Shutdown: %v", err)
		}
	})
	return &faultProxy{testProxy: &testProxy{Proxy: p, URL: ts.URL}, Addr: strings.TrimPrefix(ts.URL, "http://")}
}

// faultTransports builds the transports of baseEnv plus env, changed by
// edit; they are closed when the test ends.
func faultTransports(t testing.TB, env map[string]string, edit func(*delivery.TransportParams)) *delivery.Transports {
	t.Helper()
	cfg := testConfig(t, env)
	tp := TransportParams(cfg, &delivery.Policy{Allowed: cfg.AllowedCIDRs, Denied: cfg.DeniedCIDRs})
	if edit != nil {
		edit(&tp)
	}
	trs := delivery.NewTransports(tp)
	t.Cleanup(trs.CloseIdleConnections)
	return trs
}

// rawAnswer is what came back on a TCP connection for bytes written raw.
type rawAnswer struct {
	resp   *http.Response
	body   []byte
	closed bool // the answer said Connection: close, and the connection was closed
}

// rawSend writes raw on a new connection to addr and reads one answer;
// when the answer says Connection: close, it checks that the connection
// was closed. Fails after 5 s.
func rawSend(t testing.TB, addr, raw string) rawAnswer {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(conn, raw); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("no answer to %q: %v", raw, err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	a := rawAnswer{resp: resp, body: body}
	if resp.Close {
		_, err := br.ReadByte()
		a.closed = err == io.EOF
	}
	return a
}

// heapAfterGC returns the live heap after a full collection.
func heapAfterGC() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// dialRaw opens a TCP connection to addr, closed when the test ends, with a
// 10 s deadline.
func dialRaw(t testing.TB, addr string) net.Conn {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	return conn
}

// rawResponse is one answer read from a raw connection, with its body.
type rawResponse struct {
	*http.Response
	body []byte
}

// readAnswerList reads n answers from conn.
func readAnswerList(t testing.TB, conn net.Conn, n int) []rawResponse {
	t.Helper()
	br := bufio.NewReader(conn)
	var out []rawResponse
	for i := range n {
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("answer %d of %d: %v", i+1, n, err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatalf("answer %d of %d: body: %v", i+1, n, err)
		}
		out = append(out, rawResponse{Response: resp, body: body})
	}
	return out
}

// readAnswers reads two answers from conn.
func readAnswers(t testing.TB, conn net.Conn, n int) (first, second rawResponse) {
	t.Helper()
	l := readAnswerList(t, conn, n)
	return l[0], l[1]
}

// smallReceiveBuffer is a net.Dialer Control that shrinks the socket's
// receive buffer, so that a caller that stops reading stalls its sender
// after a few KiB instead of megabytes.
func smallReceiveBuffer(_, _ string, c syscall.RawConn) error {
	var serr error
	err := c.Control(func(fd uintptr) {
		serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096)
	})
	if err != nil {
		return err
	}
	return serr
}
