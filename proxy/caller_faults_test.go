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
	"strings"
	"testing"
	"time"

	"knative.dev/event-forwarding-proxy/delivery"
	"knative.dev/event-forwarding-proxy/proxy/proxytest"
)

// bigAnswer answers a POST with 64 MiB as
// fast as the proxy takes them, ending early when the call is cancelled;
// done receives the bytes written, if there is room.
func bigAnswer(done chan<- int64) proxytest.Reply {
	return func(w http.ResponseWriter, r *http.Request, _ int) {
		if r.Method != http.MethodPost {
			return
		}
		chunk := []byte(strings.Repeat("x", 32<<10))
		var n int64
		defer func() {
			select {
			case done <- n:
			default:
			}
		}()
		for n < 64<<20 {
			m, err := w.Write(chunk)
			n += int64(m)
			if err != nil || r.Context().Err() != nil {
				return
			}
		}
	}
}

// TestSlowReadingCaller: a caller that stops reading a long answer holds
// its slot only until the call's deadline: then the proxy stops writing,
// closes the connection and frees the slot, for HTTP/1.1 and h2c callers.
func TestSlowReadingCaller(t *testing.T) {
	for _, client := range []string{"http1", "h2c"} {
		t.Run(client, func(t *testing.T) {
			t.Parallel() // each waits for a deadline
			written := make(chan int64, 1)
			dest := proxytest.NewDestination(t, bigAnswer(written))
			fp := newFaultProxy(t, nil, nil)
			req := fp.newRequest(t, dest.URL, strings.NewReader("e"))
			req.Header.Set(delivery.HeaderForwardTimeout, "PT1S")
			var body io.ReadCloser
			if client == "http1" {
				body = stalledHTTP1(t, fp.Addr, req)
			} else {
				body = stalledH2C(t, req)
			}
			defer body.Close()
			var first [1024]byte
			if _, err := io.ReadFull(body, first[:]); err != nil {
				t.Fatalf("the answer did not start: %v", err)
			}
			// The caller reads nothing more.
			proxytest.Eventually(t, 10*time.Second, func() bool { return fp.Limiter.Inflight() == 0 },
				"a caller that stopped reading still holds its slot after the call's deadline (1s)")
			select {
			case n := <-written:
				if n >= 64<<20 {
					t.Errorf("the destination wrote the whole answer (%d bytes) to a caller that stopped reading", n)
				}
			case <-time.After(5 * time.Second):
				t.Error("the destination's call was not ended")
			}
			// What was buffered drains, then the answer breaks off.
			n, err := io.Copy(io.Discard, body)
			if err == nil && n+1024 >= 64<<20 {
				t.Errorf("the caller got the whole answer after the deadline")
			}
		})
	}
}

// stalledHTTP1 sends req on a raw connection with a small receive buffer
// and returns the answer's body, read through the connection.
func stalledHTTP1(t *testing.T, addr string, req *http.Request) io.ReadCloser {
	t.Helper()
	d := net.Dialer{Control: smallReceiveBuffer}
	conn, err := d.DialContext(t.Context(), "tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	_ = conn.SetDeadline(time.Now().Add(20 * time.Second))
	if err := req.Write(conn); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReaderSize(conn, 1024), req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d, want 200", resp.StatusCode)
	}
	return struct {
		io.Reader
		io.Closer
	}{resp.Body, conn}
}

// stalledH2C sends req from an h2c client with a small connection window
// and returns the answer's body.
func stalledH2C(t *testing.T, req *http.Request) io.ReadCloser {
	t.Helper()
	tr := &http.Transport{Proxy: nil, Protocols: new(http.Protocols), HTTP2: &http.HTTP2Config{
		MaxReceiveBufferPerConnection: 64 << 10, MaxReceiveBufferPerStream: 64 << 10,
	}}
	tr.Protocols.SetUnencryptedHTTP2(true)
	t.Cleanup(tr.CloseIdleConnections)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	t.Cleanup(cancel)
	resp, err := tr.RoundTrip(req.WithContext(ctx))
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d, want 200", resp.StatusCode)
	}
	return resp.Body
}

// TestCallerGoneMidCall: a caller that goes away while the destination
// holds its call (h2c: the stream is reset), or in the middle of sending
// its body, cancels the call to the destination, which never gets a whole
// request it did not get before, and gives its slot back; an async caller
// gone before the hand-off gets nothing delivered. (An HTTP/1.1 caller
// gone while the destination holds the call: TestForwardCallerCancels.)
func TestCallerGoneMidCall(t *testing.T) {
	tests := []struct {
		name     string
		client   string
		async    bool
		midBody  bool // gone while sending the body, not while waiting
		received bool // the destination saw the request start
	}{
		{name: "h2c caller gone while the destination holds the call", client: "h2c", received: true},
		{name: "HTTP/1.1 caller gone while sending its body", client: "http1", midBody: true, received: true},
		{name: "h2c caller gone while sending its body", client: "h2c", midBody: true, received: true},
		{name: "async HTTP/1.1 caller gone before the hand-off", client: "http1", async: true, midBody: true},
		{name: "async h2c caller gone before the hand-off", client: "h2c", async: true, midBody: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			hold := proxytest.NewHold(t)
			dest := proxytest.NewH2CDestination(t, hold.Reply)
			fp := newFaultProxy(t, nil, nil)
			gone := goneCaller(t, fp, dest.URL, tt.client, tt.async, tt.midBody)
			proxytest.Eventually(t, 5*time.Second, func() bool { return fp.Limiter.Inflight() == 1 }, "the call was not admitted")
			if tt.received && !tt.midBody {
				dest.Next(t)
			}
			gone()
			proxytest.Eventually(t, 5*time.Second, func() bool { return fp.Limiter.Inflight() == 0 }, "the slot of a gone caller was not released")
			if !tt.midBody {
				hold.WaitCancelled(t)
			}
			for _, r := range dest.Requests() {
				if tt.midBody && r.BodyErr == nil && r.Method == http.MethodPost {
					t.Errorf("the destination got a whole request %q from a caller that left mid-body", r.Body)
				}
			}
			if tt.async && dest.Count() != 0 {
				t.Errorf("the destination got %d requests of an async caller that left before the hand-off", dest.Count())
			}
		})
	}
}

// goneCaller starts a call that sends part of its body, or all of it, and
// returns the function that makes the caller go away: an HTTP/1.1 caller
// closes its connection, an h2c caller cancels (resets) its stream.
func goneCaller(t *testing.T, fp *faultProxy, dest, client string, async, midBody bool) func() {
	t.Helper()
	prefer := ""
	if async {
		prefer = "Prefer: respond-async\r\n"
	}
	if client == "http1" {
		conn := dialRaw(t, fp.Addr)
		_, err := io.WriteString(conn, "POST / HTTP/1.1\r\nHost: proxy\r\nKn-Forward-To: "+dest+"\r\n"+prefer+
			"Content-Length: 1000\r\n\r\n"+strings.Repeat("e", map[bool]int{true: 23, false: 1000}[midBody]))
		if err != nil {
			t.Fatal(err)
		}
		return func() { _ = conn.Close() }
	}
	pr, pw := io.Pipe()
	t.Cleanup(func() { _ = pw.Close() })
	ctx, cancel := context.WithCancel(t.Context())
	req := fp.newRequest(t, dest, pr).WithContext(ctx)
	if async {
		req.Header.Set(delivery.HeaderPrefer, delivery.PreferRespondAsync)
	}
	res := goDo(h2cClient(t), req)
	if _, err := pw.Write([]byte("first part of the event")); err != nil {
		t.Fatal(err)
	}
	if !midBody {
		_ = pw.Close()
	}
	return func() {
		cancel()
		if r := await(t, res); r.err == nil {
			t.Errorf("the cancelled call returned %d", r.resp.StatusCode)
		}
	}
}
