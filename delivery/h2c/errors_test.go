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
	"io"
	"strings"
	"testing"

	"golang.org/x/net/http2"

	"knative.dev/event-forwarding-proxy/delivery/h2c"
	"knative.dev/event-forwarding-proxy/test/testproc"
)

// echoStreams is a frame handler that answers every request with its
// body, once the body has come, on any number of streams at once; when
// before returns true for a stream's HEADERS, that stream is left to it
// (before wrote what it wanted) and the frames of the stream are ignored.
func echoStreams(fc *frameConn, before func(fc *frameConn, hf *http2.MetaHeadersFrame) bool) {
	bodies := map[uint32][]byte{}
	taken := map[uint32]bool{}
	for {
		f, err := fc.next()
		if err != nil {
			return
		}
		id := f.Header().StreamID
		switch f := f.(type) {
		case *http2.MetaHeadersFrame:
			if taken[id] {
				continue
			}
			if _, open := bodies[id]; !open && before != nil && before(fc, f) {
				taken[id] = true
				continue
			}
			if f.StreamEnded() {
				err = fc.answer(id, "200", string(bodies[id])+"|"+fieldValues(f.Fields, ":path")[0])
				delete(bodies, id)
				break
			}
			bodies[id] = []byte{}
		case *http2.DataFrame:
			if taken[id] {
				continue
			}
			bodies[id] = append(bodies[id], f.Data()...)
			if f.StreamEnded() {
				err = fc.answer(id, "200", string(bodies[id]))
				delete(bodies, id)
			}
		}
		if err != nil {
			return
		}
	}
}

// TestRefusedStreamRetried: a stream the destination refuses
// (REFUSED_STREAM) before answering is retried when its body can be sent
// again (none, or one of at most 16 KiB of declared length), and fails
// otherwise.
func TestRefusedStreamRetried(t *testing.T) {
	tests := []struct {
		name        string
		body        io.Reader
		length      int64
		wantBody    string // "": the call fails
		wantStreams int64
	}{
		{name: "no body", wantBody: "|/", wantStreams: 2},
		{name: "small body", body: strings.NewReader("payload"), length: 7, wantBody: "payload", wantStreams: 2},
		{name: "body of unknown length", body: strings.NewReader("streamed"), length: -1, wantStreams: 1},
		{name: "body of 20 KiB", body: strings.NewReader(strings.Repeat("b", 20<<10)), length: 20 << 10, wantStreams: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newFrameServer(t, nil, func(fc *frameConn) {
				echoStreams(fc, func(fc *frameConn, hf *http2.MetaHeadersFrame) bool {
					if fc.srv.streams.Load() != 1 {
						return false
					}
					fc.writeRST(hf.StreamID, http2.ErrCodeRefusedStream)
					return true
				})
			})
			tr, _ := newTransport(t, &h2c.Transport{})
			r := call(t, tr, newRequest(t, newCtx(t), "POST", srv.url+"/", tt.body, tt.length))
			if tt.wantBody == "" && r.Err() == nil {
				t.Errorf("the call succeeded (%q), want an error: its body cannot be sent again", r.Body)
			}
			if tt.wantBody != "" && (r.Err() != nil || r.Body != tt.wantBody) {
				t.Errorf("call: %q, %v; want %q", r.Body, r.Err(), tt.wantBody)
			}
			if n := srv.streams.Load(); n != tt.wantStreams {
				t.Errorf("the destination saw %d streams, want %d", n, tt.wantStreams)
			}
		})
	}
}

// TestResetBeforeAnswer: RST_STREAM with another code than REFUSED_STREAM,
// before the answer, fails the call (no retry); the transport serves the
// next call.
func TestResetBeforeAnswer(t *testing.T) {
	for _, code := range []http2.ErrCode{http2.ErrCodeInternal, http2.ErrCodeCancel, http2.ErrCodeProtocol} {
		t.Run(code.String(), func(t *testing.T) {
			srv := newFrameServer(t, nil, func(fc *frameConn) {
				echoStreams(fc, func(fc *frameConn, hf *http2.MetaHeadersFrame) bool {
					if fieldValues(hf.Fields, ":path")[0] != "/reset" {
						return false
					}
					fc.writeRST(hf.StreamID, code)
					return true
				})
			})
			tr, _ := newTransport(t, &h2c.Transport{})
			if r := call(t, tr, newRequest(t, newCtx(t), "GET", srv.url+"/reset", nil, 0)); r.RTErr == nil {
				t.Errorf("RoundTrip succeeded (status %d), want an error", r.Resp.StatusCode)
			}
			if n := srv.streams.Load(); n != 1 {
				t.Errorf("the destination saw %d streams, want 1 (no retry)", n)
			}
			if r := get(t, tr, srv.url+"/ok"); r.Body != "|/ok" {
				t.Errorf("next call: %q, want |/ok", r.Body)
			}
		})
	}
}

// TestGoAwayRetried: a GOAWAY whose last stream id is below the call's
// makes the call go to a new connection when its body can be sent again;
// else the call fails.
func TestGoAwayRetried(t *testing.T) {
	tests := []struct {
		name     string
		body     io.Reader
		length   int64
		wantBody string // "": the call fails
		wantConn int64
	}{
		{name: "no body", wantBody: "|/", wantConn: 2},
		{name: "small body", body: strings.NewReader("payload"), length: 7, wantBody: "payload", wantConn: 2},
		{name: "body of unknown length", body: strings.NewReader("streamed"), length: -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newFrameServer(t, nil, func(fc *frameConn) {
				if fc.index > 1 {
					echoStreams(fc, nil)
					return
				}
				echoStreams(fc, func(fc *frameConn, hf *http2.MetaHeadersFrame) bool {
					fc.write(func(fr *http2.Framer) error { return fr.WriteGoAway(0, http2.ErrCodeNo, nil) })
					return true
				})
			})
			tr, dials := newTransport(t, &h2c.Transport{})
			r := call(t, tr, newRequest(t, newCtx(t), "POST", srv.url+"/", tt.body, tt.length))
			if tt.wantBody == "" {
				if r.Err() == nil {
					t.Errorf("the call succeeded (%q), want an error: its body cannot be sent again", r.Body)
				}
				return
			}
			if r.Err() != nil || r.Body != tt.wantBody {
				t.Errorf("call: %q, %v; want %q", r.Body, r.Err(), tt.wantBody)
			}
			if n, d := srv.accepted.Load(), dials.Load(); n != tt.wantConn || d != tt.wantConn {
				t.Errorf("the server accepted %d connections, the transport dialed %d; want %d", n, d, tt.wantConn)
			}
		})
	}
}

// TestGoAwayLetsLowerStreamsFinish: after a GOAWAY, the calls on streams up
// to its last id get their answers on the old connection; a call above it
// is retried on a new one, and new calls go there too.
func TestGoAwayLetsLowerStreamsFinish(t *testing.T) {
	srv := newFrameServer(t, nil, func(fc *frameConn) {
		if fc.index > 1 {
			echoStreams(fc, nil)
			return
		}
		var held []uint32
		echoStreams(fc, func(fc *frameConn, hf *http2.MetaHeadersFrame) bool {
			held = append(held, hf.StreamID)
			if len(held) == 2 {
				fc.write(func(fr *http2.Framer) error { return fr.WriteGoAway(held[0], http2.ErrCodeNo, nil) })
				fc.answer(held[0], "200", "first, on the old connection")
			}
			return true
		})
	})
	tr, dials := newTransport(t, &h2c.Transport{})
	first := goCall(tr, newRequest(t, newCtx(t), "GET", srv.url+"/first", nil, 0))
	testproc.Eventually(t, waitLimit, "the first call reaches the destination", func() bool { return srv.streams.Load() == 1 })
	second := goCall(tr, newRequest(t, newCtx(t), "GET", srv.url+"/second", nil, 0))
	if r := receive(t, first, "the first call"); r.Err() != nil || r.Body != "first, on the old connection" {
		t.Errorf("first call: %q, %v; want the answer on the old connection", r.Body, r.Err())
	}
	if r := receive(t, second, "the second call"); r.Err() != nil || r.Body != "|/second" {
		t.Errorf("second call: %q, %v; want |/second from the new connection", r.Body, r.Err())
	}
	if r := get(t, tr, srv.url+"/third"); r.Body != "|/third" {
		t.Errorf("third call: %q, want |/third", r.Body)
	}
	if n, d := srv.accepted.Load(), dials.Load(); n != 2 || d != 2 {
		t.Errorf("the server accepted %d connections, the transport dialed %d; want 2", n, d)
	}
}

// TestConnectionBroken: a connection closed abruptly with calls pending
// fails them all (none hangs); it is not reused, the next call dials anew.
func TestConnectionBroken(t *testing.T) {
	const pending = 5
	srv := newFrameServer(t, nil, func(fc *frameConn) {
		if fc.index > 1 {
			echoStreams(fc, nil)
			return
		}
		echoStreams(fc, func(fc *frameConn, hf *http2.MetaHeadersFrame) bool {
			if fc.srv.streams.Load() == pending {
				fc.conn.Close() // the handler's next read fails: it returns
			}
			return true
		})
	})
	tr, dials := newTransport(t, &h2c.Transport{})
	var results []<-chan result
	for i := range pending {
		results = append(results, goCall(tr, newRequest(t, newCtx(t), "GET", srv.url+"/pending", nil, 0)))
		if i == 0 { // the connection is up: the others go on it
			testproc.Eventually(t, waitLimit, "the first call reaches the destination", func() bool { return srv.streams.Load() == 1 })
		}
	}
	for i, ch := range results {
		if r := receive(t, ch, "a pending call to end"); r.Err() == nil {
			t.Errorf("call %d succeeded (%q), want an error", i, r.Body)
		}
	}
	testproc.Eventually(t, waitLimit, "the broken connection is gone", func() bool { return tr.Conns() == 0 })
	if r := get(t, tr, srv.url+"/next"); r.Body != "|/next" {
		t.Errorf("next call: %q, want |/next", r.Body)
	}
	if n, d := srv.accepted.Load(), dials.Load(); n != 2 || d != 2 {
		t.Errorf("the server accepted %d connections, the transport dialed %d; want 2", n, d)
	}
}
