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
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"golang.org/x/net/http2"

	"knative.dev/event-forwarding-proxy/internal/h2raw"
	"knative.dev/event-forwarding-proxy/proxy/internal/h2server"
)

// heldCounts counts the requests that reach its handler, which holds
// each until its context ends, and the handlers that returned.
type heldCounts struct{ reached, returned atomic.Int64 }

func (n *heldCounts) handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.reached.Add(1)
		defer n.returned.Add(1)
		<-r.Context().Done()
	})
}

// TestRapidResetNotDispatched: streams the caller opens and resets in one
// burst never reach the handler (CVE-2023-44487); within the stream
// limit the connection serves on.
func TestRapidResetNotDispatched(t *testing.T) {
	var n heldCounts
	f := startServer(t, &h2server.Server{MaxConcurrentStreams: 100}, n.handler())
	c := h2raw.Connect(t, f.addr)
	c.OpenAndReset(1, 100)
	c.Alive()
	if got := n.reached.Load(); got != 0 {
		t.Errorf("%d streams reset in the burst that opened them reached the handler, want 0", got)
	}
}

// TestRapidResetClosesConnection: a caller that keeps resetting streams,
// more than its stream limit and more than it completes, is told
// ENHANCE_YOUR_CALM and cut.
func TestRapidResetClosesConnection(t *testing.T) {
	var n heldCounts
	f := startServer(t, &h2server.Server{MaxConcurrentStreams: 10}, n.handler())
	c := h2raw.Connect(t, f.addr)
	c.OpenAndReset(1, 11)
	c.WantGoAway(http2.ErrCodeEnhanceYourCalm)
}

// TestCancellingEveryStreamIsNotAbuse: a caller that resets every stream
// it has open, once, as a client does when it gives up, keeps its
// connection; so does one whose resets stay below what it completes.
// A reset stream counts against the stream limit until its handler has
// returned (the handler may still hold a destination's call), so the
// test waits for that before it opens the next streams.
func TestCancellingEveryStreamIsNotAbuse(t *testing.T) {
	var n heldCounts
	held := n.handler()
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/ok" {
			_, _ = w.Write([]byte("ok"))
			return
		}
		held.ServeHTTP(w, r)
	})
	f := startServer(t, &h2server.Server{MaxConcurrentStreams: 10}, h)
	c := h2raw.Connect(t, f.addr)
	id := uint32(1)
	for range 10 {
		c.Get(id, "/held")
		id += 2
	}
	eventually(t, "every stream reaches the handler", func() bool { return n.reached.Load() == 10 })
	for i := range uint32(10) {
		c.Check(c.Framer.WriteRSTStream(1+2*i, http2.ErrCodeCancel))
	}
	eventually(t, "every reset stream's handler returns", func() bool { return n.returned.Load() == 10 })
	c.Alive()
	// Completed calls let resets beyond the stream limit pass.
	for range 20 {
		c.Get(id, "/ok")
		c.OK(id, "200")
		id += 2
	}
	for want := int64(11); want <= 20; want++ {
		c.Get(id, "/held")
		eventually(t, "the stream reaches the handler", func() bool { return n.reached.Load() == want })
		c.Check(c.Framer.WriteRSTStream(id, http2.ErrCodeCancel))
		eventually(t, "its handler returns", func() bool { return n.returned.Load() == want })
		id += 2
	}
	c.Alive()
}

// TestResetStreamCountsUntilItsHandlerReturns: a stream the caller reset
// still counts against the stream limit while its handler runs, since
// the handler may still hold a destination's call; a stream opened past
// the limit meanwhile is refused as retryable, and served once the
// handler has returned.
func TestResetStreamCountsUntilItsHandlerReturns(t *testing.T) {
	var reached, returned atomic.Int64
	release := make(chan struct{})
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/ok" {
			_, _ = w.Write([]byte("ok"))
			return
		}
		reached.Add(1)
		defer returned.Add(1)
		<-r.Context().Done()
		<-release // still winding down the destination's call
	})
	f := startServer(t, &h2server.Server{MaxConcurrentStreams: 1}, h)
	c := h2raw.Connect(t, f.addr)
	c.Get(1, "/held")
	eventually(t, "the stream reaches the handler", func() bool { return reached.Load() == 1 })
	c.Check(c.Framer.WriteRSTStream(1, http2.ErrCodeCancel))
	c.Alive()
	c.Get(3, "/ok")
	c.WantReset(3, http2.ErrCodeRefusedStream)
	close(release)
	eventually(t, "the reset stream's handler returns", func() bool { return returned.Load() == 1 })
	c.Get(5, "/ok")
	c.OK(5, "200")
	c.Alive()
}

// TestUselessFrameFloods: frames that carry no request and cost work
// (empty DATA frames that end nothing, header lists refused with 431,
// malformed requests, frames on closed streams) end the connection once
// they pass the stream limit and what the connection completed.
func TestUselessFrameFloods(t *testing.T) {
	const limit = 10
	for _, tc := range []struct {
		name  string
		flood func(c *h2raw.Client)
	}{{
		name: "empty DATA",
		flood: func(c *h2raw.Client) {
			c.Request(1, "POST", "/", false)
			c.Burst(func(fr *http2.Framer) {
				for range limit + 1 {
					c.Check(fr.WriteData(1, false, nil))
				}
			})
		},
	}, {
		name: "header lists over the limit (431)",
		flood: func(c *h2raw.Client) {
			c.Burst(func(fr *http2.Framer) {
				for i := range limit + 1 {
					kv := []string{":method", "GET", ":scheme", "http", ":path", "/", ":authority", "example.test"}
					for j := range 40 { // many small fields: the list, not one string, is too long
						kv = append(kv, fmt.Sprintf("x-f%d", j), strings.Repeat("v", 40))
					}
					block := c.Block(kv...)
					c.Check(fr.WriteHeaders(http2.HeadersFrameParam{StreamID: uint32(1 + 2*i), BlockFragment: block, EndStream: true, EndHeaders: true}))
				}
			})
		},
	}, {
		name: "malformed requests",
		flood: func(c *h2raw.Client) {
			block := c.Block(":method", "GET")
			c.Burst(func(fr *http2.Framer) {
				for i := range limit + 1 {
					c.Check(fr.WriteHeaders(http2.HeadersFrameParam{StreamID: uint32(1 + 2*i), BlockFragment: block, EndStream: true, EndHeaders: true}))
				}
			})
		},
	}, {
		name: "RST_STREAM on closed streams",
		flood: func(c *h2raw.Client) {
			c.Get(1, "/")
			c.OK(1, "200")
			c.Burst(func(fr *http2.Framer) {
				for range limit + 2 {
					c.Check(fr.WriteRSTStream(1, http2.ErrCodeCancel))
				}
			})
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			f := startServer(t, &h2server.Server{MaxConcurrentStreams: limit, MaxHeaderBytes: 1000}, okHandler)
			c := h2raw.Connect(t, f.addr)
			tc.flood(c)
			c.WantGoAway(http2.ErrCodeEnhanceYourCalm)
		})
	}
}

// TestBodiesOnTheirWayAreNotAFlood: a caller whose large requests are
// answered before their bodies are read (a refusal) keeps sending what
// each stream's window allowed until it sees the reset; those bytes are
// not a flood, however many such calls it makes on one connection. DATA
// past what the window allowed is.
func TestBodiesOnTheirWayAreNotAFlood(t *testing.T) {
	const limit = 10
	refuse := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
	})
	open := func(t *testing.T) (*h2raw.Client, func(id uint32)) {
		f := startServer(t, &h2server.Server{MaxConcurrentStreams: limit}, refuse)
		c := h2raw.Connect(t, f.addr)
		return c, func(id uint32) {
			c.Request(id, "POST", "/", false, "content-length", "4194304")
			c.OK(id, "503")
		}
	}
	t.Run("within the window", func(t *testing.T) {
		c, refused := open(t)
		window := make([]byte, c.InitialWindow())
		for i := range uint32(3 * limit) {
			id := 1 + 2*i
			refused(id)
			c.Data(id, window, false) // 16 frames each, all within the window
		}
		c.Alive()
	})
	t.Run("past the window", func(t *testing.T) {
		c, refused := open(t)
		refused(1)
		c.Data(1, make([]byte, c.InitialWindow()), false)
		c.Burst(func(fr *http2.Framer) {
			for range limit + 1 {
				c.Check(fr.WriteData(1, false, []byte{0}))
			}
		})
		c.WantGoAway(http2.ErrCodeEnhanceYourCalm)
	})
}
