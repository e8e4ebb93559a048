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
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"knative.dev/event-forwarding-proxy/proxy/proxytest"
)

// TestStalledBodyRefused: a caller that stops sending its body mid-way is
// answered 400 bad_request once FORWARD_BODY_IDLE_TIMEOUT passes, and the
// destination never sees a complete request.
func TestStalledBodyRefused(t *testing.T) {
	for _, async := range []bool{false, true} {
		p := newTestProxy(t, map[string]string{"FORWARD_BODY_IDLE_TIMEOUT": "200ms"})
		dest := proxytest.NewDestination(t, nil)
		conn, err := net.Dial("tcp", strings.TrimPrefix(p.URL, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		prefer := ""
		if async {
			prefer = "Prefer: respond-async\r\n"
		}
		// Ten bytes announced, three sent, then silence.
		if _, err := conn.Write([]byte("POST / HTTP/1.1\r\nHost: proxy\r\nKn-Forward-To: " + dest.URL + "\r\n" + prefer +
			"Content-Length: 10\r\n\r\nabc")); err != nil {
			t.Fatal(err)
		}
		_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatalf("async=%v: no answer to a stalled body: %v", async, err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest || resp.Header.Get("Kn-Forward-Error") != string(ReasonBadRequest) {
			t.Errorf("async=%v: got %d %q, want 400 bad_request", async, resp.StatusCode, resp.Header.Get("Kn-Forward-Error"))
		}
		for _, r := range dest.Requests() {
			if r.BodyErr == nil {
				t.Errorf("async=%v: the destination got a complete request %q", async, r.Body)
			}
		}
	}
}

// TestBodyDeadlineNeverCutsTheAnswer: once the body is in, a destination
// may take far longer than the body idle timeout to answer.
func TestBodyDeadlineNeverCutsTheAnswer(t *testing.T) {
	p := newTestProxy(t, map[string]string{"FORWARD_BODY_IDLE_TIMEOUT": "100ms"})
	dest := proxytest.NewDestination(t, func(w http.ResponseWriter, r *http.Request, _ int) {
		select {
		case <-time.After(600 * time.Millisecond):
			_, _ = w.Write([]byte("late answer"))
		case <-r.Context().Done():
		}
	})
	for _, c := range []*http.Client{h1Client(t), h2cClient(t)} {
		resp, body := do(t, c, p.newRequest(t, dest.URL, strings.NewReader("a body")))
		if resp.StatusCode != http.StatusOK || string(body) != "late answer" {
			t.Errorf("%s: got %d %q, want the destination's late answer", resp.Proto, resp.StatusCode, body)
		}
	}
}

// fakeClock is a clock a test moves by hand.
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time { return c.t }

// paced is a request body that comes chunk bytes at a time, each read
// taking per on the clock: a caller that sends at chunk/per.
type paced struct {
	clock *fakeClock
	chunk int
	per   time.Duration
	left  int
}

func (p *paced) Read(b []byte) (int, error) {
	if p.left == 0 {
		return 0, io.EOF
	}
	n := min(p.chunk, p.left, len(b))
	p.clock.t = p.clock.t.Add(p.per * time.Duration(n) / time.Duration(p.chunk))
	p.left -= n
	return n, nil
}

func (*paced) Close() error { return nil }

// TestBodyMinRateEdges: with a minimum of 1000 bytes a second past a first
// second of waiting, a body that comes at 1001 bytes a second passes and
// one at 999 is refused once its reads have waited about 1000 s (999,000
// bytes in), as a stalled body; time between reads (a destination that
// reads slowly) does not count against the caller. The clock is a fake:
// nothing waits.
func TestBodyMinRateEdges(t *testing.T) {
	const total = 1_100_000
	tests := []struct {
		name     string
		rate     int           // bytes a second the caller sends at
		between  time.Duration // the clock moves this much between two reads
		wantFail bool
	}{
		{name: "just above the minimum", rate: 1001},
		{name: "just below the minimum", rate: 999, wantFail: true},
		{name: "a fast caller, the reader slow", rate: 1_000_000, between: time.Hour},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clock := &fakeClock{t: time.Unix(1e9, 0)}
			src := &paced{clock: clock, chunk: tt.rate, per: time.Second, left: total}
			b := newGuardedBody(httptest.NewRecorder(), src, bodyLimits{max: 2 << 20, idle: time.Second, minRate: 1000, now: clock.now})
			defer b.Close()
			var read int
			var err error
			buf := make([]byte, 64<<10)
			for {
				var n int
				n, err = b.Read(buf)
				read += n
				if err != nil {
					break
				}
				clock.t = clock.t.Add(tt.between)
			}
			switch {
			case !tt.wantFail && !errors.Is(err, io.EOF):
				t.Fatalf("after %d of %d bytes: %v, want the whole body", read, total, err)
			case !tt.wantFail:
			case !errors.Is(err, errBodyStalled) || !b.stalled.Load() || !b.slow.Load():
				t.Fatalf("after %d bytes: %v (stalled %t, slow %t), want a stalled body, too slow", read, err, b.stalled.Load(), b.slow.Load())
			case read < 998_000 || read > 999_000:
				// 1000 reads of 999 bytes have waited 1000 s, the most
				// 999,000 bytes allow (1 s + 999 s); a guard armed with
				// the last millisecond left may fire one read early.
				t.Errorf("refused after %d bytes, want about 999,000", read)
			}
			if tt.wantFail {
				if msg := b.stallMessage(); msg != "the request body came slower than 1000 bytes a second" {
					t.Errorf("message %q", msg)
				}
			}
		})
	}
}

// TestTrickledBodyRefused: a caller that trickles its body a byte at a
// time, never silent long enough for FORWARD_BODY_IDLE_TIMEOUT, is
// answered 400 bad_request once its body falls below
// FORWARD_BODY_MIN_RATE, and the destination never sees a complete
// request; the same body sent at once goes through.
func TestTrickledBodyRefused(t *testing.T) {
	const body = "0123456789012345678901234567890123456789" // 40 bytes, 2 s at a byte every 50 ms
	for _, async := range []bool{false, true} {
		p := newTestProxy(t, map[string]string{"FORWARD_BODY_IDLE_TIMEOUT": "300ms", "FORWARD_BODY_MIN_RATE": "1000", "FORWARD_MAX_EVENT_BYTES": "100"})
		dest := proxytest.NewDestination(t, nil)
		conn, err := net.Dial("tcp", strings.TrimPrefix(p.URL, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		prefer := ""
		if async {
			prefer = "Prefer: respond-async\r\n"
		}
		if _, err := conn.Write([]byte("POST / HTTP/1.1\r\nHost: proxy\r\nKn-Forward-To: " + dest.URL + "\r\n" + prefer +
			"Content-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n")); err != nil {
			t.Fatal(err)
		}
		answered := make(chan *http.Response, 1)
		go func() {
			_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
			resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
			if err != nil {
				close(answered)
				return
			}
			resp.Body.Close()
			answered <- resp
		}()
		var resp *http.Response
	trickle:
		for i := 0; ; i++ {
			select {
			case resp = <-answered:
				break trickle
			case <-time.After(50 * time.Millisecond):
				if i < len(body) {
					_, _ = conn.Write([]byte{body[i]})
				}
			}
		}
		if resp == nil {
			t.Fatalf("async=%v: no answer to a trickled body", async)
		}
		if resp.StatusCode != http.StatusBadRequest || resp.Header.Get("Kn-Forward-Error") != string(ReasonBadRequest) {
			t.Errorf("async=%v: got %d %q, want 400 bad_request", async, resp.StatusCode, resp.Header.Get("Kn-Forward-Error"))
		}
		for _, r := range dest.Requests() {
			if r.BodyErr == nil {
				t.Errorf("async=%v: the destination got a complete request %q", async, r.Body)
			}
		}
		req := p.newRequest(t, dest.URL, strings.NewReader(body))
		if async {
			req.Header.Set("Prefer", "respond-async")
		}
		if resp, b := do(t, h1Client(t), req); resp.StatusCode != map[bool]int{false: http.StatusOK, true: http.StatusAccepted}[async] {
			t.Errorf("async=%v: the body sent at once got %d %q", async, resp.StatusCode, b)
		}
	}
}

// TestClosedBodyKeepsNoTimer: a call held after its body went out keeps
// no guard timer for it, and a Read after Close arms none.
func TestClosedBodyKeepsNoTimer(t *testing.T) {
	b := newGuardedBody(httptest.NewRecorder(), io.NopCloser(strings.NewReader("event")), bodyLimits{max: 1 << 10, idle: time.Minute})
	if _, err := b.Read(make([]byte, 5)); err != nil {
		t.Fatal(err)
	}
	if b.timer == nil {
		t.Fatal("a Read armed no guard")
	}
	_ = b.Close()
	if _, err := b.Read(make([]byte, 5)); !errors.Is(err, http.ErrBodyReadAfterClose) {
		t.Errorf("Read after Close: %v", err)
	}
	if b.timer != nil {
		t.Error("the closed body still keeps its guard timer")
	}
}
