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

package http1_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"knative.dev/event-forwarding-proxy/delivery/http1"
	"knative.dev/event-forwarding-proxy/test/testproc"
)

// TestRoundTripContextWhileWaiting: a context cancelled, or past its
// deadline, while the call waits for the answer's head ends the call with
// the context's error; the connection is not reused.
func TestRoundTripContextWhileWaiting(t *testing.T) {
	var arrived atomic.Int64
	release := make(chan struct{})
	srv, _ := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/held" {
			arrived.Add(1)
			<-release
		}
		io.WriteString(w, "ok")
	})
	t.Cleanup(func() { close(release) })
	tests := []struct {
		name    string
		context func() (context.Context, func()) // the context, and what ends it once the call is held
		body    string
		expires bool // the context ends by itself: do not wait for the call to be held
		stalled bool // the body is a pipe that gives its first bytes, then nothing until the test ends
		want    error
	}{
		{name: "cancelled", context: func() (context.Context, func()) {
			ctx, cancel := context.WithCancel(newCtx(t))
			return ctx, cancel
		}, want: context.Canceled},
		{name: "cancelled, with a body", body: "payload", context: func() (context.Context, func()) {
			ctx, cancel := context.WithCancel(newCtx(t))
			return ctx, cancel
		}, want: context.Canceled},
		{name: "cancelled, with a stalled streaming body", stalled: true, context: func() (context.Context, func()) {
			ctx, cancel := context.WithCancel(newCtx(t))
			return ctx, cancel
		}, want: context.Canceled},
		{name: "deadline", context: func() (context.Context, func()) {
			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			t.Cleanup(cancel)
			return ctx, func() {}
		}, expires: true, want: context.DeadlineExceeded},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr, dials := newTransport(t, &http1.Transport{})
			ctx, end := tt.context()
			before := arrived.Load()
			res := make(chan result, 1)
			req := newRequest(t, ctx, "POST", srv.URL+"/held", strings.NewReader(tt.body), int64(len(tt.body)))
			if tt.stalled {
				pr, pw := io.Pipe()
				t.Cleanup(func() { pw.CloseWithError(errors.New("the test ended")) })
				go pw.Write([]byte("first bytes"))
				req = newRequest(t, ctx, "POST", srv.URL+"/held", pr, -1)
			}
			go func() { res <- doCall(tr, req) }()
			if !tt.expires {
				testproc.Eventually(t, waitLimit, "the call is held by the destination", func() bool { return arrived.Load() > before })
			}
			end()
			r := receive(t, res, "the call to end")
			if !errors.Is(r.RTErr, tt.want) {
				t.Errorf("RoundTrip error %v, want %v", r.RTErr, tt.want)
			}
			wantCutConnectionDropped(t, tr, dials, srv.URL+"/ok")
		})
	}
}

// wantCutConnectionDropped: after a call cut by its context on the one
// connection dialed so far, no connection is idle, and the next call, to
// okURL, dials a new one.
func wantCutConnectionDropped(t *testing.T, tr *http1.Transport, dials *atomic.Int64, okURL string) {
	t.Helper()
	if n := tr.IdleConns(); n != 0 {
		t.Errorf("%d idle connections, want 0", n)
	}
	get(t, tr, okURL)
	if n := dials.Load(); n != 2 {
		t.Errorf("dialed %d times, want 2 (the cut connection not reused)", n)
	}
}

// TestRoundTripContextWhileReadingBody: a context cancelled while the
// answer's body is being read ends the read with an error (not io.EOF),
// and the connection is not reused.
func TestRoundTripContextWhileReadingBody(t *testing.T) {
	release := make(chan struct{})
	srv, _ := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/partial" {
			io.WriteString(w, "part")
			w.(http.Flusher).Flush()
			<-release
			return
		}
		io.WriteString(w, "ok")
	})
	t.Cleanup(func() { close(release) })
	tests := []struct {
		name         string
		cancelBefore bool // cancel before the next Read starts; else while it may be blocked
	}{
		{name: "during the read"},
		{name: "before the read", cancelBefore: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr, dials := newTransport(t, &http1.Transport{})
			ctx, cancel := context.WithCancel(newCtx(t))
			defer cancel()
			resp, err := tr.RoundTrip(newRequest(t, ctx, "GET", srv.URL+"/partial", nil, 0))
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			buf := make([]byte, 4)
			if _, err := io.ReadFull(resp.Body, buf); err != nil || string(buf) != "part" {
				t.Fatalf("read %q, %v; want part", buf, err)
			}
			if tt.cancelBefore {
				cancel()
			}
			readErr := make(chan error, 1)
			go func() {
				_, err := resp.Body.Read(make([]byte, 64))
				readErr <- err
			}()
			cancel()
			err = receive(t, readErr, "the body read to end after the cancel")
			if err == nil || errors.Is(err, io.EOF) {
				t.Errorf("Read returned %v after the cancel, want an error", err)
			}
			resp.Body.Close()
			wantCutConnectionDropped(t, tr, dials, srv.URL+"/ok")
		})
	}
}

// TestRoundTripContextDoneBefore: a call whose context has already ended
// fails with the context's error and dials nothing.
func TestRoundTripContextDoneBefore(t *testing.T) {
	srv, _ := newOKServer(t)
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	expired, cancel2 := context.WithDeadline(context.Background(), time.Unix(0, 0))
	defer cancel2()
	tests := []struct {
		name string
		ctx  context.Context
		want error
	}{
		{name: "cancelled", ctx: cancelled, want: context.Canceled},
		{name: "deadline passed", ctx: expired, want: context.DeadlineExceeded},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr, dials := newTransport(t, &http1.Transport{})
			r := call(t, tr, newRequest(t, tt.ctx, "POST", srv.URL, strings.NewReader("x"), 1))
			if !errors.Is(r.RTErr, tt.want) {
				t.Errorf("RoundTrip error %v, want %v", r.RTErr, tt.want)
			}
			if n := dials.Load(); n != 0 {
				t.Errorf("dialed %d times, want 0", n)
			}
		})
	}
}

// TestRoundTripContextDoneKeepsIdleConnection: a call whose context ended
// before it started does not spoil the idle connection it would have used.
func TestRoundTripContextDoneKeepsIdleConnection(t *testing.T) {
	srv, _ := newOKServer(t)
	tr, dials := newTransport(t, &http1.Transport{})
	get(t, tr, srv.URL)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if r := call(t, tr, newRequest(t, ctx, "GET", srv.URL, nil, 0)); r.RTErr == nil {
		t.Fatal("a call with a cancelled context succeeded")
	}
	get(t, tr, srv.URL)
	if n := dials.Load(); n != 1 {
		t.Errorf("dialed %d times, want 1", n)
	}
}
