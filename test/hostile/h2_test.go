//go:build integration

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

package hostile

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/http2"

	"knative.dev/event-forwarding-proxy/internal/h2raw"
)

// The HTTP/2 attacks. The proxy's stream limit is 100 (suiteEnv): the
// abuse counts close a connection past it.
const streamLimit = 100

// goAwayWanted is what a connection the proxy ends for abuse sees.
func goAwayWanted(code http2.ErrCode) string { return "GOAWAY " + code.String() + ", closed" }

// ending reads what the proxy sends on c until it closes the connection
// or deadline passes, and says what the attacker saw: h2raw's WantGoAway
// wants goAwayWanted, but fails the test and ends the attack; this is
// bounded, and the attack goes on against a proxy without the defence.
func ending(c *h2raw.Client, deadline time.Time) string {
	closed := c.ReadUntil(deadline, func() bool { return c.ClosedErr != nil })
	switch {
	case c.GoAway != nil && closed:
		return goAwayWanted(c.GoAway.Code)
	case c.GoAway != nil:
		return "GOAWAY " + c.GoAway.Code.String() + ", left open"
	case closed:
		return "closed without GOAWAY"
	default:
		return "still open"
	}
}

// frameSizeAbuse: a frame header announcing 16 MiB, on 50 connections.
// Each is closed with FRAME_SIZE_ERROR before anything is allocated for
// what it announces.
func frameSizeAbuse(t testing.TB, a *arena) {
	const conns = 50
	var saw tally
	deadline := time.Now().Add(closeWait)
	for range conns {
		c := h2raw.Connect(t, a.addr)
		c.Request(1, "POST", "/", false, "content-length", "16385")
		_, err := c.Conn.Write([]byte{0xff, 0xff, 0xff, byte(http2.FrameData), 0, 0, 0, 0, 1})
		c.Check(err)
		saw.add(ending(c, waitDeadline(deadline)))
		_ = c.Conn.Close()
	}
	a.saw("%d connections: %s", conns, &saw)
	saw.want(t, goAwayWanted(http2.ErrCodeFrameSize), conns)
}

// zeroWindowHold: 10 connections announce SETTINGS_INITIAL_WINDOW_SIZE 0
// and open as many streams as they may, each a request the proxy answers
// itself (no Kn-Forward-To: 400), and never read a byte of body. Each
// answer gets its grace to be written, then its stream is reset: no
// goroutine stays pinned.
func zeroWindowHold(t testing.TB, a *arena) {
	const conns = 10
	var cs []*h2raw.Client
	for range conns {
		c := h2raw.Connect(t, a.addr, http2.Setting{ID: http2.SettingInitialWindowSize, Val: 0})
		block := c.Block(":method", "POST", ":scheme", "http", ":path", "/", ":authority", "proxy.test")
		c.Burst(func(fr *http2.Framer) {
			for i := range streamLimit {
				c.Check(fr.WriteHeaders(http2.HeadersFrameParam{StreamID: uint32(2*i + 1), BlockFragment: block, EndStream: true, EndHeaders: true}))
			}
		})
		cs = append(cs, c)
	}
	resetOf := func(c *h2raw.Client) int {
		n := 0
		for _, st := range c.Streams {
			if st.RST != nil {
				n++
			}
		}
		return n
	}
	deadline := time.Now().Add(closeWait)
	reset, cut := 0, 0
	for _, c := range cs {
		c.ReadUntil(waitDeadline(deadline), func() bool { return resetOf(c) == streamLimit })
		reset += resetOf(c)
		if c.ClosedErr != nil && resetOf(c) < streamLimit {
			cut++
		}
		_ = c.Conn.Close()
	}
	a.saw("%d of %d streams reset", reset, conns*streamLimit)
	if reset != conns*streamLimit {
		t.Errorf("%d of %d streams of zero-window callers reset within %s (%d connections closed first), want every one",
			reset, conns*streamLimit, closeWait, cut)
	}
}

// overTheLimit makes send do its part of an abuse twice on each of conns
// connections: half the limit, then (after a PING shows the server read
// it) the rest and one more, which ends the connection with
// ENHANCE_YOUR_CALM. check, if set, then looks at what the server sent.
// It returns what the attacker saw.
func overTheLimit(t testing.TB, a *arena, conns int, send func(c *h2raw.Client, from, n int), check func(c *h2raw.Client)) string {
	var saw tally
	deadline := time.Now().Add(closeWait)
	for range conns {
		c := h2raw.Connect(t, a.addr)
		send(c, 0, streamLimit/2)
		c.Alive()
		send(c, streamLimit/2, streamLimit/2+1)
		saw.add(ending(c, waitDeadline(deadline)))
		_ = c.Conn.Close()
		if check != nil {
			check(c)
		}
	}
	saw.want(t, goAwayWanted(http2.ErrCodeEnhanceYourCalm), conns)
	return fmt.Sprintf("%d connections: %s", conns, &saw)
}

// rapidReset: streams opened and reset in the same burst (CVE-2023-44487),
// on 20 connections.
func rapidReset(t testing.TB, a *arena) {
	a.saw("%s", overTheLimit(t, a, 20, func(c *h2raw.Client, from, n int) { c.OpenAndReset(uint32(2*from+1), n) }, nil))
}

// emptyDataFlood: empty DATA frames that end nothing, on a call held by
// the sink (CVE-2019-9518), on 10 connections.
func emptyDataFlood(t testing.TB, a *arena) {
	a.saw("%s", overTheLimit(t, a, 10, func(c *h2raw.Client, from, n int) {
		if from == 0 {
			c.Request(1, "POST", "/", false, "kn-forward-to", a.sink.URL+"/attack")
		}
		c.Burst(func(fr *http2.Framer) {
			for range n {
				c.Check(fr.WriteData(1, false, nil))
			}
		})
	}, nil))
}

// zeroLengthHeadersFlood: HEADERS frames with an empty header block, each
// on a new stream: malformed requests, reset before any handler runs, on
// 10 connections.
func zeroLengthHeadersFlood(t testing.TB, a *arena) {
	a.saw("%s", overTheLimit(t, a, 10, func(c *h2raw.Client, from, n int) {
		c.Burst(func(fr *http2.Framer) {
			for i := from; i < from+n; i++ {
				c.Check(fr.WriteHeaders(http2.HeadersFrameParam{StreamID: uint32(2*i + 1), EndStream: true, EndHeaders: true}))
			}
		})
	}, nil))
}

// hpackBomb: a 4,000-byte header value goes into the HPACK dynamic table
// once; then every request refers to it 2,000 times, 2 KB on the wire
// that decode to 8 MB. Each such header list is refused (431) without
// being kept, and past the limit the connection is closed; 5 connections.
func hpackBomb(t testing.TB, a *arena) {
	var (
		refused     int                // bombs answered 431
		taken       = map[string]int{} // bombs answered otherwise, by status
		firstNot431 []string           // the first bomb of a connection not refused
	)
	ends := overTheLimit(t, a, 5, func(c *h2raw.Client, from, n int) {
		c.Burst(func(fr *http2.Framer) {
			if from == 0 { // stream 1 adds the entry; the bombs follow
				c.Check(fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: bombBlock(true), EndStream: true, EndHeaders: true}))
			}
			for i := from; i < from+n; i++ {
				c.Check(fr.WriteHeaders(http2.HeadersFrameParam{StreamID: uint32(2*i + 3), BlockFragment: bombBlock(false), EndStream: true, EndHeaders: true}))
			}
		})
	}, func(c *h2raw.Client) {
		for id, st := range c.Streams {
			switch {
			case id <= 1 || st.Status == "":
			case st.Status == "431":
				refused++
			default:
				taken[st.Status]++
			}
		}
		if st := c.Streams[3]; st == nil || st.Status != "431" {
			firstNot431 = append(firstNot431, fmt.Sprintf("%+v", st))
		}
	})
	others := "no other answer"
	if len(taken) > 0 {
		others = fmt.Sprintf("other answers %v", taken)
	}
	a.saw("431 for %d bombs, %s; %s", refused, others, ends)
	if len(taken) > 0 {
		t.Errorf("bomb streams answered %v, want 431: their header lists were taken", taken)
	}
	if len(firstNot431) > 0 {
		t.Errorf("the first bomb of %d connections got %s, want 431", len(firstNot431), firstNot431[0])
	}
}

// bombBlock is an HPACK block written by hand (the client's encoder
// would not index what the bomb needs): a POST to / from the static
// table, and either the entry the bomb refers to, added to the dynamic
// table (first), or 2,000 references to that entry.
func bombBlock(first bool) []byte {
	b := []byte{0x83, 0x86, 0x84}  // :method POST, :scheme http, :path / (static table)
	b = append(b, 0x01, 10)        // :authority (static name 1), not indexed, 10 bytes
	b = append(b, "proxy.test"...) //
	if first {
		b = append(b, 0x40, 6)          // literal, indexed, new name of 6 bytes
		b = append(b, "x-bomb"...)      //
		b = append(b, 0x7f, 0xa1, 0x1e) // value length 4000: 127 + 3873 (7-bit prefix)
		for range 4000 {
			b = append(b, 'b')
		}
		return b
	}
	for range 2000 {
		b = append(b, 0x80|62) // indexed: the first dynamic entry
	}
	return b
}

// controlFrameFlood: PING and SETTINGS frames, half a million, whose acks
// are never read. The proxy answers each as it reads it, so once its acks
// fill the connection it stops reading, and what it holds stays bounded.
func controlFrameFlood(t testing.TB, a *arena) {
	var read []string
	for range 2 {
		c := h2raw.Connect(t, a.addr)
		_ = c.Conn.SetWriteDeadline(time.Now().Add(5 * time.Second))
		fr := http2.NewFramer(c.Conn, nil)
		sent := 0
		for ; sent < 500000; sent++ {
			var err error
			if sent%2 == 0 {
				err = fr.WritePing(false, [8]byte{byte(sent)})
			} else {
				err = fr.WriteSettings()
			}
			if errors.Is(err, os.ErrDeadlineExceeded) {
				break // the proxy stopped reading
			}
			c.Check(err)
		}
		t.Logf("control-frame flood: %d frames written before the proxy stopped reading", sent)
		read = append(read, fmt.Sprintf("%d", sent))
		_ = c.Conn.Close()
	}
	a.saw("the proxy read %s frames before it stopped reading (500000 sent at most)", strings.Join(read, " and "))
}
