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

// Package calltest holds what the tests of delivery's transports
// (delivery/http1, delivery/h2c) share: requests built exactly as given,
// calls run under a watchdog so that a transport that blocks fails its test
// instead of hanging it, and a few small servers' handlers and bodies.
package calltest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"knative.dev/event-forwarding-proxy/test/testproc"
)

// WaitLimit bounds every wait of a test: a call's context, a receive.
const WaitLimit = 10 * time.Second

// NewCtx returns a context that ends after WaitLimit or with the test.
func NewCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), WaitLimit)
	t.Cleanup(cancel)
	return ctx
}

// NewRequest builds a request with exactly the given body and
// ContentLength (no inference from the body's type).
func NewRequest(t testing.TB, ctx context.Context, method, url string, body io.Reader, contentLength int64) *http.Request {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if body != nil {
		rc, ok := body.(io.ReadCloser)
		if !ok {
			rc = io.NopCloser(body)
		}
		req.Body = rc
	}
	req.ContentLength = contentLength
	return req
}

// Result is a call's answer with its body read to the end and closed.
type Result struct {
	Resp    *http.Response
	Body    string
	RTErr   error // from RoundTrip
	ReadErr error // from reading the body
}

// Err is the call's error, from RoundTrip or from reading the body.
func (r Result) Err() error { return errors.Join(r.RTErr, r.ReadErr) }

// ErrWatchdog is the error of a call that did not end in time.
var ErrWatchdog = errors.New("the call did not end within its watchdog")

// Do runs req through tr and reads the answer's body to its end, on a
// goroutine watched for 5 s longer than the request's context has left
// (WaitLimit if it has no deadline), so that a transport that blocks yields
// ErrWatchdog instead of hanging the test. A panic in the transport is a
// result error that names it. Safe on any goroutine.
func Do(tr http.RoundTripper, req *http.Request) Result {
	done := make(chan Result, 1)
	go func() {
		var r Result
		defer func() {
			if p := recover(); p != nil {
				r.RTErr = fmt.Errorf("PANIC in the transport: %v", p)
			}
			done <- r
		}()
		r.Resp, r.RTErr = tr.RoundTrip(req)
		if r.RTErr != nil {
			return
		}
		var b []byte
		b, r.ReadErr = io.ReadAll(r.Resp.Body)
		r.Body = string(b)
		r.Resp.Body.Close()
	}()
	limit := WaitLimit
	if d, ok := req.Context().Deadline(); ok {
		limit = max(time.Until(d), 0) // a deadline passed long ago still gets 5 s
	}
	select {
	case r := <-done:
		return r
	case <-time.After(limit + 5*time.Second):
		return Result{RTErr: fmt.Errorf("%s %s: %w", req.Method, req.URL, ErrWatchdog)}
	}
}

// Call is Do on the test's goroutine: a call that hangs fails the test.
func Call(t testing.TB, tr http.RoundTripper, req *http.Request) Result {
	t.Helper()
	r := Do(tr, req)
	if errors.Is(r.RTErr, ErrWatchdog) {
		t.Fatal(r.RTErr)
	}
	return r
}

// MustCall is Call for calls that must succeed.
func MustCall(t testing.TB, tr http.RoundTripper, req *http.Request) Result {
	t.Helper()
	r := Call(t, tr, req)
	if err := r.Err(); err != nil {
		t.Fatalf("%s %s: %v", req.Method, req.URL, err)
	}
	return r
}

// Get is MustCall for a GET of url.
func Get(t testing.TB, tr http.RoundTripper, url string) Result {
	t.Helper()
	return MustCall(t, tr, NewRequest(t, NewCtx(t), http.MethodGet, url, nil, 0))
}

// Go runs req through tr on a new goroutine; its result arrives on the
// channel returned.
func Go(tr http.RoundTripper, req *http.Request) <-chan Result {
	res := make(chan Result, 1)
	go func() { res <- Do(tr, req) }()
	return res
}

// Receive returns the next value of ch, failing the test if none comes
// within WaitLimit.
func Receive[T any](t testing.TB, ch <-chan T, what string) T {
	t.Helper()
	return testproc.Receive(t, WaitLimit, ch, what)
}

// Echo answers with the request's body.
func Echo(w http.ResponseWriter, r *http.Request) {
	b, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	_, _ = w.Write(b)
}

// CloseTracker is a request body that records that it was closed.
type CloseTracker struct {
	io.Reader
	Closed atomic.Bool
}

// Close records the close.
func (c *CloseTracker) Close() error {
	c.Closed.Store(true)
	return nil
}

// Pattern returns n bytes that differ from one offset to the next over a
// long period, so that a byte lost, doubled or moved shows.
func Pattern(n int) []byte {
	b := make([]byte, n)
	var x uint32 = 2463534242
	for i := range b {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		b[i] = byte(x)
	}
	return b
}

// BenchPost times small JSON POSTs to url through rt, after one untimed
// call that opens the connection: one at a time when perCore is 0, else
// perCore goroutines per core. It reports allocations and the process's
// CPU time per call (client and an in-process server together).
func BenchPost(b *testing.B, rt http.RoundTripper, url string, perCore int) {
	payload := bytes.Repeat([]byte("p"), 200)
	post := func() error {
		req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, url, bytes.NewReader(payload))
		if err != nil {
			return err
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := rt.RoundTrip(req)
		if err != nil {
			return err
		}
		_, err = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if err == nil && resp.StatusCode != http.StatusOK {
			err = fmt.Errorf("status %d", resp.StatusCode)
		}
		return err
	}
	if err := post(); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	cpu0 := processCPU(b)
	if perCore == 0 {
		for b.Loop() {
			if err := post(); err != nil {
				b.Fatal(err)
			}
		}
	} else {
		b.SetParallelism(perCore)
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if err := post(); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	b.ReportMetric((processCPU(b)-cpu0).Seconds()*1e6/float64(b.N), "cpu-µs/op")
}

// processCPU is the CPU time (user and system) this process has used.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// ServeConns accepts connections on ln until the test ends and runs handle
// on each, on a goroutine of its own, with the connection's number (1 for
// the first), counted in accepted too when it is not nil; the connection is
// closed when handle returns. When the test ends, stop runs (if not nil),
// then the listener and every connection are closed, and ServeConns waits
// for the handlers to return.
func ServeConns(t testing.TB, ln net.Listener, accepted *atomic.Int64, stop func(), handle func(c net.Conn, index int64)) {
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		conns []net.Conn
		n     atomic.Int64
	)
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			index := n.Add(1)
			if accepted != nil {
				accepted.Add(1)
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Go(func() {
				defer c.Close()
				handle(c, index)
			})
		}
	})
	t.Cleanup(func() {
		if stop != nil {
			stop()
		}
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
}
