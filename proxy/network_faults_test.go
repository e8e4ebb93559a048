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
	"net/http"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"knative.dev/event-forwarding-proxy/delivery"
	"knative.dev/event-forwarding-proxy/proxy/proxytest"
)

// TestNetworkFaults puts toxiproxy between the proxy and a destination and
// checks the answer the caller gets, that the destination saw the call at
// most once (a sync call is never retried), and that the slot and the
// destination's connection are given back.
func TestNetworkFaults(t *testing.T) {
	tests := []struct {
		name     string
		toxics   func(t *testing.T, x *proxytest.Toxic)
		timeout  string // Kn-Forward-Timeout
		reason   Reason // "" for the destination's own 200
		maxTook  time.Duration
		attempts int // requests the destination saw
	}{{
		name: "reset before response headers",
		toxics: func(t *testing.T, x *proxytest.Toxic) {
			x.Add(t, "reset_peer", "downstream", map[string]any{"timeout": 0})
		},
		reason: ReasonUnreachable, maxTook: 5 * time.Second, attempts: 1,
	}, {
		name: "reset before the request arrives",
		toxics: func(t *testing.T, x *proxytest.Toxic) {
			x.Add(t, "reset_peer", "upstream", map[string]any{"timeout": 0})
		},
		reason: ReasonUnreachable, maxTook: 5 * time.Second, attempts: 0,
	}, {
		name: "black hole after connect: no response before the deadline",
		toxics: func(t *testing.T, x *proxytest.Toxic) {
			x.Add(t, "timeout", "upstream", map[string]any{"timeout": 0})
		},
		timeout: "PT0.3S", reason: ReasonTimeout, maxTook: 5 * time.Second, attempts: 0,
	}, {
		name: "connection cut after a while with nothing answered",
		toxics: func(t *testing.T, x *proxytest.Toxic) {
			x.Add(t, "timeout", "downstream", map[string]any{"timeout": 200})
		},
		reason: ReasonUnreachable, maxTook: 5 * time.Second, attempts: 1,
	}, {
		name: "latency longer than the deadline",
		toxics: func(t *testing.T, x *proxytest.Toxic) {
			x.Add(t, "latency", "downstream", map[string]any{"latency": 1000})
		},
		timeout: "PT0.3S", reason: ReasonTimeout, maxTook: 5 * time.Second, attempts: 1,
	}, {
		name: "latency shorter than the deadline",
		toxics: func(t *testing.T, x *proxytest.Toxic) {
			x.Add(t, "latency", "downstream", map[string]any{"latency": 200, "jitter": 50})
			x.Add(t, "latency", "upstream", map[string]any{"latency": 200})
		},
		timeout: "PT5S", attempts: 1,
	}, {
		// The close is held back 300ms; TestAnswerBeforeClose holds it
		// for as long as the test lasts.
		name: "close held back after the answer",
		toxics: func(t *testing.T, x *proxytest.Toxic) {
			x.Add(t, "slow_close", "downstream", map[string]any{"delay": 300})
		},
		attempts: 1,
	}, {
		name: "slow link both ways",
		toxics: func(t *testing.T, x *proxytest.Toxic) {
			x.Add(t, "bandwidth", "upstream", map[string]any{"rate": 64})
			x.Add(t, "bandwidth", "downstream", map[string]any{"rate": 64})
		},
		attempts: 1,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dest, conns := proxytest.NewCountedDestination(t, false, func(w http.ResponseWriter, r *http.Request, _ int) {
				w.Header().Set("Connection", "close") // a fresh connection for every call
				_, _ = w.Write([]byte(strings.Repeat("r", 16<<10)))
			})
			x := proxytest.NewToxic(t, strings.TrimPrefix(dest.URL, "http://"))
			tt.toxics(t, x)
			fp := newFaultProxy(t, map[string]string{"FORWARD_BREAKER_FAILURES": "0", "FORWARD_MAX_EVENT_BYTES": "65536"}, nil)
			req := fp.newRequest(t, x.URL, strings.NewReader(strings.Repeat("e", 16<<10)))
			if tt.timeout != "" {
				req.Header.Set("Kn-Forward-Timeout", tt.timeout)
			}
			start := time.Now()
			resp, body := do(t, h1Client(t), req)
			took := time.Since(start)
			if tt.reason != "" {
				wantProxyError(t, resp, body, tt.reason)
			} else if resp.StatusCode != http.StatusOK || len(body) != 16<<10 {
				t.Errorf("got %d with %d bytes, want the destination's 200 with %d", resp.StatusCode, len(body), 16<<10)
			}
			if tt.maxTook > 0 && took > tt.maxTook {
				t.Errorf("answered after %s, want within %s", took, tt.maxTook)
			}
			proxytest.Eventually(t, 5*time.Second, func() bool { return fp.Limiter.Inflight() == 0 }, "the slot was not released")
			proxytest.Eventually(t, 10*time.Second, func() bool { return dest.Count() == tt.attempts && conns.Open() == 0 },
				"the destination did not see the expected attempts, or kept a connection open")
		})
	}
}

// TestTruncatedAnswer: a destination whose answer breaks off after the
// headers were passed on leaves the caller with a broken answer (an error
// reading the body), never a clean 200 with a short body.
func TestTruncatedAnswer(t *testing.T) {
	tests := []struct {
		name   string
		client string
		cut    func(t *testing.T, dest *proxytest.Destination) string // returns the URL to call
	}{{
		name: "Content-Length not reached",
		cut: func(t *testing.T, _ *proxytest.Destination) string {
			return proxytest.NewDestination(t, abortAfter(true)).URL
		},
	}, {
		name: "chunked answer without its last chunk",
		cut: func(t *testing.T, _ *proxytest.Destination) string {
			return proxytest.NewDestination(t, abortAfter(false)).URL
		},
	}, {
		name: "connection cut by the network after 8 KiB",
		cut: func(t *testing.T, dest *proxytest.Destination) string {
			x := proxytest.NewToxic(t, strings.TrimPrefix(dest.URL, "http://"))
			x.Add(t, "limit_data", "downstream", map[string]any{"bytes": 8 << 10})
			return x.URL
		},
	}}
	for _, tt := range tests {
		for _, client := range []string{"http1", "h2c"} {
			t.Run(tt.name+"/"+client, func(t *testing.T) {
				whole := proxytest.NewDestination(t, func(w http.ResponseWriter, _ *http.Request, _ int) {
					_, _ = w.Write([]byte(strings.Repeat("a", 64<<10)))
				})
				fp := newFaultProxy(t, map[string]string{"FORWARD_BREAKER_FAILURES": "0"}, nil)
				c := h1Client(t)
				if client == "h2c" {
					c = h2cClient(t)
				}
				r := await(t, goDo(c, fp.newRequest(t, tt.cut(t, whole), strings.NewReader("e"))))
				switch {
				case r.err != nil && r.resp == nil:
					// No answer at all: acceptable, the caller knows it failed.
				case r.resp.StatusCode == http.StatusOK && r.err == nil:
					t.Errorf("the caller got a clean 200 with %d bytes of a broken answer", len(r.body))
				case r.resp.StatusCode != http.StatusOK && r.resp.Header.Get(delivery.HeaderForwardError) == "":
					t.Errorf("the caller got %d without the proxy's reason", r.resp.StatusCode)
				}
				proxytest.Eventually(t, 5*time.Second, func() bool { return fp.Limiter.Inflight() == 0 }, "the slot was not released")
			})
		}
	}
}

// abortAfter answers 8 KiB of a 64 KiB answer, declared (Content-Length)
// or not (chunked), then breaks the connection.
func abortAfter(declared bool) proxytest.Reply {
	return func(w http.ResponseWriter, _ *http.Request, _ int) {
		if declared {
			w.Header().Set("Content-Length", "65536")
		}
		_, _ = w.Write([]byte(strings.Repeat("a", 8<<10)))
		http.NewResponseController(w).Flush()
		panic(http.ErrAbortHandler)
	}
}

// TestLongCallNotCutEarly: a legitimate call longer than every other
// timeout of the proxy (read header, body idle, idle, idle connection,
// dial), within its own deadline, is answered whole: headers late, then a
// body trickling in with pauses longer than those timeouts.
func TestLongCallNotCutEarly(t *testing.T) {
	scaled := map[string]string{
		"FORWARD_MAX_TIMEOUT":         "10s",
		"FORWARD_READ_HEADER_TIMEOUT": "100ms",
		"FORWARD_BODY_IDLE_TIMEOUT":   "100ms",
		"FORWARD_IDLE_TIMEOUT":        "100ms",
		"FORWARD_IDLE_CONN_TIMEOUT":   "100ms",
		"FORWARD_DIAL_TIMEOUT":        "100ms",
	}
	dest := proxytest.NewH2CDestination(t, func(w http.ResponseWriter, r *http.Request, _ int) {
		pause := func() bool {
			select {
			case <-time.After(300 * time.Millisecond):
				return true
			case <-r.Context().Done():
				return false
			}
		}
		for range 2 { // headers late: two pauses before them
			if !pause() {
				return
			}
		}
		for i := range 3 {
			_, _ = io.WriteString(w, strings.Repeat(string(rune('a'+i)), 1000))
			http.NewResponseController(w).Flush()
			if !pause() {
				return
			}
		}
	})
	for _, client := range []string{"http1", "h2c"} {
		for _, async := range []bool{false, true} {
			t.Run(client+map[bool]string{false: "/sync", true: "/async"}[async], func(t *testing.T) {
				t.Parallel() // each waits 1.5 s on the destination
				core, logs := observer.New(zapcore.WarnLevel)
				fp := newFaultProxy(t, scaled, zap.New(core).Sugar())
				c := h1Client(t)
				if client == "h2c" {
					c = h2cClient(t)
				}
				id := t.Name()
				req := fp.newRequest(t, dest.URL, strings.NewReader("e"))
				req.Header.Set("Ce-Id", id)
				req.Header.Set("Kn-Forward-Timeout", "PT5S")
				if async {
					req.Header.Set(delivery.HeaderPrefer, delivery.PreferRespondAsync)
				}
				ctx, cancel := context.WithTimeout(t.Context(), 8*time.Second)
				defer cancel()
				resp, err := c.Do(req.WithContext(ctx))
				if err != nil {
					t.Fatal(err)
				}
				body, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				want := strings.Repeat("a", 1000) + strings.Repeat("b", 1000) + strings.Repeat("c", 1000)
				switch {
				case async && resp.StatusCode != http.StatusAccepted:
					t.Errorf("status %d, want 202", resp.StatusCode)
				case !async && (err != nil || resp.StatusCode != http.StatusOK || string(body) != want):
					t.Errorf("got %d, %d bytes, %v; want 200 with the whole answer", resp.StatusCode, len(body), err)
				}
				proxytest.Eventually(t, 8*time.Second, func() bool { return fp.Limiter.Inflight() == 0 }, "the call did not end")
				if n := attempts(dest, id); n != 1 {
					t.Errorf("the destination saw %d attempts, want 1", n)
				}
				if l := logs.All(); len(l) != 0 {
					t.Errorf("the call was logged as failed: %v", l)
				}
			})
		}
	}
}

// TestAnswerBeforeClose: a destination that answers in full (declared
// length, Connection: close) and then keeps its connection open for as
// long as the test lasts: the caller has the whole answer at once; the
// proxy does not wait for the close.
func TestAnswerBeforeClose(t *testing.T) {
	hold := make(chan struct{})
	defer close(hold)
	dest := proxytest.NewDestination(t, func(w http.ResponseWriter, _ *http.Request, _ int) {
		conn, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		defer conn.Close()
		_, _ = brw.WriteString("HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 4\r\n\r\ndone")
		_ = brw.Flush()
		<-hold
	})
	fp := newFaultProxy(t, nil, nil)
	resp, body := do(t, h1Client(t), fp.newRequest(t, dest.URL, strings.NewReader("e")))
	if resp.StatusCode != http.StatusOK || string(body) != "done" {
		t.Errorf("got %d %q, want 200 done while the destination holds its connection", resp.StatusCode, body)
	}
	proxytest.Eventually(t, 5*time.Second, func() bool { return fp.Limiter.Inflight() == 0 }, "the slot was not released")
}

// attempts counts the requests of event id a destination received.
func attempts(d *proxytest.Destination, id string) int {
	n := 0
	for _, r := range d.Requests() {
		if r.Header.Get("Ce-Id") == id {
			n++
		}
	}
	return n
}
