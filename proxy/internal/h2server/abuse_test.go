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

package h2server_test

import (
	"bytes"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"golang.org/x/net/http2"

	"knative.dev/event-forwarding-proxy/proxy/internal/h2server"
)

// countingHandler counts the requests that reach it and holds each until
// its context ends.
func countingHandler(n *atomic.Int64) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		<-r.Context().Done()
	})
}

// burst writes what frames writes in one write, so that the server reads
// it as one burst.
func (c *rawClient) burst(frames func(fr *http2.Framer)) {
	c.t.Helper()
	var b bytes.Buffer
	fr := http2.NewFramer(&b, nil)
	frames(fr)
	_, err := c.nc.Write(b.Bytes())
	c.check(err)
}

// openAndReset writes HEADERS and RST_STREAM for n streams from first, in
// one burst.
func (c *rawClient) openAndReset(first uint32, n int) {
	block := c.block(":method", "POST", ":scheme", "http", ":path", "/", ":authority", "example.test")
	c.burst(func(fr *http2.Framer) {
		for i := range n {
			id := first + uint32(2*i)
			c.check(fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: block, EndHeaders: true}))
			c.check(fr.WriteRSTStream(id, http2.ErrCodeCancel))
		}
	})
}

// TestRapidResetNotDispatched: streams the caller opens and resets in one
// burst never reach the handler (CVE-2023-44487); within the stream
// limit the connection serves on.
func TestRapidResetNotDispatched(t *testing.T) {
	var reached atomic.Int64
	f := startServer(t, &h2server.Server{MaxConcurrentStreams: 100}, countingHandler(&reached))
	c := connectRaw(t, f.addr)
	c.openAndReset(1, 100)
	c.alive()
	if n := reached.Load(); n != 0 {
		t.Errorf("%d streams reset in the burst that opened them reached the handler, want 0", n)
	}
}

// TestRapidResetClosesConnection: a caller that keeps resetting streams,
// more than its stream limit and more than it completes, is told
// ENHANCE_YOUR_CALM and cut.
func TestRapidResetClosesConnection(t *testing.T) {
	var reached atomic.Int64
	f := startServer(t, &h2server.Server{MaxConcurrentStreams: 10}, countingHandler(&reached))
	c := connectRaw(t, f.addr)
	c.openAndReset(1, 11)
	c.wantGoAway(http2.ErrCodeEnhanceYourCalm)
}

// TestCancellingEveryStreamIsNotAbuse: a caller that resets every stream
// it has open, once, as a client does when it gives up, keeps its
// connection; so does one whose resets stay below what it completes.
func TestCancellingEveryStreamIsNotAbuse(t *testing.T) {
	var reached atomic.Int64
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/ok" {
			_, _ = w.Write([]byte("ok"))
			return
		}
		countingHandler(&reached).ServeHTTP(w, r)
	})
	f := startServer(t, &h2server.Server{MaxConcurrentStreams: 10}, h)
	c := connectRaw(t, f.addr)
	id := uint32(1)
	for range 10 {
		c.get(id, "/held")
		id += 2
	}
	eventually(t, "every stream reaches the handler", func() bool { return reached.Load() == 10 })
	for i := range uint32(10) {
		c.check(c.fr.WriteRSTStream(1+2*i, http2.ErrCodeCancel))
	}
	c.alive()
	// Completed calls let resets beyond the stream limit pass.
	for range 20 {
		c.get(id, "/ok")
		c.ok(id, "200")
		id += 2
	}
	for want := int64(11); want <= 20; want++ {
		c.get(id, "/held")
		eventually(t, "the stream reaches the handler", func() bool { return reached.Load() == want })
		c.check(c.fr.WriteRSTStream(id, http2.ErrCodeCancel))
		id += 2
	}
	c.alive()
}

// TestUselessFrameFloods: frames that carry no request and cost work
// (empty DATA frames that end nothing, header lists refused with 431,
// malformed requests, frames on closed streams) end the connection once
// they pass the stream limit and what the connection completed.
func TestUselessFrameFloods(t *testing.T) {
	const limit = 10
	for _, tc := range []struct {
		name  string
		flood func(c *rawClient)
	}{{
		name: "empty DATA",
		flood: func(c *rawClient) {
			c.request(1, "POST", "/", false)
			c.burst(func(fr *http2.Framer) {
				for range limit + 1 {
					c.check(fr.WriteData(1, false, nil))
				}
			})
		},
	}, {
		name: "header lists over the limit (431)",
		flood: func(c *rawClient) {
			c.burst(func(fr *http2.Framer) {
				for i := range limit + 1 {
					kv := []string{":method", "GET", ":scheme", "http", ":path", "/", ":authority", "example.test"}
					for j := range 40 { // many small fields: the list, not one string, is too long
						kv = append(kv, fmt.Sprintf("x-f%d", j), strings.Repeat("v", 40))
					}
					block := c.block(kv...)
					c.check(fr.WriteHeaders(http2.HeadersFrameParam{StreamID: uint32(1 + 2*i), BlockFragment: block, EndStream: true, EndHeaders: true}))
				}
			})
		},
	}, {
		name: "malformed requests",
		flood: func(c *rawClient) {
			block := c.block(":method", "GET")
			c.burst(func(fr *http2.Framer) {
				for i := range limit + 1 {
					c.check(fr.WriteHeaders(http2.HeadersFrameParam{StreamID: uint32(1 + 2*i), BlockFragment: block, EndStream: true, EndHeaders: true}))
				}
			})
		},
	}, {
		name: "RST_STREAM on closed streams",
		flood: func(c *rawClient) {
			c.get(1, "/")
			c.ok(1, "200")
			c.burst(func(fr *http2.Framer) {
				for range limit + 2 {
					c.check(fr.WriteRSTStream(1, http2.ErrCodeCancel))
				}
			})
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			f := startServer(t, &h2server.Server{MaxConcurrentStreams: limit, MaxHeaderBytes: 1000}, okHandler)
			c := connectRaw(t, f.addr)
			tc.flood(c)
			c.wantGoAway(http2.ErrCodeEnhanceYourCalm)
		})
	}
}
