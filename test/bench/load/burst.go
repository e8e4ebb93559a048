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

package load

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"sync"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// burstConns are the h2c connections a burst arrives on, as from a few
// adapter replicas; each carries at most burstConnBytes of bodies, within
// any peer's initial connection window, so no flow control is waited for.
const (
	burstConns     = 8
	burstConnBytes = 60000
)

// burstBody is each burst event's body, as small as a PingSource's.
var burstBody = []byte(`{"message":"Hello world!"}`)

// maxBurstEvents is the largest burst the connections carry.
var maxBurstEvents = burstConns * (burstConnBytes / len(burstBody))

// burstClient is the client side of one burst connection: its requests
// are encoded into frames before the burst, so that sending them is one
// write, and the answers are read frame by frame, each timed on arrival.
type burstClient struct {
	conn net.Conn
	wmu  sync.Mutex // guards writes to conn: the burst, and acks
	fr   *http2.Framer
	// frames are the burst's requests, encoded in order.
	frames []byte
	n      int
	// answers get each stream's status and arrival time.
	answers chan burstAnswer
}

type burstAnswer struct {
	status int
	at     time.Time
}

// dialBurst opens an h2c connection to addr with prior knowledge and
// exchanges SETTINGS, then encodes n POSTs to path, each naming dest in
// Kn-Forward-To with Prefer: respond-async when async (seq numbers the
// events from first).
func dialBurst(ctx context.Context, addr, path, dest string, n, first int, async bool) (*burstClient, error) {
	d := net.Dialer{Timeout: 5 * time.Second}
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	c := &burstClient{conn: conn, n: n, answers: make(chan burstAnswer, n)}
	c.fr = http2.NewFramer(conn, bufio.NewReaderSize(conn, 64<<10))
	c.fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	if _, err := conn.Write([]byte(http2.ClientPreface)); err != nil {
		conn.Close()
		return nil, err
	}
	if err := c.fr.WriteSettings(http2.Setting{ID: http2.SettingEnablePush, Val: 0}); err != nil {
		conn.Close()
		return nil, err
	}
	c.frames, err = encodeBurst(addr, path, dest, n, first, async)
	if err != nil {
		conn.Close()
		return nil, err
	}
	return c, nil
}

// encodeBurst encodes n requests as HEADERS and DATA frames, streams 1,
// 3, 5 and so on, with one HPACK encoder, as a client would send them.
func encodeBurst(authority, path, dest string, n, first int, async bool) ([]byte, error) {
	var out, block bytes.Buffer
	enc := hpack.NewEncoder(&block)
	fr := http2.NewFramer(&out, nil)
	if _, err := url.Parse(dest); err != nil {
		return nil, err
	}
	length := strconv.Itoa(len(burstBody))
	for i := range n {
		block.Reset()
		fields := []hpack.HeaderField{
			{Name: ":method", Value: "POST"}, {Name: ":scheme", Value: "http"},
			{Name: ":authority", Value: authority}, {Name: ":path", Value: path},
			{Name: "content-type", Value: "application/json"}, {Name: "content-length", Value: length},
			{Name: "ce-specversion", Value: "1.0"}, {Name: "ce-id", Value: strconv.Itoa(first + i)},
			{Name: "ce-source", Value: "/apis/v1/namespaces/bench/pingsources/burst"},
			{Name: "ce-type", Value: "dev.knative.sources.ping"},
		}
		if dest != "" {
			fields = append(fields, hpack.HeaderField{Name: "kn-forward-to", Value: dest})
		}
		if async {
			fields = append(fields, hpack.HeaderField{Name: "prefer", Value: "respond-async"})
		}
		for _, f := range fields {
			if err := enc.WriteField(f); err != nil {
				return nil, err
			}
		}
		id := uint32(2*i + 1)
		if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: block.Bytes(), EndHeaders: true}); err != nil {
			return nil, err
		}
		if err := fr.WriteData(id, true, burstBody); err != nil {
			return nil, err
		}
	}
	return out.Bytes(), nil
}

// read reads frames until every stream is answered or the connection
// ends, acking the peer's SETTINGS and PINGs; it reports each answer's
// status (0 for a stream reset) and arrival time.
func (c *burstClient) read() error {
	answered := 0
	for answered < c.n {
		f, err := c.fr.ReadFrame()
		if err != nil {
			return err
		}
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				if err := c.write(func() error { return c.fr.WriteSettingsAck() }); err != nil {
					return err
				}
			}
		case *http2.PingFrame:
			if !f.IsAck() {
				if err := c.write(func() error { return c.fr.WritePing(true, f.Data) }); err != nil {
					return err
				}
			}
		case *http2.MetaHeadersFrame:
			status, err := strconv.Atoi(f.PseudoValue("status"))
			if err != nil || status < 200 {
				continue // an interim answer, or none: the final one follows
			}
			c.answers <- burstAnswer{status: status, at: time.Now()}
			answered++
		case *http2.RSTStreamFrame:
			c.answers <- burstAnswer{at: time.Now()}
			answered++
		case *http2.GoAwayFrame:
			return fmt.Errorf("GOAWAY %v", f.ErrCode)
		}
	}
	return nil
}

func (c *burstClient) write(f func() error) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	return f()
}

// send writes the whole burst at once.
func (c *burstClient) send() error {
	return c.write(func() error {
		_, err := c.conn.Write(c.frames)
		return err
	})
}

// burst sends n events split over burstConns connections to addr at the
// same instant and returns each one's time from that instant to its
// answer's headers, and how many were not answered with want.
func burst(ctx context.Context, addr, path, dest string, n int, async bool, want int, timeout time.Duration) ([]time.Duration, int, error) {
	switch {
	case n <= 0:
		return nil, 0, fmt.Errorf("a burst of %d events: want at least one", n)
	case n > maxBurstEvents:
		return nil, 0, fmt.Errorf("a burst of %d is too large for %d connections", n, burstConns)
	}
	per := (n + burstConns - 1) / burstConns
	var cs []*burstClient
	defer func() {
		for _, c := range cs {
			c.conn.Close()
		}
	}()
	for i := 0; i < n; i += per {
		c, err := dialBurst(ctx, addr, path, dest, min(per, n-i), i, async)
		if err != nil {
			return nil, 0, err
		}
		cs = append(cs, c)
	}
	readErrs := make(chan error, len(cs))
	for _, c := range cs {
		_ = c.conn.SetDeadline(time.Now().Add(timeout))
		go func() { readErrs <- c.read() }()
	}
	// Let the SETTINGS exchange end before the burst, so that it is not
	// part of what the burst measures.
	time.Sleep(100 * time.Millisecond)
	start := time.Now()
	var wg sync.WaitGroup
	sendErrs := make(chan error, len(cs))
	for _, c := range cs {
		wg.Go(func() { sendErrs <- c.send() })
	}
	wg.Wait()
	close(sendErrs)
	var err error
	for e := range sendErrs {
		err = errors.Join(err, e)
	}
	for range cs {
		err = errors.Join(err, <-readErrs)
	}
	var lat []time.Duration
	for _, c := range cs {
		close(c.answers)
		for a := range c.answers {
			if a.status == want {
				lat = append(lat, a.at.Sub(start))
			}
		}
	}
	return lat, n - len(lat), err
}
