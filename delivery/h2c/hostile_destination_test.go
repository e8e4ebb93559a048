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
	"strings"
	"testing"

	"golang.org/x/net/http2"

	"knative.dev/event-forwarding-proxy/delivery/h2c"
)

// TestAnswerFrameSize: a destination's frames may be as large as the
// default SETTINGS_MAX_FRAME_SIZE, which the client never raises, and no
// larger: one byte more, or a frame header that only announces 16 MiB,
// fails the call at once instead of the Framer allocating and waiting for
// what the header announced. The next call gets a working connection.
func TestAnswerFrameSize(t *testing.T) {
	const limit = 16384
	frames := newFrameServer(t, nil, func(fc *frameConn) {
		for {
			r, err := fc.readRequest()
			if err != nil {
				return
			}
			fc.writeHeaders(r.stream, false, ":status", "200")
			switch r.values(":path")[0] {
			case "/limit":
				fc.writeData(r.stream, true, []byte(strings.Repeat("a", limit)))
			case "/over":
				_ = fc.write(func(fr *http2.Framer) error {
					return fr.WriteData(r.stream, true, []byte(strings.Repeat("a", limit+1)))
				})
			case "/announced":
				// A DATA frame header for 16 MiB - 1 and nothing after it.
				_ = fc.write(func(fr *http2.Framer) error {
					_, err := fc.conn.Write([]byte{0xff, 0xff, 0xff, byte(http2.FrameData), 0, 0, 0, 0, byte(r.stream)})
					return err
				})
			}
		}
	})
	tr, _ := newTransport(t, &h2c.Transport{})
	for _, tc := range []struct {
		path    string
		wantErr bool
	}{{"/limit", false}, {"/over", true}, {"/announced", true}, {"/limit", false}} {
		t.Run(tc.path, func(t *testing.T) {
			r := call(t, tr, newRequest(t, newCtx(t), "GET", frames.url+tc.path, nil, 0))
			switch {
			case tc.wantErr && r.Err() == nil:
				t.Errorf("call succeeded with %d bytes, want an error", len(r.Body))
			case !tc.wantErr && (r.Err() != nil || len(r.Body) != limit):
				t.Errorf("call: %d bytes, %v; want %d bytes", len(r.Body), r.Err(), limit)
			}
		})
	}
}

// TestInterimAnswerFlood: a destination that sends 1xx answers without
// end fails the call, and its connection is closed rather than read on;
// the next call gets a fresh connection and its answer.
func TestInterimAnswerFlood(t *testing.T) {
	closed := make(chan struct{})
	frames := newFrameServer(t, nil, func(fc *frameConn) {
		r, err := fc.readRequest()
		if err != nil {
			return
		}
		if fc.index > 1 {
			fc.answer(r.stream, "200", "ok")
			holdStreams(fc)
			return
		}
		for range 10000 { // bounded: the client must give up long before
			if fc.writeHeaders(r.stream, false, ":status", "103") != nil {
				break
			}
		}
		for {
			if _, err := fc.next(); err != nil {
				close(closed)
				return
			}
		}
	})
	tr, _ := newTransport(t, &h2c.Transport{})
	if r := call(t, tr, newRequest(t, newCtx(t), "GET", frames.url+"/", nil, 0)); r.Err() == nil {
		t.Fatalf("the call succeeded (%d), want an error", r.Resp.StatusCode)
	}
	receive(t, closed, "the flooding connection closed by the client")
	if r := get(t, tr, frames.url+"/"); r.Body != "ok" {
		t.Errorf("next call: %q, want ok", r.Body)
	}
}
