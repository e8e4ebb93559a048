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

package h2c_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"knative.dev/event-forwarding-proxy/delivery/h2c"
	"knative.dev/event-forwarding-proxy/test/testproc"
)

// TestPingFromPeerAcked: the destination's PINGs are acknowledged with
// their data, in order, while a call waits.
func TestPingFromPeerAcked(t *testing.T) {
	sent := [][8]byte{{'h', '2', 'c', 'p', 'i', 'n', 'g', '1'}, {0, 1, 2, 3, 4, 5, 6, 7}}
	acks := make(chan [8]byte, len(sent))
	srv := newFrameServer(t, nil, func(fc *frameConn) {
		r, err := fc.readRequest()
		if err != nil {
			return
		}
		for _, d := range sent {
			if err := fc.write(func(fr *http2.Framer) error { return fr.WritePing(false, d) }); err != nil {
				return
			}
		}
		for range sent {
			f, err := fc.next()
			if err != nil {
				return
			}
			if p, ok := f.(*http2.PingFrame); ok && p.IsAck() {
				acks <- p.Data
			}
		}
		fc.answer(r.stream, "200", "ok")
		holdStreams(fc)
	})
	tr, _ := newTransport(t, &h2c.Transport{})
	res := goCall(tr, newRequest(t, newCtx(t), "GET", srv.url, nil, 0))
	for _, want := range sent {
		if got := receive(t, acks, "a PING ack"); got != want {
			t.Errorf("PING ack with %q, want %q", got, want)
		}
	}
	if r := receive(t, res, "the call"); r.Err() != nil || r.Body != "ok" {
		t.Errorf("call: %q, %v; want ok", r.Body, r.Err())
	}
}

// TestUnansweredPingClosesConnection: a connection silent for
// SendPingTimeout is PINGed; unacknowledged for PingTimeout, it is closed
// and the call waiting on it fails.
func TestUnansweredPingClosesConnection(t *testing.T) {
	srv := newFrameServer(t, nil, func(fc *frameConn) {
		fc.noPingAck = true
		holdStreams(fc)
	})
	tr, _ := newTransport(t, &h2c.Transport{SendPingTimeout: 100 * time.Millisecond, PingTimeout: 100 * time.Millisecond})
	r := call(t, tr, newRequest(t, newCtx(t), "GET", srv.url, nil, 0))
	if r.RTErr == nil {
		t.Fatalf("RoundTrip succeeded (status %d), want an error", r.Resp.StatusCode)
	}
	if errors.Is(r.RTErr, context.DeadlineExceeded) {
		t.Errorf("RoundTrip error %v: the call lasted to its context's deadline", r.RTErr)
	}
	if n := srv.pings.Load(); n < 1 {
		t.Errorf("the destination received %d PINGs, want at least 1", n)
	}
	testproc.Eventually(t, waitLimit, "the connection is closed", func() bool { return tr.Conns() == 0 })
}

// TestAnsweredPingsKeepConnection: a destination that acknowledges PINGs
// keeps its connection, and the held call, past many SendPingTimeouts.
func TestAnsweredPingsKeepConnection(t *testing.T) {
	const pings = 5
	srv := newFrameServer(t, nil, func(fc *frameConn) {
		r, err := fc.readRequest()
		if err != nil {
			return
		}
		fc.onPing = func() {
			if fc.srv.pings.Load() == pings {
				fc.answer(r.stream, "200", "ok")
			}
		}
		holdStreams(fc)
	})
	tr, dials := newTransport(t, &h2c.Transport{SendPingTimeout: 100 * time.Millisecond, PingTimeout: 100 * time.Millisecond})
	if r := call(t, tr, newRequest(t, newCtx(t), "GET", srv.url, nil, 0)); r.Err() != nil || r.Body != "ok" {
		t.Errorf("call: %q, %v; want ok after %d PINGs", r.Body, r.Err(), pings)
	}
	if n := dials.Load(); n != 1 {
		t.Errorf("dialed %d times, want 1", n)
	}
}

// TestPushPromiseFailsCall: a PUSH_PROMISE (push is disabled in the
// client's SETTINGS) is a connection error: the call fails, the
// connection is closed, the next call dials anew.
func TestPushPromiseFailsCall(t *testing.T) {
	srv := newFrameServer(t, nil, func(fc *frameConn) {
		if fc.index > 1 {
			echoStreams(fc, nil)
			return
		}
		r, err := fc.readRequest()
		if err != nil {
			return
		}
		fc.wmu.Lock()
		fc.encBuf.Reset()
		for _, f := range []hpack.HeaderField{{Name: ":method", Value: "GET"}, {Name: ":scheme", Value: "http"}, {Name: ":authority", Value: "x"}, {Name: ":path", Value: "/pushed"}} {
			fc.enc.WriteField(f)
		}
		err = fc.fr.WritePushPromise(http2.PushPromiseParam{StreamID: r.stream, PromiseID: 2, BlockFragment: fc.encBuf.Bytes(), EndHeaders: true})
		fc.wmu.Unlock()
		if err != nil {
			return
		}
		fc.answer(r.stream, "200", "ok")
		holdStreams(fc)
	})
	tr, dials := newTransport(t, &h2c.Transport{})
	if r := call(t, tr, newRequest(t, newCtx(t), "GET", srv.url+"/push", nil, 0)); r.Err() == nil {
		t.Errorf("call succeeded (%q), want an error", r.Body)
	}
	testproc.Eventually(t, waitLimit, "the connection is closed", func() bool { return tr.Conns() == 0 })
	if r := get(t, tr, srv.url+"/next"); r.Body != "|/next" {
		t.Errorf("next call: %q, want |/next", r.Body)
	}
	if n := dials.Load(); n != 2 {
		t.Errorf("dialed %d times, want 2", n)
	}
}
