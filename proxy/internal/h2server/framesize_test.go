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
	"strings"
	"testing"

	"golang.org/x/net/http2"

	"knative.dev/event-forwarding-proxy/internal/h2raw"
)

// TestFrameSize: the server announces the default SETTINGS_MAX_FRAME_SIZE,
// so a caller's DATA or HEADERS frame may carry 16,384 bytes and no more
// (RFC 9113 4.2). One byte more ends the connection with FRAME_SIZE_ERROR,
// and so does a bare frame header announcing 16 MiB: the server neither
// allocates nor waits for what such a header announces.
func TestFrameSize(t *testing.T) {
	const limit = 16384
	post := func(c *h2raw.Client) {
		c.Request(1, "POST", "/", false, "content-length", "16385")
	}
	for _, tc := range []struct {
		name string
		send func(c *h2raw.Client)
		ok   bool
	}{{
		name: "DATA at the limit",
		send: func(c *h2raw.Client) {
			post(c)
			c.Check(c.Framer.WriteData(1, false, []byte(strings.Repeat("a", limit))))
			c.Check(c.Framer.WriteData(1, true, []byte("a")))
		},
		ok: true,
	}, {
		name: "DATA over the limit",
		send: func(c *h2raw.Client) {
			post(c)
			c.Check(c.Framer.WriteData(1, true, []byte(strings.Repeat("a", limit+1))))
		},
	}, {
		name: "HEADERS over the limit",
		send: func(c *h2raw.Client) {
			block := c.Block(":method", "GET", ":scheme", "http", ":path", "/", ":authority", "example.test",
				"x-big", strings.Repeat("{", limit)) // no shorter in Huffman
			c.Check(c.Framer.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: block, EndStream: true, EndHeaders: true}))
		},
	}, {
		name: "a frame header announcing 16 MiB",
		send: func(c *h2raw.Client) {
			post(c)
			_, err := c.Conn.Write([]byte{0xff, 0xff, 0xff, byte(http2.FrameData), 0, 0, 0, 0, 1})
			c.Check(err)
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			f := startServer(t, nil, okHandler)
			c := h2raw.Connect(t, f.addr)
			tc.send(c)
			if !tc.ok {
				c.WantGoAway(http2.ErrCodeFrameSize)
				return
			}
			if st := c.OK(1, "200"); st.Header.Get("X-Read") != "16385" {
				t.Errorf("the handler read %q bytes, want 16385", st.Header.Get("X-Read"))
			}
		})
	}
}
