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
	"bufio"
	"bytes"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"knative.dev/event-forwarding-proxy/delivery"
	"knative.dev/event-forwarding-proxy/proxy/proxytest"
)

// rawDestination is a loopback TCP destination that reads each request
// and answers it with answer, byte for byte; then it closes the
// connection, or, with hold, keeps it open until the proxy closes it and
// says so on closed.
type rawDestination struct {
	url    string
	closed chan struct{} // one value per connection the proxy closed (hold)
}

func newRawDestination(t *testing.T, answer string, hold bool) *rawDestination {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	d := &rawDestination{url: "http://" + ln.Addr().String() + "/", closed: make(chan struct{}, 16)}
	done := make(chan struct{})
	t.Cleanup(func() { close(done); _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				cut := time.AfterFunc(10*time.Second, func() { _ = c.Close() }) // a broken test holds it no longer
				defer cut.Stop()
				br := bufio.NewReader(c)
				req, err := http.ReadRequest(br)
				if err != nil {
					return
				}
				_, _ = io.Copy(io.Discard, req.Body)
				_, _ = io.WriteString(c, answer)
				if !hold {
					return
				}
				_, _ = io.Copy(io.Discard, br) // until the proxy closes its side
				select {
				case <-done:
				case d.closed <- struct{}{}:
				}
			}()
		}
	}()
	return d
}

// h1Answer is what a raw HTTP/1.1 caller read of an answer.
type h1Answer struct {
	resp    *http.Response
	body    string
	bodyErr error  // reading the body: nil when it ended as its framing says
	wire    string // every byte read
	closed  bool   // the proxy closed the connection after a broken answer
}

// rawH1Call POSTs an event with id ceID to dest through the proxy at
// proxyURL over a connection of its own, and reads the answer as it comes.
func rawH1Call(t *testing.T, proxyURL, dest, ceID string) h1Answer {
	t.Helper()
	c, err := net.DialTimeout("tcp", strings.TrimPrefix(proxyURL, "http://"), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	_, err = io.WriteString(c, "POST / HTTP/1.1\r\nHost: proxy.test\r\n"+delivery.HeaderForwardTo+": "+dest+"\r\n"+
		"Ce-Id: "+ceID+"\r\nContent-Length: 1\r\n\r\ne")
	if err != nil {
		t.Fatal(err)
	}
	var wire bytes.Buffer
	br := bufio.NewReader(io.TeeReader(c, &wire))
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("no answer: %v (read %q)", err, wire.String())
	}
	body, berr := io.ReadAll(resp.Body)
	a := h1Answer{resp: resp, body: string(body), bodyErr: berr}
	if berr != nil {
		// A broken answer: the connection must be closed, not kept.
		_, err := br.ReadByte()
		a.closed = err == io.EOF
	}
	a.wire = wire.String()
	return a
}

// h2Answer is what a raw h2c caller read of the answer on its stream.
type h2Answer struct {
	status    string
	data      string
	endStream bool           // the stream ended cleanly (END_STREAM)
	reset     *http2.ErrCode // the stream was reset, with this code
	header    http.Header
}

// rawH2Call POSTs an event with id ceID to dest through the proxy at
// proxyURL over an h2c connection of its own, and reads the frames of its
// stream until it ends or is reset.
func rawH2Call(t *testing.T, proxyURL, dest, ceID string) h2Answer {
	t.Helper()
	c, err := net.DialTimeout("tcp", strings.TrimPrefix(proxyURL, "http://"), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, http2.ClientPreface); err != nil {
		t.Fatal(err)
	}
	fr := http2.NewFramer(c, c)
	fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	for _, f := range [][2]string{{":method", "POST"}, {":scheme", "http"}, {":path", "/"}, {":authority", "proxy.test"},
		{strings.ToLower(delivery.HeaderForwardTo), dest}, {"ce-id", ceID}, {"content-length", "1"}} {
		_ = enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
	}
	check := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	check(fr.WriteSettings())
	check(fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: hb.Bytes(), EndHeaders: true}))
	check(fr.WriteData(1, true, []byte("e")))
	a := h2Answer{header: http.Header{}}
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			t.Fatalf("the stream neither ended nor was reset: %v (so far %+v)", err, a)
		}
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				check(fr.WriteSettingsAck())
			}
		case *http2.MetaHeadersFrame:
			for _, hf := range f.Fields {
				if hf.Name == ":status" {
					a.status = hf.Value
				} else {
					a.header.Add(hf.Name, hf.Value)
				}
			}
			if f.StreamEnded() {
				a.endStream = true
				return a
			}
		case *http2.DataFrame:
			a.data += string(f.Data())
			if f.StreamEnded() {
				a.endStream = true
				return a
			}
		case *http2.RSTStreamFrame:
			code := f.ErrCode
			a.reset = &code
			return a
		case *http2.GoAwayFrame:
			t.Fatalf("GOAWAY %v (so far %+v)", f.ErrCode, a)
		}
	}
}

// TestAnswerBrokenOff: a destination sends its answer's head and closes
// the connection before the body its framing promised. With no byte of
// the body come, nothing of the answer was forwarded: the caller gets 502
// unreachable. With part of the body forwarded, the caller sees the answer
// broken, never complete: over HTTP/1.1 fewer bytes than its
// Content-Length, or chunks without the last, and the connection closed;
// over h2c the stream reset with an error code, not ended with
// END_STREAM. The break is logged with the event's id.
func TestAnswerBrokenOff(t *testing.T) {
	const part = "0123456789"
	tests := []struct {
		name   string
		answer string
		h2c    bool   // the destination is an h2c one, which resets the stream (the answer is then ignored)
		sent   string // the part of the body sent; "" for none
		length int    // the declared length, or -1 for chunked
	}{
		{name: "head alone, Content-Length", answer: "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n", length: 100},
		{name: "head alone, chunked", answer: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n", length: -1},
		{name: "part of the body, Content-Length", answer: "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n" + part, sent: part, length: 100},
		{name: "part of the body, chunked", answer: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\na\r\n" + part + "\r\n", sent: part, length: -1},
		// An h2c destination that resets its stream: the h2c client drops
		// what the stream still buffers, so whether a part of the body
		// gets through first is a race; with none sent, none does.
		{name: "h2c destination, head alone", h2c: true, length: 100},
	}
	for _, tt := range tests {
		for _, caller := range []string{"http1", "h2c"} {
			t.Run(tt.name+"/"+caller, func(t *testing.T) {
				var dest string
				if tt.h2c {
					dest = proxytest.NewH2CDestinationAt(t, "127.0.0.2", func(w http.ResponseWriter, _ *http.Request, _ int) {
						w.Header().Set("Content-Length", strconv.Itoa(tt.length))
						_, _ = io.WriteString(w, tt.sent)
						http.NewResponseController(w).Flush()
						panic(http.ErrAbortHandler) // a reset stream
					}).URL + "/"
				} else {
					dest = newRawDestination(t, tt.answer, false).url
				}
				core, logs := observer.New(zap.DebugLevel)
				tp := newTestProxyLogger(t, map[string]string{"FORWARD_H2C_HOSTS": "127.0.0.2", "FORWARD_BREAKER_FAILURES": "0"}, zap.New(core).Sugar())
				const id = "broken-1"
				if caller == "http1" {
					a := rawH1Call(t, tp.URL, dest, id)
					switch {
					case tt.sent == "":
						wantProxyError(t, a.resp, []byte(a.body), ReasonUnreachable)
					case a.resp.StatusCode != http.StatusOK:
						t.Errorf("status %d, want the destination's 200 (wire %q)", a.resp.StatusCode, a.wire)
					case a.bodyErr == nil:
						t.Errorf("the caller read a complete answer %q (wire %q)", a.body, a.wire)
					case a.body != tt.sent:
						t.Errorf("the caller read %q of the body, want %q", a.body, tt.sent)
					case !a.closed:
						t.Error("the connection stayed open after the broken answer")
					case tt.length >= 0 && a.resp.ContentLength != int64(tt.length):
						t.Errorf("Content-Length %d, want the destination's %d", a.resp.ContentLength, tt.length)
					case tt.length < 0 && strings.HasSuffix(a.wire, "0\r\n\r\n"):
						t.Errorf("the chunked answer ended with its last chunk: %q", a.wire)
					}
				} else {
					a := rawH2Call(t, tp.URL, dest, id)
					switch {
					case tt.sent == "" && (a.status != "502" || a.header.Get(delivery.HeaderForwardError) != string(ReasonUnreachable) || !a.endStream):
						t.Errorf("got %+v, want the proxy's 502 %s, ended cleanly", a, ReasonUnreachable)
					case tt.sent == "":
					case a.status != "200" || a.data != tt.sent:
						t.Errorf("got status %s and %q, want 200 and %q", a.status, a.data, tt.sent)
					case a.endStream || a.reset == nil || *a.reset == http2.ErrCodeNo:
						t.Errorf("the stream ended with END_STREAM %t, reset %v; want a reset with an error code", a.endStream, a.reset)
					}
				}
				if tt.sent != "" {
					proxytest.Eventually(t, 5*time.Second, func() bool {
						return logs.FilterMessage("Answer broke off").FilterField(zap.String("ceId", id)).Len() == 1
					}, "no log line of the broken answer with the event's id")
				}
				proxytest.Eventually(t, 5*time.Second, func() bool { return tp.Limiter.Inflight() == 0 }, "the slot was not released")
			})
		}
	}
}

// TestAnswerWithSpaceBeforeColon: a destination whose answer has
// whitespace before a header field's colon ("Content-Length : 5") and
// keeps its connection open: the caller gets 502 unreachable at once, not
// an answer framed by the connection's close that waits for it, and the
// proxy closes that connection.
func TestAnswerWithSpaceBeforeColon(t *testing.T) {
	for _, caller := range []string{"http1", "h2c"} {
		t.Run(caller, func(t *testing.T) {
			dest := newRawDestination(t, "HTTP/1.1 200 OK\r\nContent-Length : 5\r\n\r\nhello", true)
			tp := newTestProxy(t, nil)
			if caller == "http1" {
				a := rawH1Call(t, tp.URL, dest.url, "spaced-1")
				wantProxyError(t, a.resp, []byte(a.body), ReasonUnreachable)
			} else {
				a := rawH2Call(t, tp.URL, dest.url, "spaced-1")
				if a.status != "502" || a.header.Get(delivery.HeaderForwardError) != string(ReasonUnreachable) || !a.endStream {
					t.Errorf("got %+v, want the proxy's 502 %s", a, ReasonUnreachable)
				}
			}
			select {
			case <-dest.closed:
			case <-time.After(5 * time.Second):
				t.Fatal("the destination's connection was not closed")
			}
		})
	}
}
