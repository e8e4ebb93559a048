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
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"knative.dev/event-forwarding-proxy/delivery/http1"
	"knative.dev/event-forwarding-proxy/test/testproc"
)

// TestRoundTripReusesConnection: sequential calls whose answers are read
// to their end share one connection, idle between calls.
func TestRoundTripReusesConnection(t *testing.T) {
	tests := []struct {
		name     string
		handler  http.HandlerFunc
		wantBody string
	}{
		{name: "with length", handler: func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }, wantBody: "ok"},
		{name: "chunked", handler: func(w http.ResponseWriter, r *http.Request) {
			io.WriteString(w, "o")
			w.(http.Flusher).Flush()
			io.WriteString(w, "k")
		}, wantBody: "ok"},
		{name: "empty", handler: func(w http.ResponseWriter, r *http.Request) {}, wantBody: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv, states := newServer(t, tt.handler)
			tr, dials := newTransport(t, &http1.Transport{})
			for i := range 5 {
				req := newRequest(t, newCtx(t), "POST", srv.URL, strings.NewReader("event"), 5)
				if r := mustCall(t, tr, req); r.Body != tt.wantBody {
					t.Errorf("call %d: body %q, want %q", i, r.Body, tt.wantBody)
				}
				if n := tr.IdleConns(); n != 1 {
					t.Errorf("after call %d: %d idle connections, want 1", i, n)
				}
			}
			if n := dials.Load(); n != 1 {
				t.Errorf("5 sequential calls dialed %d times, want 1", n)
			}
			if n := states.opened.Load(); n != 1 {
				t.Errorf("the server saw %d connections, want 1", n)
			}
		})
	}
}

// TestRoundTripNotReused: a connection is not used again after an answer
// body closed before its end, an answer with Connection: close, a request
// with Close set, or an HTTP/1.0 answer without keep-alive.
func TestRoundTripNotReused(t *testing.T) {
	big := strings.Repeat("x", 256<<10)
	srv, _ := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/big":
			io.WriteString(w, big)
		case "/close":
			w.Header().Set("Connection", "close")
			io.WriteString(w, "ok")
		default:
			io.WriteString(w, "ok")
		}
	})
	http10 := newRawServer(t, answerEach("HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok"))
	tests := []struct {
		name string
		url  string
		// first makes the first call and leaves its connection as it must not be reused.
		first func(t *testing.T, tr *http1.Transport, url string)
	}{
		{name: "body closed before its end", url: srv.URL + "/big", first: func(t *testing.T, tr *http1.Transport, url string) {
			resp, err := tr.RoundTrip(newRequest(t, newCtx(t), "GET", url, nil, 0))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := io.ReadFull(resp.Body, make([]byte, 10)); err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
		}},
		{name: "body closed unread", url: srv.URL + "/big", first: func(t *testing.T, tr *http1.Transport, url string) {
			resp, err := tr.RoundTrip(newRequest(t, newCtx(t), "GET", url, nil, 0))
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
		}},
		{name: "Connection: close answer", url: srv.URL + "/close", first: func(t *testing.T, tr *http1.Transport, url string) {
			get(t, tr, url)
		}},
		{name: "request with Close", url: srv.URL + "/", first: func(t *testing.T, tr *http1.Transport, url string) {
			req := newRequest(t, newCtx(t), "GET", url, nil, 0)
			req.Close = true
			mustCall(t, tr, req)
		}},
		{name: "HTTP/1.0 answer", url: http10.url, first: func(t *testing.T, tr *http1.Transport, url string) {
			get(t, tr, url)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr, dials := newTransport(t, &http1.Transport{})
			tt.first(t, tr, tt.url)
			if n := tr.IdleConns(); n != 0 {
				t.Errorf("%d idle connections after the first call, want 0", n)
			}
			if r := get(t, tr, tt.url); !strings.HasPrefix(r.Body, "ok") && !strings.HasPrefix(r.Body, "xxx") {
				t.Errorf("the second call read %q", r.Body)
			}
			if n := dials.Load(); n != 2 {
				t.Errorf("2 calls dialed %d times, want 2", n)
			}
		})
	}
}

// TestRoundTripConcurrent: many goroutines calling at once each get their
// own answer, and the idle pool never holds more than MaxIdleConnsPerHost.
func TestRoundTripConcurrent(t *testing.T) {
	const (
		goroutines = 50
		calls      = 20
		maxIdle    = 8
	)
	srv, _ := newServer(t, echo)
	tr, _ := newTransport(t, &http1.Transport{MaxIdleConnsPerHost: maxIdle})
	var (
		wg      sync.WaitGroup
		failed  atomic.Int64
		maxSeen atomic.Int64
		errMu   sync.Mutex
		errs    []error
	)
	for g := range goroutines {
		wg.Go(func() {
			for i := range calls {
				body := fmt.Sprintf("goroutine %d call %d", g, i)
				var req *http.Request
				if i%4 == 3 { // some streamed, some in one write
					req = newRequest(t, newCtx(t), "POST", srv.URL, io.NopCloser(strings.NewReader(body)), -1)
				} else {
					req = newRequest(t, newCtx(t), "POST", srv.URL, strings.NewReader(body), int64(len(body)))
				}
				r := doCall(tr, req)
				if err := r.Err(); err != nil || r.Body != body {
					failed.Add(1)
					errMu.Lock()
					errs = append(errs, fmt.Errorf("%s: got %q, %w", body, r.Body, err))
					errMu.Unlock()
				}
				for {
					n, m := int64(tr.IdleConns()), maxSeen.Load()
					if n <= m || maxSeen.CompareAndSwap(m, n) {
						break
					}
				}
			}
		})
	}
	wg.Wait()
	if n := failed.Load(); n != 0 {
		t.Errorf("%d of %d calls failed, the first: %v", n, goroutines*calls, errs[:min(len(errs), 5)])
	}
	if n := maxSeen.Load(); n > maxIdle {
		t.Errorf("the pool held %d idle connections, want at most %d", n, maxIdle)
	}
	if n := tr.IdleConns(); n < 1 || n > maxIdle {
		t.Errorf("%d idle connections at the end, want 1..%d", n, maxIdle)
	}
}

// TestRoundTripIdlePoolBound: held calls each take a connection; when they
// end, MaxIdleConnsPerHost of them stay idle per host:port and the others
// are closed.
func TestRoundTripIdlePoolBound(t *testing.T) {
	tests := []struct {
		name     string
		maxIdle  int
		hosts    int
		perHost  int
		wantIdle int
	}{
		{name: "bound 2, 5 held calls", maxIdle: 2, hosts: 1, perHost: 5, wantIdle: 2},
		{name: "bound 1 per host, 2 hosts with 3 held calls each", maxIdle: 1, hosts: 2, perHost: 3, wantIdle: 2},
		{name: "bound over the held calls", maxIdle: 10, hosts: 1, perHost: 4, wantIdle: 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var arrived atomic.Int64
			release := make(chan struct{})
			var (
				urls   []string
				states []*connStates
			)
			for range tt.hosts {
				srv, cs := newServer(t, func(w http.ResponseWriter, r *http.Request) {
					arrived.Add(1)
					<-release
					io.WriteString(w, "ok")
				})
				urls, states = append(urls, srv.URL), append(states, cs)
			}
			var once sync.Once
			t.Cleanup(func() { once.Do(func() { close(release) }) })
			tr, dials := newTransport(t, &http1.Transport{MaxIdleConnsPerHost: tt.maxIdle})
			total := tt.hosts * tt.perHost
			res := make(chan result, total)
			for _, u := range urls {
				for range tt.perHost {
					go func() { res <- doCall(tr, newRequest(t, newCtx(t), "GET", u, nil, 0)) }()
				}
			}
			testproc.Eventually(t, waitLimit, fmt.Sprintf("all %d calls are held by the destinations", total), func() bool {
				return arrived.Load() == int64(total)
			})
			once.Do(func() { close(release) })
			for range total {
				if r := receive(t, res, "a held call to end"); r.Err() != nil || r.Body != "ok" {
					t.Errorf("call: %q, %v", r.Body, r.Err())
				}
			}
			if n := tr.IdleConns(); n != tt.wantIdle {
				t.Errorf("%d idle connections, want %d", n, tt.wantIdle)
			}
			if n := dials.Load(); n != int64(total) {
				t.Errorf("%d held calls dialed %d times, want %d", total, n, total)
			}
			testproc.Eventually(t, waitLimit, "the destinations see the connections over the bound closed", func() bool {
				var closed int64
				for _, cs := range states {
					closed += cs.closed.Load()
				}
				return closed == int64(total-tt.wantIdle)
			})
		})
	}
}

// closeRecorder is a request body that records its Close; a pipe reader
// under it is closed too, which ends a Read blocked on it.
type closeRecorder struct {
	io.Reader
	closed atomic.Bool
}

func (b *closeRecorder) Close() error {
	b.closed.Store(true)
	if pr, ok := b.Reader.(*io.PipeReader); ok {
		pr.Close()
	}
	return nil
}

// TestRoundTripClosesRequestBody: as http.RoundTripper requires, the
// request body is closed whatever the outcome of the call (at the latest
// a moment after RoundTrip returns).
func TestRoundTripClosesRequestBody(t *testing.T) {
	var arrived atomic.Int64
	release := make(chan struct{})
	srv, _ := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/held" {
			arrived.Add(1)
			<-release
			return
		}
		io.Copy(io.Discard, r.Body)
	})
	t.Cleanup(func() { close(release) })
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closedPort := ln.Addr().String()
	ln.Close()
	tests := []struct {
		name          string
		url           string
		body          func() io.Reader
		contentLength int64
		modify        func(*http.Request)
		cancelHeld    bool // cancel the call once the destination holds it
	}{
		{name: "small body, answered", url: srv.URL, body: func() io.Reader { return strings.NewReader("small") }, contentLength: 5},
		{name: "streaming body, answered", url: srv.URL, body: func() io.Reader { return strings.NewReader(strings.Repeat("s", 40000)) }, contentLength: -1},
		{name: "https refused", url: "https://" + closedPort, body: func() io.Reader { return strings.NewReader("small") }, contentLength: 5},
		{name: "invalid header", url: srv.URL, body: func() io.Reader { return strings.NewReader("small") }, contentLength: 5,
			modify: func(r *http.Request) { r.Header["X-Bad"] = []string{"a\r\nb: c"} }},
		{name: "dial error", url: "http://" + closedPort, body: func() io.Reader { return strings.NewReader("small") }, contentLength: 5},
		{name: "body shorter than declared", url: srv.URL, body: func() io.Reader { return strings.NewReader("short") }, contentLength: 10},
		{name: "cancelled while a streaming body stalls", url: srv.URL + "/held", cancelHeld: true, contentLength: -1, body: func() io.Reader {
			pr, pw := io.Pipe()
			t.Cleanup(func() { pw.CloseWithError(errors.New("the test ended")) })
			go pw.Write([]byte("first bytes"))
			return pr
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr, _ := newTransport(t, &http1.Transport{})
			ctx, cancel := context.WithCancel(newCtx(t))
			defer cancel()
			body := &closeRecorder{Reader: tt.body()}
			req := newRequest(t, ctx, "POST", tt.url, body, tt.contentLength)
			if tt.modify != nil {
				tt.modify(req)
			}
			before := arrived.Load()
			res := make(chan result, 1)
			go func() { res <- doCall(tr, req) }()
			if tt.cancelHeld {
				testproc.Eventually(t, waitLimit, "the call is held by the destination", func() bool { return arrived.Load() > before })
				cancel()
			}
			if r := receive(t, res, "the call to end"); errors.Is(r.RTErr, errWatchdog) {
				t.Fatal(r.RTErr)
			}
			testproc.Eventually(t, waitLimit, "the request body is closed", body.closed.Load)
		})
	}
}

// TestIdleConnTimeout: a connection idle for IdleConnTimeout is closed.
func TestIdleConnTimeout(t *testing.T) {
	srv, states := newOKServer(t)
	tr, dials := newTransport(t, &http1.Transport{IdleConnTimeout: 200 * time.Millisecond})
	get(t, tr, srv.URL)
	testproc.Eventually(t, waitLimit, "the idle connection times out", func() bool { return tr.IdleConns() == 0 })
	testproc.Eventually(t, waitLimit, "the destination sees the connection closed", func() bool { return states.closed.Load() == 1 })
	get(t, tr, srv.URL)
	if n := dials.Load(); n != 2 {
		t.Errorf("dialed %d times, want 2 (a new connection after the timeout)", n)
	}
}

// TestIdleConnTimeoutKeepsFreshConnections: a connection idle for less than
// IdleConnTimeout is reused.
func TestIdleConnTimeoutKeepsFreshConnections(t *testing.T) {
	srv, _ := newOKServer(t)
	tr, dials := newTransport(t, &http1.Transport{IdleConnTimeout: time.Hour})
	for range 3 {
		get(t, tr, srv.URL)
	}
	if n := dials.Load(); n != 1 {
		t.Errorf("dialed %d times, want 1", n)
	}
}

// TestCloseIdleConnections: CloseIdleConnections closes the idle
// connections at once, and the next call dials a new one.
func TestCloseIdleConnections(t *testing.T) {
	srv, states := newOKServer(t)
	tr, dials := newTransport(t, &http1.Transport{})
	get(t, tr, srv.URL)
	if n := tr.IdleConns(); n != 1 {
		t.Fatalf("%d idle connections, want 1", n)
	}
	tr.CloseIdleConnections()
	if n := tr.IdleConns(); n != 0 {
		t.Errorf("%d idle connections after CloseIdleConnections, want 0", n)
	}
	testproc.Eventually(t, waitLimit, "the destination sees the connection closed", func() bool { return states.closed.Load() == 1 })
	get(t, tr, srv.URL)
	if n := dials.Load(); n != 2 {
		t.Errorf("dialed %d times, want 2", n)
	}
}
