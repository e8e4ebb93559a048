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

package delivery_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"syscall"
	"testing"
	"time"

	"knative.dev/event-forwarding-proxy/delivery"
)

func TestClassify(t *testing.T) {
	expired := func(t *testing.T) context.Context {
		ctx, cancel := context.WithDeadline(context.Background(), time.Unix(1, 0))
		t.Cleanup(cancel)
		return ctx
	}
	expiredWithCause := func(t *testing.T) context.Context {
		ctx, cancel := context.WithDeadlineCause(context.Background(), time.Unix(1, 0), errors.New("call budget spent"))
		t.Cleanup(cancel)
		return ctx
	}
	cancelled := func(*testing.T) context.Context {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		return ctx
	}
	cancelledByDeadline := func(*testing.T) context.Context {
		ctx, cancel := context.WithCancelCause(context.Background())
		cancel(fmt.Errorf("timer fired: %w", context.DeadlineExceeded))
		return ctx
	}
	live := func(*testing.T) context.Context { return context.Background() }

	dialRefused := &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	tests := []struct {
		name string
		ctx  func(*testing.T) context.Context
		err  error
		want delivery.Failure
	}{
		{name: "expired context", ctx: expired, err: dialRefused, want: delivery.TimedOut},
		{name: "expired context with a cause", ctx: expiredWithCause, err: io.ErrUnexpectedEOF, want: delivery.TimedOut},
		{name: "expired context, error says cancelled", ctx: expired, err: context.Canceled, want: delivery.TimedOut},
		{name: "cancelled context", ctx: cancelled, err: dialRefused, want: delivery.CallerGone},
		{name: "cancelled context, error says deadline", ctx: cancelled, err: context.DeadlineExceeded, want: delivery.CallerGone},
		{name: "cancelled with a deadline cause", ctx: cancelledByDeadline, err: context.Canceled, want: delivery.TimedOut},
		{name: "live, wrapped deadline", ctx: live, err: &url.Error{Op: "Post", URL: "http://d", Err: fmt.Errorf("read: %w", context.DeadlineExceeded)}, want: delivery.TimedOut},
		{name: "live, wrapped cancel", ctx: live, err: &url.Error{Op: "Post", URL: "http://d", Err: context.Canceled}, want: delivery.CallerGone},
		{name: "live, dial refused", ctx: live, err: dialRefused, want: delivery.Unreachable},
		{name: "live, dial i/o timeout", ctx: live, err: &net.OpError{Op: "dial", Net: "tcp", Err: os.ErrDeadlineExceeded}, want: delivery.Unreachable},
		{name: "live, reset before headers", ctx: live, err: io.ErrUnexpectedEOF, want: delivery.Unreachable},
		{name: "live, denied destination", ctx: live, err: fmt.Errorf("dial: %w", delivery.ErrDestinationDenied), want: delivery.Unreachable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := delivery.Classify(tt.ctx(t), tt.err); got != tt.want {
				t.Errorf("Classify(%v) = %v, want %v", tt.err, got, tt.want)
			}
		})
	}
}

func TestFailureString(t *testing.T) {
	tests := []struct {
		name string
		f    delivery.Failure
		want string
	}{
		{name: "unreachable", f: delivery.Unreachable, want: "unreachable"},
		{name: "timed out", f: delivery.TimedOut, want: "timeout"},
		{name: "caller gone", f: delivery.CallerGone, want: "caller_gone"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.f.String(); got != tt.want {
				t.Errorf("String() = %q, want %q", got, tt.want)
			}
		})
	}
}

// TestClassifyRealErrors classifies the errors an actual round trip returns.
func TestClassifyRealErrors(t *testing.T) {
	release := make(chan struct{})
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	t.Cleanup(slow.Close)
	t.Cleanup(func() { close(release) })

	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closedURL := "http://" + closed.Addr().String()
	closed.Close()

	trs := delivery.NewTransports(delivery.TransportParams{})
	tr := trs.HTTP1
	t.Cleanup(trs.CloseIdleConnections)

	tests := []struct {
		name string
		url  string
		ctx  func() (context.Context, context.CancelFunc)
		want delivery.Failure
	}{{
		name: "nothing listening",
		url:  closedURL,
		ctx:  func() (context.Context, context.CancelFunc) { return context.WithCancel(context.Background()) },
		want: delivery.Unreachable,
	}, {
		name: "deadline before the answer",
		url:  slow.URL,
		ctx: func() (context.Context, context.CancelFunc) {
			return context.WithTimeout(context.Background(), 50*time.Millisecond)
		},
		want: delivery.TimedOut,
	}, {
		name: "caller gone before the answer",
		url:  slow.URL,
		ctx: func() (context.Context, context.CancelFunc) {
			ctx, cancel := context.WithCancel(context.Background())
			time.AfterFunc(50*time.Millisecond, cancel)
			return ctx, cancel
		},
		want: delivery.CallerGone,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := tt.ctx()
			defer cancel()
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, tt.url, nil)
			if err != nil {
				t.Fatal(err)
			}
			resp, err := tr.RoundTrip(req)
			if err == nil {
				resp.Body.Close()
				t.Fatalf("RoundTrip succeeded with %s, want an error", resp.Status)
			}
			if got := delivery.Classify(ctx, err); got != tt.want {
				t.Errorf("Classify(%v) = %v, want %v", err, got, tt.want)
			}
		})
	}
}
