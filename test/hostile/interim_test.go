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
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"knative.dev/event-forwarding-proxy/test/testproc"
)

// The interim-answer flood: a destination of the test's own that answers
// every request with 103 Early Hints without end.
const (
	// interimCalls: the synchronous calls sent to it through the proxy,
	// one after the other.
	interimCalls = 10
	// interimRound: interim answers on each open stream, then a PING.
	interimRound = 8
	// interimMaxWritten bounds the interim answers a flood connection
	// may have been sent before the proxy closes it: the proxy gives up
	// a call past 16 (delivery/h2c), and the destination writes a round
	// of 8 at a time and waits for the PING after it.
	interimMaxWritten = 64
	// interimCap bounds one connection's flood against a proxy that
	// reads it without end.
	interimCap = 1_000_000
	// interimCloseWait is how long the proxy has, after the last call,
	// to have closed every flood connection.
	interimCloseWait = 2 * time.Second
)

// floodDest is the destination: an h2c server on a raw socket. On each
// connection it writes interimRound 103 answers on every stream the proxy
// opened, then a PING, and waits for the ack: the ack shows the proxy
// read the round, so what it was sent is what it read, give or take a
// round. A connection's flood ends when the proxy closes it, past
// interimCap answers, or when the attack stops it.
type floodDest struct {
	ln       net.Listener
	url      string
	stop     chan struct{}
	stopOnce sync.Once
	wg       sync.WaitGroup

	mu    sync.Mutex
	conns []*floodConn // those the proxy sent a request on
}

// floodConn is what one connection saw; its fields are final once done
// is closed.
type floodConn struct {
	done     chan struct{}
	streams  int            // requests the proxy sent on it
	written  int            // interim answers written
	read     int            // of them, those the proxy acked with a PING
	goAway   *http2.ErrCode // the proxy's GOAWAY
	closed   bool           // by the proxy: its end of the connection came
	stalled  bool           // a PING went unanswered for 5 s
	writeErr error
}

func newFloodDest(t testing.TB) *floodDest {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	d := &floodDest{ln: ln, url: "http://" + ln.Addr().String() + "/flood", stop: make(chan struct{})}
	d.wg.Go(func() {
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			d.wg.Go(func() { d.serve(nc) })
		}
	})
	t.Cleanup(d.close)
	return d
}

// close stops every flood, closes the connections and waits for them.
func (d *floodDest) close() {
	d.stopOnce.Do(func() {
		close(d.stop)
		_ = d.ln.Close()
	})
	d.wg.Wait()
}

// interimBlock is the header block of a 103: literal fields never
// indexed, so that the same bytes are valid on every frame.
func interimBlock() []byte {
	var b bytes.Buffer
	enc := hpack.NewEncoder(&b)
	_ = enc.WriteField(hpack.HeaderField{Name: ":status", Value: "103", Sensitive: true})
	_ = enc.WriteField(hpack.HeaderField{Name: "link", Value: "</style.css>; rel=preload; as=style", Sensitive: true})
	return b.Bytes()
}

func (d *floodDest) serve(nc net.Conn) {
	defer nc.Close()
	// Every read and write of the connection ends within a minute, and
	// the attack's end closes it.
	_ = nc.SetDeadline(time.Now().Add(time.Minute))
	stopped := make(chan struct{})
	defer close(stopped)
	go func() {
		select {
		case <-d.stop:
			_ = nc.Close()
		case <-stopped:
		}
	}()
	preface := make([]byte, len(http2.ClientPreface))
	if _, err := io.ReadFull(nc, preface); err != nil || string(preface) != http2.ClientPreface {
		return
	}
	fr := http2.NewFramer(nc, nc)
	var wmu sync.Mutex
	write := func(f func() error) error {
		wmu.Lock()
		defer wmu.Unlock()
		return f()
	}
	if write(func() error { return fr.WriteSettings() }) != nil {
		return
	}
	fc := &floodConn{done: make(chan struct{})}
	defer close(fc.done)
	streams := make(chan uint32, 1024)
	acks := make(chan uint64, 16)
	ended := make(chan struct{}) // the read side ended
	var readErr error
	var goAway *http2.ErrCode
	go func() {
		defer close(ended)
		for {
			f, err := fr.ReadFrame()
			if err != nil {
				readErr = err
				return
			}
			switch f := f.(type) {
			case *http2.SettingsFrame:
				if !f.IsAck() {
					_ = write(func() error { return fr.WriteSettingsAck() })
				}
			case *http2.HeadersFrame:
				select {
				case streams <- f.StreamID:
				default:
				}
			case *http2.PingFrame:
				if f.IsAck() {
					select {
					case acks <- binary.BigEndian.Uint64(f.Data[:]):
					default:
					}
				} else {
					data := f.Data
					_ = write(func() error { return fr.WritePing(true, data) })
				}
			case *http2.GoAwayFrame:
				code := f.ErrCode
				goAway = &code
			}
		}
	}()
	var open []uint32
	select {
	case id := <-streams:
		open = append(open, id)
	case <-ended: // a connection without a request (2ee84c4's h2c probe)
		return
	case <-d.stop:
		return
	case <-time.After(10 * time.Second):
		return
	}
	d.mu.Lock()
	d.conns = append(d.conns, fc)
	d.mu.Unlock()
	block := interimBlock()
	proxyGone := false
flood:
	for round := uint64(1); fc.written < interimCap; round++ {
		for more := true; more; {
			select {
			case id := <-streams:
				open = append(open, id)
			default:
				more = false
			}
		}
		err := write(func() error {
			for range interimRound {
				for _, id := range open {
					if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: block, EndHeaders: true}); err != nil {
						return err
					}
				}
			}
			var data [8]byte
			binary.BigEndian.PutUint64(data[:], round)
			return fr.WritePing(false, data)
		})
		if err != nil {
			fc.writeErr = err
			break
		}
		fc.written += interimRound * len(open)
		for acked := false; !acked; {
			select {
			case r := <-acks:
				acked = r == round
			case <-ended:
				proxyGone = true
				break flood
			case <-d.stop:
				break flood
			case <-time.After(5 * time.Second):
				fc.stalled = true
				break flood
			}
		}
		fc.read = fc.written
	}
	if !proxyGone && fc.writeErr != nil {
		// A write failed: the proxy's end is gone, or going.
		select {
		case <-ended:
			proxyGone = true
		case <-time.After(5 * time.Second):
		}
	}
	if !proxyGone {
		// Past the cap, or stopped: hold the connection as it is until
		// the attack ends, and see whether the proxy closes it.
		select {
		case <-ended:
			proxyGone = true
		case <-d.stop:
		}
	}
	fc.streams = len(open)
	for more := true; more; {
		select {
		case <-streams:
			fc.streams++
		default:
			more = false
		}
	}
	if proxyGone {
		// EOF or a reset: the proxy closed it. Not our own close on
		// d.stop, nor the connection's deadline.
		fc.closed = readErr != nil && !errors.Is(readErr, net.ErrClosed) && !errors.Is(readErr, os.ErrDeadlineExceeded)
		fc.goAway = goAway
	}
}

// interimFlood: interimCalls synchronous calls to the flooding
// destination through the proxy, which must speak h2c to it
// (FORWARD_H2C_HOSTS; 2ee84c4 learnt it by probing, and the destination
// answers the probe's preface with SETTINGS). Each call gets 502, and
// the proxy closes the connection having read at most a few rounds of
// interim answers; the next call gets a fresh connection.
func interimFlood(t testing.TB, a *arena) {
	d := newFloodDest(t)
	client := testproc.H2CClient(t, 20*time.Second)
	defer client.CloseIdleConnections()
	var answers tally
	got502 := 0
	for range interimCalls {
		req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, a.proc.URL, strings.NewReader(`{"flood":true}`))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Kn-Forward-To", d.url)
		req.Header.Set("Kn-Forward-Timeout", "PT10S")
		resp, err := client.Do(req)
		if err != nil {
			answers.add("no answer: " + err.Error())
			continue
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode == http.StatusBadGateway {
			got502++
		}
		answers.add(strings.TrimSpace(fmt.Sprintf("%d %s", resp.StatusCode, resp.Header.Get("Kn-Forward-Error"))))
	}
	// The proxy has had every call's answer: its flood connections must
	// be closed by now, or a moment after.
	closedAll := func() bool {
		d.mu.Lock()
		defer d.mu.Unlock()
		for _, fc := range d.conns {
			select {
			case <-fc.done:
			default:
				return false
			}
		}
		return true
	}
	testproc.Poll(interimCloseWait, closedAll)
	d.close()

	var ends tally
	maxWritten, maxRead, flooded, overBound := 0, 0, 0, 0
	for _, fc := range d.conns {
		flooded++
		what := "still open"
		switch {
		case fc.closed && fc.goAway != nil:
			what = "GOAWAY " + fc.goAway.String() + ", closed"
		case fc.closed:
			what = "closed without GOAWAY"
		case fc.stalled:
			what = "still open, PINGs unanswered"
		}
		ends.add(what)
		maxWritten, maxRead = max(maxWritten, fc.written), max(maxRead, fc.read)
		if !fc.closed || fc.written > interimMaxWritten {
			overBound++
		}
	}
	a.saw("%d calls: %s; flood connections with a request: %d, %s; at most %d interim answers written and %d read on one",
		interimCalls, &answers, flooded, &ends, maxWritten, maxRead)
	if got502 != interimCalls {
		t.Errorf("of %d calls to a destination flooding interim answers: %s; want every one 502", interimCalls, &answers)
	}
	if flooded == 0 {
		t.Errorf("no call reached the flooding destination over h2c")
	}
	if overBound > 0 {
		t.Errorf("%d of %d flood connections were not closed by the proxy after at most %d interim answers (%s; up to %d written, %d read on one)",
			overBound, flooded, interimMaxWritten, &ends, maxWritten, maxRead)
	}
}
