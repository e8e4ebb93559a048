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
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"golang.org/x/net/http2"

	"knative.dev/event-forwarding-proxy/delivery/h2c"
	"knative.dev/event-forwarding-proxy/test/testproc"
)

// pipeBody returns a body of unknown length that a goroutine writes in
// chunks of 1000 bytes.
func pipeBody(t testing.TB, data []byte) io.Reader {
	pr, pw := io.Pipe()
	t.Cleanup(func() { pr.Close() })
	go func() {
		for len(data) > 0 {
			n := min(len(data), 1000)
			if _, err := pw.Write(data[:n]); err != nil {
				return
			}
			data = data[n:]
		}
		pw.Close()
	}()
	return pr
}

// TestRequestBody: bodies of every size and kind arrive byte-exact at Go's
// server, whose windows (64 KiB per stream and connection) make the large
// ones wait for WINDOW_UPDATEs; the body is closed.
func TestRequestBody(t *testing.T) {
	srv := newGoServer(t, echo, &http.HTTP2Config{MaxReceiveBufferPerStream: 65535, MaxReceiveBufferPerConnection: 65535})
	tests := []struct {
		name   string
		size   int
		body   func(t testing.TB, data []byte) io.Reader
		length func(n int) int64
	}{
		{name: "empty", size: 0},
		{name: "small", size: 7},
		{name: "16 KiB", size: 16 << 10},
		{name: "16 KiB + 1", size: 16<<10 + 1},
		{name: "1 MiB", size: 1 << 20},
		{name: "1 MiB of unknown length", size: 1 << 20, length: func(int) int64 { return -1 }},
		{name: "1 MiB of unknown length through a pipe", size: 1 << 20, body: pipeBody, length: func(int) int64 { return -1 }},
		{name: "small of unknown length through a pipe", size: 100, body: pipeBody, length: func(int) int64 { return -1 }},
	}
	tr, dials := newTransport(t, &h2c.Transport{})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			data := pattern(tt.size)
			var r io.Reader = bytes.NewReader(data)
			if tt.body != nil {
				r = tt.body(t, data)
			}
			length := int64(tt.size)
			if tt.length != nil {
				length = tt.length(tt.size)
			}
			body := &closeTracker{Reader: r}
			res := mustCall(t, tr, newRequest(t, newCtx(t), "POST", srv.url, body, length))
			if res.Resp.StatusCode != http.StatusOK {
				t.Fatalf("status %d: %s", res.Resp.StatusCode, res.Body)
			}
			if !bytes.Equal([]byte(res.Body), data) {
				t.Errorf("echoed %d bytes, want the %d sent, byte-exact", len(res.Body), len(data))
			}
			testproc.Eventually(t, waitLimit, "the request body is closed", body.Closed.Load)
		})
	}
	if n := dials.Load(); n != 1 {
		t.Errorf("dialed %d times, want 1", n)
	}
}

// TestRequestBodyFlowControl: a streamed body never exceeds the windows the
// destination grants, on the stream and on the connection, and follows a
// change of SETTINGS_INITIAL_WINDOW_SIZE made while it is sent. The
// destination starts with a stream window of 1000 bytes, raises it to 20000
// by SETTINGS once 8 KiB have come, and grants more only when the window is
// nearly used up.
func TestRequestBodyFlowControl(t *testing.T) {
	type outcome struct {
		body       []byte
		violations []string
		err        error
	}
	got := make(chan outcome, 4)
	srv := newFrameServer(t, []http2.Setting{{ID: http2.SettingInitialWindowSize, Val: 1000}}, func(fc *frameConn) {
		var o outcome
		sent := false
		defer func() {
			if !sent {
				got <- o
			}
		}()
		// SETTINGS_INITIAL_WINDOW_SIZE: acknowledged, sent since, sent last.
		acked, pending, last := int64(65535), []int64{1000}, int64(1000)
		fc.onSettingsAck = func() {
			if len(pending) == 0 {
				o.err = fmt.Errorf("SETTINGS acknowledged twice")
				return
			}
			acked, pending = pending[0], pending[1:]
		}
		maxInit := func() int64 { // the largest initial window the client may be using
			m := acked
			for _, v := range pending {
				m = max(m, v)
			}
			return m
		}
		f, err := fc.next()
		if err != nil {
			o.err = err
			return
		}
		hf, ok := f.(*http2.MetaHeadersFrame)
		if !ok || hf.StreamEnded() {
			o.err = fmt.Errorf("got %v, want HEADERS of a request with a body", f)
			return
		}
		stream := hf.StreamID
		var streamGranted, connGranted, received int64
		raised := false
		for {
			f, err := fc.next()
			if err != nil {
				o.err = err
				return
			}
			df, ok := f.(*http2.DataFrame)
			if !ok || df.StreamID != stream {
				o.err = fmt.Errorf("got %v, want DATA on stream %d", f, stream)
				return
			}
			received += int64(df.Length)
			o.body = append(o.body, df.Data()...)
			if limit := maxInit() + streamGranted; received > limit {
				o.violations = append(o.violations, fmt.Sprintf("stream: %d bytes received, at most %d allowed", received, limit))
			}
			if limit := 65535 + connGranted; received > limit {
				o.violations = append(o.violations, fmt.Sprintf("connection: %d bytes received, at most %d allowed", received, limit))
			}
			if df.StreamEnded() {
				got <- o
				sent = true
				fc.answer(stream, "200", "ok")
				holdStreams(fc)
				return
			}
			err = fc.write(func(fr *http2.Framer) error {
				if received >= 8<<10 && !raised {
					raised = true
					pending, last = append(pending, 20000), 20000
					if err := fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 20000}); err != nil {
						return err
					}
				}
				if last+streamGranted-received < 4096 {
					streamGranted += 16384
					if err := fr.WriteWindowUpdate(stream, 16384); err != nil {
						return err
					}
				}
				if 65535+connGranted-received < 16384 {
					connGranted += 65536
					return fr.WriteWindowUpdate(0, 65536)
				}
				return nil
			})
			if err != nil {
				o.err = err
				return
			}
		}
	})
	tests := []struct {
		name   string
		length int64
	}{
		{name: "declared length", length: 200 << 10},
		{name: "unknown length", length: -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr, _ := newTransport(t, &h2c.Transport{})
			data := pattern(200 << 10)
			res := goCall(tr, newRequest(t, newCtx(t), "POST", srv.url, bytes.NewReader(data), tt.length))
			o := receive(t, got, "the destination to read the body")
			if o.err != nil {
				t.Errorf("the destination: %v", o.err)
			}
			for _, v := range o.violations {
				t.Errorf("flow control violated: %s", v)
			}
			if !bytes.Equal(o.body, data) {
				t.Errorf("the destination got %d bytes, want the %d sent, byte-exact", len(o.body), len(data))
			}
			if r := receive(t, res, "the call to end"); r.Err() != nil || r.Body != "ok" {
				t.Errorf("call: %q, %v; want ok", r.Body, r.Err())
			}
		})
	}
}

// trailerBody is a request body that fills the request's trailers when it
// reaches EOF, on the goroutine that reads it.
type trailerBody struct {
	io.Reader
	fill func()
}

func (b *trailerBody) Read(p []byte) (int, error) {
	n, err := b.Reader.Read(p)
	if err == io.EOF && b.fill != nil {
		b.fill()
		b.fill = nil
	}
	return n, err
}

// TestRequestTrailers: req.Trailer, filled when the body reaches EOF, is
// sent in a trailing HEADERS frame that ends the stream.
func TestRequestTrailers(t *testing.T) {
	srv, got := newCaptureServer(t)
	tests := []struct {
		name   string
		size   int
		length func(n int) int64
	}{
		{name: "small", size: 7, length: func(n int) int64 { return int64(n) }},
		{name: "100 KiB", size: 100 << 10, length: func(n int) int64 { return int64(n) }},
		{name: "unknown length", size: 5000, length: func(int) int64 { return -1 }},
	}
	tr, _ := newTransport(t, &h2c.Transport{})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			data := pattern(tt.size)
			req := newRequest(t, newCtx(t), "POST", srv.url, nil, tt.length(tt.size))
			req.Trailer = http.Header{"X-Checksum": nil, "X-Count": nil}
			req.Body = io.NopCloser(&trailerBody{Reader: bytes.NewReader(data), fill: func() {
				req.Trailer.Set("X-Checksum", "c0ffee")
				req.Trailer.Set("X-Count", fmt.Sprint(len(data)))
			}})
			r := sendCaptured(t, tr, got, req)
			if !r.ended || r.reset {
				t.Errorf("stream ended %t, reset %t; want ended", r.ended, r.reset)
			}
			if !bytes.Equal(r.body, data) {
				t.Errorf("body of %d bytes, want the %d sent, byte-exact", len(r.body), len(data))
			}
			gotTrailer := map[string]string{}
			for _, f := range r.trailer {
				gotTrailer[f.Name] += f.Value
			}
			want := map[string]string{"x-checksum": "c0ffee", "x-count": fmt.Sprint(len(data))}
			if fmt.Sprint(gotTrailer) != fmt.Sprint(want) {
				t.Errorf("trailer %v, want %v", gotTrailer, want)
			}
		})
	}
}

// failingReader yields data, then err.
type failingReader struct {
	data []byte
	err  error
}

func (r *failingReader) Read(p []byte) (int, error) {
	if len(r.data) == 0 {
		return 0, r.err
	}
	n := copy(p, r.data)
	r.data = r.data[n:]
	return n, nil
}

// TestRequestBodyFailures: a body shorter than its declared length, or one
// whose Read fails, fails the call; a stream already open is reset (never
// ended as if the body were complete); the body is closed; the connection
// serves the next call.
func TestRequestBodyFailures(t *testing.T) {
	tests := []struct {
		name     string
		body     io.Reader
		length   int64
		streamed bool // the HEADERS went out before the failure: the stream must be reset
	}{
		{name: "short, small", body: strings.NewReader("abc"), length: 10},
		{name: "short, 100 KiB declared", body: bytes.NewReader(pattern(50 << 10)), length: 100 << 10, streamed: true},
		{name: "read error, small", body: &failingReader{[]byte("ab"), errBoom}, length: 100},
		{name: "read error, 100 KiB declared", body: &failingReader{pattern(20 << 10), errBoom}, length: 100 << 10, streamed: true},
		{name: "read error, unknown length", body: &failingReader{pattern(20 << 10), errBoom}, length: -1, streamed: true},
		{name: "read error at once, unknown length", body: &failingReader{nil, errBoom}, length: -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv, got := newCaptureServer(t)
			tr, _ := newTransport(t, &h2c.Transport{})
			body := &closeTracker{Reader: tt.body}
			r := call(t, tr, newRequest(t, newCtx(t), "POST", srv.url+"/failing", body, tt.length))
			if r.Err() == nil {
				t.Errorf("the call succeeded (status %d), want an error", r.Resp.StatusCode)
			}
			testproc.Eventually(t, waitLimit, "the request body is closed", body.Closed.Load)
			if tt.streamed {
				c := receive(t, got, "the failing request at the server")
				if c.err != nil || !c.req.reset || c.req.ended {
					t.Errorf("the server read: err %v, reset %t, ended %t; want the stream reset", c.err, c.req != nil && c.req.reset, c.req != nil && c.req.ended)
				}
			}
			after := mustCall(t, tr, newRequest(t, newCtx(t), "GET", srv.url+"/after", nil, 0))
			if after.Body != "ok" {
				t.Errorf("the next call got %q, want ok", after.Body)
			}
			for {
				c := receive(t, got, "the next request at the server")
				if c.err != nil {
					t.Fatalf("the server: %v", c.err)
				}
				if p := c.req.values(":path"); len(p) == 1 && p[0] == "/after" {
					break
				}
				if !c.req.reset || c.req.ended {
					t.Errorf("the failing request reached the server with END_STREAM (reset %t, %d body bytes)", c.req.reset, len(c.req.body))
				}
			}
		})
	}
}

// TestRequestBodyFailsAfterAnswer: when the answer came before the body
// failed, reading the answer's body fails, and the stream is reset.
func TestRequestBodyFailsAfterAnswer(t *testing.T) {
	tests := []struct {
		name   string
		length int64
		end    func(pw *io.PipeWriter)
	}{
		{name: "read error", length: -1, end: func(pw *io.PipeWriter) { pw.CloseWithError(errBoom) }},
		{name: "short", length: 100 << 10, end: func(pw *io.PipeWriter) { pw.Close() }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resets := make(chan http2.ErrCode, 1)
			srv := newFrameServer(t, nil, func(fc *frameConn) {
				f, err := fc.next()
				if err != nil {
					return
				}
				stream := f.Header().StreamID
				fc.writeHeaders(stream, false, ":status", "200")
				fc.writeData(stream, false, []byte("partial"))
				for {
					f, err := fc.next()
					if err != nil {
						return
					}
					if rst, ok := f.(*http2.RSTStreamFrame); ok && rst.StreamID == stream {
						resets <- rst.ErrCode
					}
				}
			})
			tr, _ := newTransport(t, &h2c.Transport{})
			pr, pw := io.Pipe()
			t.Cleanup(func() { pw.Close() })
			go pw.Write([]byte("first bytes"))
			body := &closeTracker{Reader: pr}
			resp, err := tr.RoundTrip(newRequest(t, newCtx(t), "POST", srv.url, body, tt.length))
			if err != nil {
				t.Fatalf("RoundTrip: %v; want the answer that came before the body ended", err)
			}
			defer resp.Body.Close()
			tt.end(pw)
			done := make(chan error, 1)
			go func() {
				_, err := io.ReadAll(resp.Body)
				done <- err
			}()
			if err := receive(t, done, "reading the answer's body to end"); err == nil {
				t.Errorf("reading the answer's body succeeded, want an error")
			}
			receive(t, resets, "RST_STREAM at the destination")
			testproc.Eventually(t, waitLimit, "the request body is closed", body.Closed.Load)
		})
	}
}
