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
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"knative.dev/event-forwarding-proxy/proxy/proxytest"
)

// zeroBody is a request body of n zero bytes that counts what was taken.
type zeroBody struct {
	n, sent int64
	taken   *atomic.Int64
}

func (z *zeroBody) Read(p []byte) (int, error) {
	if z.sent >= z.n {
		return 0, io.EOF
	}
	m := int(min(int64(len(p)), z.n-z.sent))
	clear(p[:m])
	z.sent += int64(m)
	z.taken.Add(int64(m))
	return m, nil
}

// gatedSink is a destination that reads no body byte until open is closed,
// then counts the body and answers its length. Its sockets keep a small
// receive buffer, so the bytes it does not read stay with the sender.
func gatedSink(t *testing.T, open <-chan struct{}, got *atomic.Int64) string {
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-open:
		case <-r.Context().Done():
			return
		}
		n, _ := io.Copy(io.Discard, r.Body)
		got.Add(n)
		_, _ = io.WriteString(w, strconv.FormatInt(n, 10))
	}))
	srv.Config.ConnContext = func(ctx context.Context, c net.Conn) context.Context {
		_ = c.(*net.TCPConn).SetReadBuffer(64 << 10)
		return ctx
	}
	srv.Start()
	t.Cleanup(srv.Close)
	return srv.URL
}

// sendPlateau waits until taken stops growing and returns it: 15 looks
// in a row, 20 ms apart, that saw it unchanged. A count of looks, not a
// span of time: a loaded machine that runs no goroutine of the test for
// 300 ms does not pass for a plateau, since the looks stall with the
// senders.
func sendPlateau(t *testing.T, taken *atomic.Int64) int64 {
	t.Helper()
	last, same := taken.Load(), 0
	deadline := time.Now().Add(30 * time.Second)
	for same < 15 {
		if time.Now().After(deadline) {
			t.Fatal("the callers never stopped sending")
		}
		time.Sleep(20 * time.Millisecond)
		if n := taken.Load(); n != last {
			last, same = n, 0
		} else {
			same++
		}
	}
	return last
}

// TestMemoryStaysBounded: bodies are streamed, not buffered. Calls whose
// destination reads nothing yet leave the proxy's heap flat however large
// their bodies: one 64 MiB body to a destination that is not reading, and
// the pod's limit of calls at once with 4 MiB each. The whole bodies then
// arrive once the destination reads.
func TestMemoryStaysBounded(t *testing.T) {
	tests := []struct {
		name  string
		calls int
		size  int64
	}{
		{name: "one call, 64 MiB, destination not reading", calls: 1, size: 64 << 20},
		{name: "calls at the pod's limit, 4 MiB each", calls: 16, size: 4 << 20},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			open := make(chan struct{})
			var got, taken atomic.Int64
			dest := gatedSink(t, open, &got)
			fp := newFaultProxy(t, map[string]string{
				"FORWARD_MAX_INFLIGHT": "16", "FORWARD_MAX_INFLIGHT_PER_DESTINATION": "16", "FORWARD_MAX_INFLIGHT_PER_TENANT": "16",
				"FORWARD_MAX_EVENT_BYTES": strconv.FormatInt(128<<20, 10), "FORWARD_MAX_TIMEOUT": "60s",
			}, nil)
			client := h1Client(t)
			base := heapAfterGC()
			var calls []<-chan result
			for range tt.calls {
				req := fp.newRequest(t, dest, &zeroBody{n: tt.size, taken: &taken})
				req.ContentLength = tt.size
				calls = append(calls, goDo(client, req))
			}
			proxytest.Eventually(t, 10*time.Second, func() bool { return fp.Limiter.Inflight() == tt.calls }, "the calls were not admitted")
			sent := sendPlateau(t, &taken)
			grown := int64(heapAfterGC()) - int64(base)
			total := int64(tt.calls) * tt.size
			t.Logf("%d calls: callers sent %d MiB of %d MiB while the destination read nothing; the heap grew %d KiB",
				tt.calls, sent>>20, total>>20, grown>>10)
			if tt.calls == 1 && sent >= total {
				t.Errorf("the caller sent the whole body (%d bytes) before the destination read a byte: it was buffered", sent)
			}
			if grown > 16<<20 {
				t.Errorf("the heap grew by %d MiB with %d MiB of bodies in flight, want under 16 MiB", grown>>20, total>>20)
			}
			close(open)
			for _, c := range calls {
				r := await(t, c)
				if r.err != nil || r.resp.StatusCode != http.StatusOK || string(r.body) != strconv.FormatInt(tt.size, 10) {
					t.Errorf("call ended with %v %v %q", r.err, r.resp, r.body)
				}
			}
			if got.Load() != total {
				t.Errorf("the destination got %d bytes, want %d", got.Load(), total)
			}
		})
	}
}
