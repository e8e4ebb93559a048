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
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"knative.dev/event-forwarding-proxy/delivery/h2c"
	"knative.dev/event-forwarding-proxy/test/testproc"
)

// TestResponseLargeBody: an 8 MiB answer, far beyond the windows, arrives
// byte-exact, with and without a content-length.
func TestResponseLargeBody(t *testing.T) {
	data := pattern(8 << 20)
	srv := newGoServer(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/length" {
			w.Header().Set("Content-Length", strconv.Itoa(len(data)))
		}
		for p := data; len(p) > 0; {
			n := min(len(p), 32<<10)
			if _, err := w.Write(p[:n]); err != nil {
				return
			}
			p = p[n:]
		}
	}, nil)
	tests := []struct {
		path   string
		length int64
	}{
		{"/length", 8 << 20},
		{"/no-length", -1},
	}
	tr, _ := newTransport(t, &h2c.Transport{})
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			r := get(t, tr, srv.url+tt.path)
			if !bytes.Equal([]byte(r.Body), data) {
				t.Errorf("body of %d bytes, want the %d sent, byte-exact", len(r.Body), len(data))
			}
			if r.Resp.ContentLength != tt.length {
				t.Errorf("ContentLength %d, want %d", r.Resp.ContentLength, tt.length)
			}
		})
	}
}

// TestResponseBodyFlowControl: a caller that does not read its answer stops
// the destination after the stream window; reading refunds the window and
// the whole body comes.
func TestResponseBodyFlowControl(t *testing.T) {
	const window, size = 64 << 10, 1 << 20
	data := pattern(size)
	var written atomic.Int64
	srv := newGoServer(t, func(w http.ResponseWriter, r *http.Request) {
		for p := data; len(p) > 0; p = p[1024:] {
			if _, err := w.Write(p[:1024]); err != nil {
				return
			}
			w.(http.Flusher).Flush()
			written.Add(1024)
		}
	}, nil)
	tr, _ := newTransport(t, &h2c.Transport{MaxReceiveBufferPerStream: window})
	resp, err := tr.RoundTrip(newRequest(t, newCtx(t), "GET", srv.url, nil, 0))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	testproc.Eventually(t, waitLimit, "the destination writes half the window", func() bool { return written.Load() >= window/2 })
	// Go's server has at most one 1 KiB write in flight past the window,
	// plus its 4 KiB buffer.
	const most = window + 16<<10
	testproc.Consistently(t, 300*time.Millisecond, fmt.Sprintf("the destination stopped within %d bytes", most), func() bool {
		return written.Load() <= most
	})
	done := make(chan []byte, 1)
	go func() {
		b, _ := io.ReadAll(resp.Body)
		done <- b
	}()
	if b := receive(t, done, "the body read to its end"); !bytes.Equal(b, data) {
		t.Errorf("body of %d bytes, want the %d sent, byte-exact", len(b), len(data))
	}
}

// TestResponseTrailers: keys the answer declares in its Trailer header are
// in resp.Trailer (nil values) when RoundTrip returns; at EOF they hold
// their values, and undeclared trailers are added.
func TestResponseTrailers(t *testing.T) {
	goSrv := newGoServer(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/undeclared" {
			w.Header().Set("Trailer", "X-Sum, X-Count")
		}
		io.WriteString(w, "body")
		w.(http.Flusher).Flush()
		if r.URL.Path != "/undeclared" {
			w.Header().Set("X-Sum", "abc")
			w.Header().Set("X-Count", "4")
		}
		if r.URL.Path != "/declared" {
			w.Header().Set(http.TrailerPrefix+"X-Late", "late")
		}
	}, nil)
	frames := newFrameServer(t, nil, func(fc *frameConn) {
		for {
			r, err := fc.readRequest()
			if err != nil {
				return
			}
			fc.writeHeaders(r.stream, false, ":status", "200", "trailer", "x-status")
			if r.values(":path")[0] == "/body" {
				fc.writeData(r.stream, false, []byte("body"))
			}
			fc.writeHeaders(r.stream, true, "x-status", "0", "x-extra", "e")
		}
	})
	tests := []struct {
		name, url     string
		before, after http.Header
		wantBody      string
	}{
		{name: "declared", url: goSrv.url + "/declared", wantBody: "body",
			before: http.Header{"X-Sum": nil, "X-Count": nil},
			after:  http.Header{"X-Sum": {"abc"}, "X-Count": {"4"}}},
		{name: "undeclared", url: goSrv.url + "/undeclared", wantBody: "body",
			before: http.Header{},
			after:  http.Header{"X-Late": {"late"}}},
		{name: "both", url: goSrv.url + "/both", wantBody: "body",
			before: http.Header{"X-Sum": nil, "X-Count": nil},
			after:  http.Header{"X-Sum": {"abc"}, "X-Count": {"4"}, "X-Late": {"late"}}},
		{name: "frames, after DATA", url: frames.url + "/body", wantBody: "body",
			before: http.Header{"X-Status": nil},
			after:  http.Header{"X-Status": {"0"}, "X-Extra": {"e"}}},
		{name: "frames, no DATA", url: frames.url + "/nobody",
			before: http.Header{"X-Status": nil},
			after:  http.Header{"X-Status": {"0"}, "X-Extra": {"e"}}},
	}
	tr, _ := newTransport(t, &h2c.Transport{})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, err := tr.RoundTrip(newRequest(t, newCtx(t), "GET", tt.url, nil, 0))
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			if diff := cmp.Diff(tt.before, resp.Trailer, emptyHeaderIsNil); diff != "" {
				t.Errorf("Trailer before the body is read (-want +got):\n%s", diff)
			}
			b, err := io.ReadAll(resp.Body)
			if err != nil || string(b) != tt.wantBody {
				t.Fatalf("body %q, %v; want %q", b, err, tt.wantBody)
			}
			if diff := cmp.Diff(tt.after, resp.Trailer, emptyHeaderIsNil); diff != "" {
				t.Errorf("Trailer at EOF (-want +got):\n%s", diff)
			}
		})
	}
}

// TestResponseTrailersAfterCallerLooked: trailers that arrive while the
// caller looks at resp.Trailer (between RoundTrip and Body.Read, which
// net/http allows) are filled in by the Read that reaches EOF, on the
// caller's goroutine: no data race, as -race checks.
func TestResponseTrailersAfterCallerLooked(t *testing.T) {
	proceed, written := make(chan struct{}), make(chan struct{})
	srv := newFrameServer(t, nil, func(fc *frameConn) {
		r, err := fc.readRequest()
		if err != nil {
			return
		}
		fc.writeHeaders(r.stream, false, ":status", "200", "trailer", "x-status")
		fc.writeData(r.stream, false, []byte("body"))
		select {
		case <-proceed:
		case <-fc.srv.done:
			return
		}
		fc.writeHeaders(r.stream, true, "x-status", "0")
		close(written)
		holdStreams(fc)
	})
	tr, _ := newTransport(t, &h2c.Transport{})
	resp, err := tr.RoundTrip(newRequest(t, newCtx(t), "GET", srv.url, nil, 0))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if diff := cmp.Diff(http.Header{"X-Status": nil}, resp.Trailer); diff != "" {
		t.Errorf("Trailer before the body is read (-want +got):\n%s", diff)
	}
	close(proceed)
	receive(t, written, "the trailers sent")
	// The body not read to EOF yet, the values stay out of the caller's map.
	testproc.Consistently(t, 300*time.Millisecond, "the trailers left unset until the body is read", func() bool {
		v, ok := resp.Trailer["X-Status"]
		return ok && v == nil && len(resp.Trailer) == 1
	})
	b, err := io.ReadAll(resp.Body)
	if err != nil || string(b) != "body" {
		t.Fatalf("body %q, %v; want body", b, err)
	}
	if diff := cmp.Diff(http.Header{"X-Status": {"0"}}, resp.Trailer); diff != "" {
		t.Errorf("Trailer at EOF (-want +got):\n%s", diff)
	}
}

// emptyHeaderIsNil makes an empty header and a nil one equal.
var emptyHeaderIsNil = cmp.FilterValues(func(a, b http.Header) bool { return len(a) == 0 && len(b) == 0 }, cmp.Ignore())

// TestResponseContentLengthMismatch: a body longer or shorter than its
// content-length fails the Read that finds out.
func TestResponseContentLengthMismatch(t *testing.T) {
	srv := newFrameServer(t, nil, func(fc *frameConn) {
		for {
			r, err := fc.readRequest()
			if err != nil {
				return
			}
			switch r.values(":path")[0] {
			case "/longer":
				fc.writeHeaders(r.stream, false, ":status", "200", "content-length", "5")
				fc.writeData(r.stream, true, []byte("0123456789"))
			case "/longer-later":
				fc.writeHeaders(r.stream, false, ":status", "200", "content-length", "5")
				fc.writeData(r.stream, false, []byte("01234"))
				fc.writeData(r.stream, true, []byte("5"))
			case "/shorter":
				fc.writeHeaders(r.stream, false, ":status", "200", "content-length", "10")
				fc.writeData(r.stream, true, []byte("01234"))
			case "/exact":
				fc.writeHeaders(r.stream, false, ":status", "200", "content-length", "5")
				fc.writeData(r.stream, true, []byte("01234"))
			}
		}
	})
	tests := []struct {
		path    string
		wantErr bool
	}{
		{"/longer", true},
		{"/longer-later", true},
		{"/shorter", true},
		{"/exact", false},
	}
	tr, _ := newTransport(t, &h2c.Transport{})
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			r := call(t, tr, newRequest(t, newCtx(t), "GET", srv.url+tt.path, nil, 0))
			if r.RTErr != nil {
				t.Fatalf("RoundTrip: %v; want the answer, and an error from Read", r.RTErr)
			}
			if (r.ReadErr != nil) != tt.wantErr {
				t.Errorf("reading the body: %v (read %q); want an error: %t", r.ReadErr, r.Body, tt.wantErr)
			}
			if r.ReadErr != nil && errors.Is(r.ReadErr, io.EOF) {
				t.Errorf("Read error %v, want one other than io.EOF", r.ReadErr)
			}
		})
	}
}

// TestResponseStatus: a missing :status, or one not of 3 digits, fails the
// call; any 3-digit one is the answer's status.
func TestResponseStatus(t *testing.T) {
	srv := newFrameServer(t, nil, func(fc *frameConn) {
		for {
			r, err := fc.readRequest()
			if err != nil {
				return
			}
			status, given := strings.CutPrefix(r.values(":path")[0], "/status/")
			if !given {
				fc.writeHeaders(r.stream, true, "x-no-status", "1")
				continue
			}
			fc.writeHeaders(r.stream, true, ":status", status)
		}
	})
	tests := []struct {
		name, path string
		want       int // 0: an error
	}{
		{"missing", "/", 0},
		{"empty", "/status/", 0},
		{"two digits", "/status/20", 0},
		{"four digits", "/status/2000", 0},
		{"not a number", "/status/abc", 0},
		{"a letter", "/status/2x0", 0},
		{"signed", "/status/+20", 0},
		{"299", "/status/299", 299},
		{"404", "/status/404", 404},
		{"503", "/status/503", 503},
	}
	tr, _ := newTransport(t, &h2c.Transport{})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := call(t, tr, newRequest(t, newCtx(t), "GET", srv.url+tt.path, nil, 0))
			switch {
			case tt.want == 0 && r.RTErr == nil:
				t.Errorf("RoundTrip succeeded with status %d, want an error", r.Resp.StatusCode)
			case tt.want != 0 && r.Err() != nil:
				t.Errorf("call: %v, want status %d", r.Err(), tt.want)
			case tt.want != 0 && r.Resp.StatusCode != tt.want:
				t.Errorf("status %d, want %d", r.Resp.StatusCode, tt.want)
			}
		})
	}
}

// TestResponseHeaderTooLarge: an answer's header list over
// MaxResponseHeaderBytes fails the call with an error wrapping
// ErrResponseHeaderTooLarge (one far over it with some error), one within it
// does not; the transport serves the next call.
func TestResponseHeaderTooLarge(t *testing.T) {
	const limit = 4096
	// fields returns n fields of 1039 bytes each as hpack counts them.
	fields := func(n int) []string {
		kv := []string{":status", "200"} // 42 bytes
		for i := range n {
			kv = append(kv, fmt.Sprintf("x-big-%d", i), strings.Repeat(string(rune('a'+i%26)), 1000))
		}
		return kv
	}
	frames := newFrameServer(t, nil, func(fc *frameConn) {
		for {
			r, err := fc.readRequest()
			if err != nil {
				return
			}
			n, _ := strconv.Atoi(strings.TrimPrefix(r.values(":path")[0], "/"))
			fc.writeHeaders(r.stream, true, fields(n)...)
		}
	})
	goSrv := newGoServer(t, func(w http.ResponseWriter, r *http.Request) {
		n, _ := strconv.Atoi(strings.TrimPrefix(r.URL.Path, "/"))
		for i := range n {
			w.Header().Set(fmt.Sprintf("X-Big-%d", i), strings.Repeat("g", 1000))
		}
	}, nil)
	tests := []struct {
		name, url string
		want      error // nil: success; errAny: any error
	}{
		{"within, 3159 bytes", frames.url + "/3", nil},
		{"over, 5237 bytes", frames.url + "/5", h2c.ErrResponseHeaderTooLarge},
		{"over, Go's server", goSrv.url + "/5", h2c.ErrResponseHeaderTooLarge},
		{"within, Go's server", goSrv.url + "/3", nil},
		{"far over, in one 20 KiB block", frames.url + "/20", errAny},
	}
	tr, _ := newTransport(t, &h2c.Transport{MaxResponseHeaderBytes: limit})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := call(t, tr, newRequest(t, newCtx(t), "GET", tt.url, nil, 0))
			switch {
			case tt.want == nil && r.Err() != nil:
				t.Errorf("call: %v, want success", r.Err())
			case errors.Is(tt.want, errAny) && r.RTErr == nil:
				t.Errorf("RoundTrip succeeded, want an error")
			case tt.want != nil && !errors.Is(tt.want, errAny) && !errors.Is(r.RTErr, tt.want):
				t.Errorf("RoundTrip error %v, want one wrapping %v", r.RTErr, tt.want)
			}
			if after := call(t, tr, newRequest(t, newCtx(t), "GET", frames.url+"/0", nil, 0)); after.Err() != nil {
				t.Errorf("the next call: %v", after.Err())
			}
		})
	}
}

// errAny stands for any error in tables.
var errAny = errors.New("any error")

// TestMalformedResponseHeaders: an answer whose header block breaks RFC
// 9113 8.2 or 8.3 fails its call with the stream reset, and the
// connection serves the next call (its HPACK state stayed in step).
func TestMalformedResponseHeaders(t *testing.T) {
	blocks := map[string][]string{ // by the path that asks for it
		"upper-case-name":       {":status", "200", "X-Upper", "v"},
		"name-not-a-token":      {":status", "200", "x a", "v"},
		"value-with-a-newline":  {":status", "200", "x-a", "b\nc"},
		"pseudo-after-regular":  {"x-a", "b", ":status", "200"},
		"request-pseudo-header": {":status", "200", ":path", "/"},
		"duplicate-status":      {":status", "200", ":status", "204"},
	}
	frames := newFrameServer(t, nil, func(fc *frameConn) {
		for {
			r, err := fc.readRequest()
			if err != nil {
				return
			}
			kv, bad := blocks[strings.TrimPrefix(r.values(":path")[0], "/")]
			if !bad {
				kv = []string{":status", "200", "x-after", "ok"}
			}
			if fc.writeHeaders(r.stream, true, kv...) != nil {
				return
			}
		}
	})
	tr, _ := newTransport(t, &h2c.Transport{})
	for name := range blocks {
		t.Run(name, func(t *testing.T) {
			if r := call(t, tr, newRequest(t, newCtx(t), "GET", frames.url+"/"+name, nil, 0)); r.RTErr == nil {
				t.Errorf("RoundTrip answered %d, want an error", r.Resp.StatusCode)
			}
			after := call(t, tr, newRequest(t, newCtx(t), "GET", frames.url+"/next", nil, 0))
			if after.Err() != nil || after.Resp.Header.Get("X-After") != "ok" {
				t.Errorf("the next call: %v", after.Err())
			}
		})
	}
}
