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
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"knative.dev/event-forwarding-proxy/delivery/h2c"
	"knative.dev/event-forwarding-proxy/test/testproc"
)

// answerFrames encodes frames as a destination would write them after its
// SETTINGS, for the fuzz seeds.
func answerFrames(write func(fr *http2.Framer, enc func(kv ...string) []byte)) []byte {
	var buf, hbuf bytes.Buffer
	fr := http2.NewFramer(&buf, nil)
	fr.AllowIllegalWrites = true
	henc := hpack.NewEncoder(&hbuf)
	write(fr, func(kv ...string) []byte {
		hbuf.Reset()
		for i := 0; i+1 < len(kv); i += 2 {
			_ = henc.WriteField(hpack.HeaderField{Name: kv[i], Value: kv[i+1]})
		}
		return append([]byte(nil), hbuf.Bytes()...)
	})
	return buf.Bytes()
}

// FuzzAnswerFrames: whatever frames a destination answers with, a call
// ends, in an answer whose body ends or in an error, and never panics or
// hangs; the connection goes when the destination closes it.
func FuzzAnswerFrames(f *testing.F) {
	ok := func(fr *http2.Framer, enc func(kv ...string) []byte) {
		_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: enc(":status", "200", "content-length", "2"), EndHeaders: true})
		_ = fr.WriteData(1, true, []byte("ok"))
	}
	for _, seed := range [][]byte{
		answerFrames(ok),
		answerFrames(func(fr *http2.Framer, enc func(kv ...string) []byte) {
			_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: enc(":status", "103", "link", "</a>"), EndHeaders: true})
			_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: enc(":status", "204"), EndHeaders: true, EndStream: true})
		}),
		answerFrames(func(fr *http2.Framer, enc func(kv ...string) []byte) {
			block := enc(":status", "200", "trailer", "x-t", "x-long", string(bytes.Repeat([]byte("v"), 300)))
			_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: block[:10]})
			_ = fr.WriteContinuation(1, true, block[10:])
			_ = fr.WriteDataPadded(1, false, []byte("body"), make([]byte, 7))
			_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: enc("x-t", "1"), EndHeaders: true, EndStream: true})
		}),
		answerFrames(func(fr *http2.Framer, enc func(kv ...string) []byte) {
			_ = fr.WritePing(false, [8]byte{1})
			_ = fr.WriteWindowUpdate(0, 1<<20)
			_ = fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 1 << 30}, http2.Setting{ID: http2.SettingHeaderTableSize, Val: 0})
			ok(fr, enc)
		}),
		answerFrames(func(fr *http2.Framer, enc func(kv ...string) []byte) {
			_ = fr.WriteRSTStream(1, http2.ErrCodeRefusedStream)
		}),
		answerFrames(func(fr *http2.Framer, enc func(kv ...string) []byte) {
			_ = fr.WriteGoAway(0, http2.ErrCodeNo, []byte("bye"))
		}),
		answerFrames(func(fr *http2.Framer, enc func(kv ...string) []byte) {
			_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: enc(":status", "200", "content-length", "1"), EndHeaders: true})
			_ = fr.WriteData(1, true, []byte("too long"))
			_ = fr.WriteData(3, false, []byte("unopened"))
		}),
		answerFrames(func(fr *http2.Framer, enc func(kv ...string) []byte) {
			_ = fr.WritePushPromise(http2.PushPromiseParam{StreamID: 1, PromiseID: 2, BlockFragment: enc(":method", "GET"), EndHeaders: true})
		}),
		{0, 0, 4, 8, 0, 0, 0, 0, 0, 0, 0, 0, 0}, // a WINDOW_UPDATE of 0
		{},
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, frames []byte) {
		tr := &h2c.Transport{
			MaxResponseHeaderBytes: 4 << 10,
			Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
				client, server := net.Pipe()
				go func() {
					go func() { _, _ = io.Copy(io.Discard, server) }()
					fr := http2.NewFramer(server, nil)
					if fr.WriteSettings() == nil {
						_, _ = server.Write(frames)
					}
					_ = server.Close()
				}()
				return client, nil
			},
		}
		defer tr.CloseIdleConnections()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://fuzz.test/", bytes.NewReader([]byte("event")))
		if err != nil {
			t.Fatal(err)
		}
		resp, err := tr.RoundTrip(req)
		if ctx.Err() != nil {
			t.Fatalf("the call hung until its deadline: %v", err)
		}
		if err == nil {
			if resp.StatusCode < 200 || resp.StatusCode > 999 {
				t.Fatalf("status %d handed on", resp.StatusCode)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			if ctx.Err() != nil {
				t.Fatal("reading the answer's body hung until the call's deadline")
			}
			_ = resp.Body.Close()
		}
		testproc.Eventually(t, 5*time.Second, "the connection the destination closed goes", func() bool { return tr.Conns() == 0 })
	})
}
