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

package h2server_test

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"net/textproto"
	"strconv"
	"strings"
	"sync"
	"testing"

	"knative.dev/event-forwarding-proxy/test/testproc"
)

// echo answers with the request's method, path, query, a header and its
// body.
func echo(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	w.Header().Set("X-Method", r.Method)
	w.Header().Set("X-Path", r.URL.Path)
	w.Header().Set("X-Query", r.URL.RawQuery)
	w.Header().Set("X-Proto", r.Proto)
	w.Header().Set("X-Echo", r.Header.Get("X-Echo"))
	w.Header().Set("X-Host", r.Host)
	w.Header().Set("Content-Type", r.Header.Get("Content-Type"))
	w.Header().Set("X-Length", strconv.FormatInt(r.ContentLength, 10))
	_, _ = w.Write(body)
}

func TestGetEchoesRequest(t *testing.T) {
	f := startServer(t, nil, http.HandlerFunc(echo))
	req, _ := http.NewRequest(http.MethodGet, f.url+"/some/path?a=1&b=2", nil)
	req.Header.Set("X-Echo", "hello")
	resp, err := f.client(t).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.ProtoMajor != 2 {
		t.Errorf("answer over %s, want HTTP/2", resp.Proto)
	}
	want := map[string]string{
		"X-Method": "GET", "X-Path": "/some/path", "X-Query": "a=1&b=2", "X-Proto": "HTTP/2.0",
		"X-Echo": "hello", "X-Host": f.addr, "X-Length": "0",
	}
	for k, v := range want {
		if got := resp.Header.Get(k); got != v {
			t.Errorf("%s: %q, want %q", k, got, v)
		}
	}
	if resp.Header.Get("Date") == "" {
		t.Error("no Date header")
	}
	if len(body) != 0 {
		t.Errorf("body %q, want none", body)
	}
}

func TestPostEchoesBody(t *testing.T) {
	f := startServer(t, nil, http.HandlerFunc(echo))
	c := f.oneConnClient(t)
	for _, body := range []string{"x", "hello, world", strings.Repeat("abc", 10000)} {
		resp, err := c.Post(f.url+"/post", "text/plain", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != body || resp.StatusCode != http.StatusOK {
			t.Errorf("POST of %d bytes: %d, %d bytes back", len(body), resp.StatusCode, len(got))
		}
		if ct := resp.Header.Get("Content-Type"); ct != "text/plain" {
			t.Errorf("Content-Type %q", ct)
		}
		if n := resp.Header.Get("X-Length"); n != strconv.Itoa(len(body)) {
			t.Errorf("the handler saw ContentLength %s, want %d", n, len(body))
		}
	}
}

// TestLargeBodies moves several MB each way, well past the 64 KiB windows a
// connection starts with and the server's own (256 KiB and 4 MiB), so the
// transfer depends on WINDOW_UPDATEs both ways.
func TestLargeBodies(t *testing.T) {
	const size = 6 << 20
	payload := pattern(size)
	sum := sha256.Sum256(payload)
	mux := http.NewServeMux()
	mux.HandleFunc("/upload", func(w http.ResponseWriter, r *http.Request) {
		h := sha256.New()
		n, err := io.Copy(h, r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		fmt.Fprintf(w, "%d %x", n, h.Sum(nil))
	})
	mux.HandleFunc("/download", func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write(payload)
	})
	mux.HandleFunc("/echo", func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(w, r.Body) // full duplex: the answer streams while the body comes
	})
	f := startServer(t, nil, mux)
	c := f.client(t)

	resp, err := c.Post(f.url+"/upload", "application/octet-stream", bytes.NewReader(payload))
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if want := fmt.Sprintf("%d %x", size, sum); string(got) != want {
		t.Errorf("upload: server saw %q, want %q", got, want)
	}

	resp, err = c.Get(f.url + "/download")
	if err != nil {
		t.Fatal(err)
	}
	got, err = io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || sha256.Sum256(got) != sum {
		t.Errorf("download: %d bytes, err %v; want the %d bytes sent", len(got), err, size)
	}

	resp, err = c.Post(f.url+"/echo", "application/octet-stream", bytes.NewReader(payload))
	if err != nil {
		t.Fatal(err)
	}
	got, err = io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || sha256.Sum256(got) != sum {
		t.Errorf("echo: %d bytes, err %v; want the %d bytes sent", len(got), err, size)
	}
}

func TestConcurrentStreamsShareOneConnection(t *testing.T) {
	f := startServer(t, nil, http.HandlerFunc(echo))
	c := f.oneConnClient(t)
	resp, err := c.Get(f.url + "/warm")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	const n = 80
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			body := strings.Repeat(strconv.Itoa(i), 1+i*1000)
			resp, err := c.Post(fmt.Sprintf("%s/s%d", f.url, i), "text/plain", strings.NewReader(body))
			if err != nil {
				errs <- err
				return
			}
			defer resp.Body.Close()
			got, err := io.ReadAll(resp.Body)
			switch {
			case err != nil:
				errs <- err
			case string(got) != body || resp.Header.Get("X-Path") != fmt.Sprintf("/s%d", i):
				errs <- fmt.Errorf("request %d: got %d bytes for path %q", i, len(got), resp.Header.Get("X-Path"))
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestResponseTrailers(t *testing.T) {
	f := startServer(t, nil, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Trailer", "X-Declared, X-Other")
		w.WriteHeader(http.StatusOK)
		_, _ = io.WriteString(w, "body")
		w.Header().Set("X-Declared", "declared-value")
		w.Header().Set(http.TrailerPrefix+"X-Prefixed", "prefixed-value")
	}))
	resp, err := f.client(t).Get(f.url)
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || string(body) != "body" {
		t.Fatalf("body %q, %v", body, err)
	}
	if got := resp.Trailer.Get("X-Declared"); got != "declared-value" {
		t.Errorf("declared trailer %q", got)
	}
	if got := resp.Trailer.Get("X-Prefixed"); got != "prefixed-value" {
		t.Errorf("prefixed trailer %q", got)
	}
	if v := resp.Trailer.Get("X-Other"); v != "" {
		t.Errorf("X-Other was never set but came as %q", v)
	}
	if resp.Header.Get(http.TrailerPrefix+"X-Prefixed") != "" || resp.Header.Get("X-Prefixed") != "" {
		t.Error("a prefixed trailer went out in the header")
	}
}

// TestTrailersWithoutBody: trailers and no body still make HEADERS, then
// HEADERS with END_STREAM.
func TestTrailersWithoutBody(t *testing.T) {
	f := startServer(t, nil, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set(http.TrailerPrefix+"Grpc-Status", "0")
	}))
	resp, err := f.client(t).Get(f.url)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if got := resp.Trailer.Get("Grpc-Status"); got != "0" {
		t.Errorf("trailer %q, want 0", got)
	}
}

func TestNoBodyAnswers(t *testing.T) {
	writeErrs := make(chan error, 3)
	f := startServer(t, nil, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/204":
			w.WriteHeader(http.StatusNoContent)
		case "/304":
			w.WriteHeader(http.StatusNotModified)
		default:
			w.Header().Set("Content-Length", "11")
		}
		_, err := io.WriteString(w, "hello world")
		writeErrs <- err
	}))
	c := f.client(t)
	for _, tc := range []struct{ method, path string }{{"HEAD", "/head"}, {"GET", "/204"}, {"GET", "/304"}} {
		req, _ := http.NewRequest(tc.method, f.url+tc.path, nil)
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || len(body) != 0 {
			t.Errorf("%s %s: body %q, %v; want none", tc.method, tc.path, body, err)
		}
		if err := recv(t, writeErrs, "the handler's write"); !errors.Is(err, http.ErrBodyNotAllowed) {
			t.Errorf("%s %s: Write returned %v, want ErrBodyNotAllowed", tc.method, tc.path, err)
		}
		if tc.method == "HEAD" && resp.ContentLength != 11 {
			t.Errorf("HEAD: Content-Length %d, want the handler's 11", resp.ContentLength)
		}
	}
}

func TestInformationalThenFinal(t *testing.T) {
	f := startServer(t, nil, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Link", "</style.css>; rel=preload")
		w.WriteHeader(http.StatusEarlyHints)
		w.Header().Del("Link")
		w.Header().Set("X-Final", "yes")
		w.WriteHeader(http.StatusCreated)
		_, _ = io.WriteString(w, "done")
	}))
	var mu sync.Mutex
	var infos []int
	var links []string
	trace := &httptrace.ClientTrace{Got1xxResponse: func(code int, h textproto.MIMEHeader) error {
		mu.Lock()
		defer mu.Unlock()
		infos = append(infos, code)
		links = append(links, h.Get("Link"))
		return nil
	}}
	req, _ := http.NewRequest(http.MethodGet, f.url, nil)
	req = req.WithContext(httptrace.WithClientTrace(req.Context(), trace))
	resp, err := f.client(t).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated || string(body) != "done" || resp.Header.Get("X-Final") != "yes" {
		t.Errorf("final answer %d %q X-Final=%q", resp.StatusCode, body, resp.Header.Get("X-Final"))
	}
	mu.Lock()
	defer mu.Unlock()
	if len(infos) != 1 || infos[0] != 103 || links[0] != "</style.css>; rel=preload" {
		t.Errorf("1xx answers %v with Link %q, want one 103 with the Link", infos, links)
	}
}

func TestExpectContinue(t *testing.T) {
	f := startServer(t, nil, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/refuse" {
			w.WriteHeader(http.StatusExpectationFailed) // never reads: no 100 may go out
			return
		}
		echo(w, r)
	}))
	c := f.client(t)
	for _, path := range []string{"/read", "/refuse"} {
		got100 := false
		var mu sync.Mutex
		trace := &httptrace.ClientTrace{Got100Continue: func() { mu.Lock(); got100 = true; mu.Unlock() }}
		req, _ := http.NewRequest(http.MethodPost, f.url+path, strings.NewReader("the body"))
		req.Header.Set("Expect", "100-continue")
		req = req.WithContext(httptrace.WithClientTrace(req.Context(), trace))
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		mu.Lock()
		g := got100
		mu.Unlock()
		switch path {
		case "/read":
			if !g || resp.StatusCode != http.StatusOK || string(body) != "the body" {
				t.Errorf("%s: 100 Continue %v, answer %d %q", path, g, resp.StatusCode, body)
			}
		case "/refuse":
			if g || resp.StatusCode != http.StatusExpectationFailed {
				t.Errorf("%s: 100 Continue %v, answer %d; want no 100 and a 417", path, g, resp.StatusCode)
			}
		}
	}
}

// TestExpectContinueFullDuplex: with Expect: 100-continue, a handler that
// reads the body on one goroutine while it answers on another gets the
// 100 out before its final answer, never after, and no data race.
func TestExpectContinueFullDuplex(t *testing.T) {
	f := startServer(t, nil, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got := make(chan []byte, 1)
		go func() {
			b, _ := io.ReadAll(r.Body)
			got <- b
		}()
		// The reader's first Read sent the 100; it then waits for the body
		// or has it all already.
		testproc.Poll(wait, func() bool { return len(got) > 0 || goroutinesIn("h2server.(*requestBody).Read") > 0 })
		w.Header().Set("X-Early", "yes")
		w.WriteHeader(http.StatusOK)
		_ = http.NewResponseController(w).Flush()
		_, _ = w.Write(<-got)
	}))
	var mu sync.Mutex
	got100 := false
	trace := &httptrace.ClientTrace{Got100Continue: func() { mu.Lock(); got100 = true; mu.Unlock() }}
	req, _ := http.NewRequest(http.MethodPost, f.url, strings.NewReader("duplex body"))
	req.Header.Set("Expect", "100-continue")
	req = req.WithContext(httptrace.WithClientTrace(req.Context(), trace))
	resp, err := f.client(t).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	mu.Lock()
	defer mu.Unlock()
	if err != nil || string(body) != "duplex body" || !got100 || resp.Header.Get("X-Early") != "yes" {
		t.Errorf("answer %q, %v; 100 Continue %v", body, err, got100)
	}
}
