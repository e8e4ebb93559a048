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
	"bytes"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"knative.dev/event-forwarding-proxy/delivery"
	"knative.dev/event-forwarding-proxy/proxy/proxytest"
)

// TestRequestHeaderLimit: request headers over FORWARD_MAX_HEADER_BYTES are
// refused by the server with 431 before the proxy sees them, and never
// forwarded; headers under it pass. Go's server reads up to 4 KiB past the
// limit before it gives up (its bufio slack), so "over" here means past
// that slack.
func TestRequestHeaderLimit(t *testing.T) {
	const limit = 8192
	dest := proxytest.NewDestination(t, nil)
	tp := newTestProxy(t, map[string]string{"FORWARD_MAX_HEADER_BYTES": strconv.Itoa(limit)})
	pad := func(n int) string { return "X-Pad: " + strings.Repeat("p", n) + "\r\n" }
	tests := []struct {
		name    string
		headers string
		want    int
	}{
		{name: "well under the limit", headers: pad(limit - 1024), want: http.StatusOK},
		{name: "one header past the limit and Go's slack", headers: pad(limit + 4096), want: http.StatusRequestHeaderFieldsTooLarge},
		{name: "many small headers past the limit and Go's slack", headers: strings.Repeat(pad(90), (limit+4096)/90), want: http.StatusRequestHeaderFieldsTooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := dest.Count()
			resp, body := rawExchange(t, tp.URL, "POST / HTTP/1.1\r\nHost: proxy\r\nKn-Forward-To: "+dest.URL+"\r\n"+
				tt.headers+"Content-Length: 1\r\n\r\ne")
			if resp.StatusCode != tt.want {
				t.Errorf("status = %d, want %d; body %q", resp.StatusCode, tt.want, body)
			}
			wantForwarded := 0
			if tt.want == http.StatusOK {
				wantForwarded = 1
			}
			if n := dest.Count() - before; n != wantForwarded {
				t.Errorf("the destination received %d requests, want %d", n, wantForwarded)
			}
		})
	}

	t.Run("h2c: past the limit never forwarded", func(t *testing.T) {
		before := dest.Count()
		req := tp.newRequest(t, dest.URL, strings.NewReader("e"))
		req.Header.Set("X-Pad", strings.Repeat("p", limit+4096))
		r := await(t, goDo(h2cClient(t), req))
		if r.err == nil && r.resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
			t.Errorf("status = %d, want 431 or a client-side refusal", r.resp.StatusCode)
		}
		if n := dest.Count() - before; n != 0 {
			t.Errorf("the destination received %d requests, want 0", n)
		}
	})
}

// TestSlowRequestHeaders: a caller that does not finish its request headers
// within FORWARD_READ_HEADER_TIMEOUT loses its connection, however it
// trickles them (the timeout bounds the whole head, not each read), and
// nothing is forwarded.
func TestSlowRequestHeaders(t *testing.T) {
	dest := proxytest.NewDestination(t, nil)
	tp := newTestProxy(t, map[string]string{"FORWARD_READ_HEADER_TIMEOUT": "300ms"})
	head := "POST / HTTP/1.1\r\nHost: proxy\r\nKn-Forward-To: " + dest.URL + "\r\nContent-Length: 1\r\n"
	tests := []struct {
		name    string
		sent    string        // written at once
		trickle string        // then written one byte at a time
		every   time.Duration // between trickled bytes
	}{
		{name: "half a request line", sent: "POST / HT"},
		{name: "headers without the blank line", sent: head},
		{name: "one byte every 50ms", trickle: head + "\r\ne", every: 50 * time.Millisecond},
		{name: "a header line every 100ms", sent: head, trickle: strings.Repeat("X-Slow: 1\r\n", 100), every: 100 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Before the dial: the server's clock starts when it accepts,
			// which a loaded machine may let happen before Dial returns.
			start := time.Now()
			conn, err := net.Dial("tcp", strings.TrimPrefix(tp.URL, "http://"))
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			if _, err := io.WriteString(conn, tt.sent); err != nil {
				t.Fatal(err)
			}
			stop := make(chan struct{})
			var wg sync.WaitGroup
			if tt.trickle != "" {
				wg.Add(1)
				go func() {
					defer wg.Done()
					tick := time.NewTicker(tt.every)
					defer tick.Stop()
					for i := range len(tt.trickle) {
						select {
						case <-stop:
							return
						case <-tick.C:
						}
						if _, err := conn.Write([]byte{tt.trickle[i]}); err != nil {
							return
						}
					}
				}()
			}
			_ = conn.SetReadDeadline(time.Now().Add(3 * time.Second))
			got, err := io.ReadAll(conn)
			took := time.Since(start)
			close(stop)
			wg.Wait()
			if errors.Is(err, os.ErrDeadlineExceeded) {
				t.Fatalf("the connection was still open after %s", took)
			}
			// Go's server closes the connection, after a 400 or 408 of its
			// own in some states; never the proxy's or a destination's answer.
			if len(got) > 0 && !bytes.HasPrefix(got, []byte("HTTP/1.1 400 ")) && !bytes.HasPrefix(got, []byte("HTTP/1.1 408 ")) {
				t.Errorf("answer %q, want the connection closed (or the server's 400 or 408)", got)
			}
			if took < 250*time.Millisecond {
				t.Errorf("closed after %s, before FORWARD_READ_HEADER_TIMEOUT", took)
			}
			if n := dest.Count(); n != 0 {
				t.Errorf("the destination received %d requests, want 0", n)
			}
		})
	}
}

// TestDeclaredBodyTooLargeNeverDials: a Content-Length over
// FORWARD_MAX_EVENT_BYTES is refused with 413 before anything is dialed:
// the destination sees not even a TCP connection, whatever the caller's
// protocol or mode, and without the caller sending its body.
func TestDeclaredBodyTooLargeNeverDials(t *testing.T) {
	canary := proxytest.NewCanary(t) // an allowed destination (baseEnv: 127.0.0.0/8)
	tp := newTestProxy(t, nil)       // FORWARD_MAX_EVENT_BYTES=1024
	dest := canary.URL("127.0.0.1")
	tests := []struct {
		name  string
		via   string
		async bool
		size  int
	}{
		{name: "sync", size: 1025},
		{name: "async", async: true, size: 1025},
		{name: "h2c caller", via: viaH2C, size: 1025},
		{name: "h2c caller, async", via: viaH2C, async: true, size: 4096},
		{name: "Expect: 100-continue, body never sent", via: viaRaw, size: 1 << 30},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := canary.Accepted()
			var (
				resp *http.Response
				body []byte
			)
			switch tt.via {
			case viaRaw:
				resp, body = rawExchange(t, tp.URL, "POST / HTTP/1.1\r\nHost: proxy\r\nKn-Forward-To: "+dest+
					"\r\nExpect: 100-continue\r\nContent-Length: "+strconv.Itoa(tt.size)+"\r\n\r\n")
			default:
				client := h1Client(t)
				if tt.via == viaH2C {
					client = h2cClient(t)
				}
				req := tp.newRequest(t, dest, bytes.NewReader(make([]byte, tt.size)))
				if tt.async {
					req.Header.Set(delivery.HeaderPrefer, delivery.PreferRespondAsync)
				}
				resp, body = do(t, client, req)
			}
			wantProxyError(t, resp, body, ReasonBodyTooLarge)
			canary.Settle(t)
			if n := canary.Accepted() - before; n != 0 {
				t.Errorf("the destination accepted %d connections, want 0", n)
			}
		})
	}

	t.Run("control: exactly the limit is forwarded", func(t *testing.T) {
		before := canary.Accepted()
		resp, body := do(t, h1Client(t), tp.newRequest(t, dest, bytes.NewReader(make([]byte, 1024))))
		canary.Settle(t)
		if resp.StatusCode != http.StatusOK || canary.Accepted()-before != 1 {
			t.Errorf("got %d %q over %d connections, want 200 over 1", resp.StatusCode, body, canary.Accepted()-before)
		}
	})
}

// TestStreamedBodyTooLarge: a body of unknown length over
// FORWARD_MAX_EVENT_BYTES from an h2c caller (HTTP/1.1 chunked callers are
// in TestChunkedBodyTooLarge) gets 413 and never reaches the destination
// whole.
func TestStreamedBodyTooLarge(t *testing.T) {
	for _, async := range []bool{false, true} {
		t.Run("async="+strconv.FormatBool(async), func(t *testing.T) {
			dest := proxytest.NewH2CDestination(t, nil)
			tp := newTestProxy(t, nil)
			req := tp.newRequest(t, dest.URL, io.MultiReader(bytes.NewReader(make([]byte, 64<<10))))
			if async {
				req.Header.Set(delivery.HeaderPrefer, delivery.PreferRespondAsync)
			}
			resp, body := do(t, h2cClient(t), req)
			wantProxyError(t, resp, body, ReasonBodyTooLarge)
			proxytest.Eventually(t, 5*time.Second, func() bool { return tp.Limiter.Inflight() == 0 }, "the slot was not released")
			for _, r := range dest.Requests() {
				if r.BodyErr == nil {
					t.Errorf("the destination received a whole body of %d bytes", len(r.Body))
				}
			}
		})
	}
}

// TestResponseHeaderLimit: a destination whose response headers pass the
// transports' 64 KiB cap (delivery.TransportParams.MaxResponseHeaderBytes,
// not configurable) is answered 502 unreachable; under the cap its headers
// come back.
func TestResponseHeaderLimit(t *testing.T) {
	reply := func(w http.ResponseWriter, r *http.Request, _ int) {
		n, _ := strconv.Atoi(r.URL.Query().Get("n"))
		w.Header().Set("X-Big", strings.Repeat("b", n))
	}
	tests := []struct {
		name string
		h2c  bool
		size int
		want int
	}{
		{name: "HTTP/1.1, under the cap", size: 60 << 10, want: http.StatusOK},
		{name: "HTTP/1.1, over the cap", size: 70 << 10, want: http.StatusBadGateway},
		{name: "h2c, under the cap", h2c: true, size: 60 << 10, want: http.StatusOK},
		{name: "h2c, over the cap", h2c: true, size: 70 << 10, want: http.StatusBadGateway},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dest := proxytest.NewH2CDestination(t, reply)
			var env map[string]string
			client := h1Client(t)
			if tt.h2c {
				env, client = h2cLoopback, h2cClient(t)
			}
			tp := newTestProxy(t, env)
			resp, body := do(t, client, tp.newRequest(t, dest.URL+"/?n="+strconv.Itoa(tt.size), strings.NewReader("e")))
			if tt.want == http.StatusBadGateway {
				wantProxyError(t, resp, body, ReasonUnreachable)
			} else if resp.StatusCode != tt.want || len(resp.Header.Get("X-Big")) != tt.size {
				t.Errorf("got %d with %d header bytes, want %d with %d", resp.StatusCode, len(resp.Header.Get("X-Big")), tt.want, tt.size)
			}
			if got := dest.Next(t).ProtoMajor; got != map[bool]int{false: 1, true: 2}[tt.h2c] {
				t.Errorf("the destination was spoken to over HTTP/%d", got)
			}
		})
	}
}
