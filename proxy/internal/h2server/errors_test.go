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
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestPanicAbortHandler: a handler panicking with http.ErrAbortHandler
// resets its stream, quietly; the client sees a stream error, before or
// after the answer began.
func TestPanicAbortHandler(t *testing.T) {
	f := startServer(t, nil, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/late" {
			_, _ = io.WriteString(w, "partial")
			w.(http.Flusher).Flush()
		}
		panic(http.ErrAbortHandler)
	}))
	c := f.client(t)
	if resp, err := c.Get(f.url + "/early"); err == nil {
		resp.Body.Close()
		t.Fatalf("early abort: got %d, want an error", resp.StatusCode)
	}
	resp, err := c.Get(f.url + "/late")
	if err != nil {
		t.Fatalf("late abort: the header went out, yet %v", err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err == nil {
		t.Fatalf("late abort: body %q read cleanly, want a stream error", body)
	}
	if strings.Contains(f.log.String(), "panic") {
		t.Errorf("ErrAbortHandler was logged:\n%s", f.log)
	}
}

// TestPanicOtherValue: any other panic is logged with its value, resets
// the stream, and the connection serves on.
func TestPanicOtherValue(t *testing.T) {
	f := startServer(t, nil, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/boom" {
			panic("boom-value")
		}
		_, _ = io.WriteString(w, "fine")
	}))
	c := f.oneConnClient(t)
	for range 3 {
		if resp, err := c.Get(f.url + "/boom"); err == nil {
			resp.Body.Close()
			t.Fatalf("panicking handler: got %d, want a stream error", resp.StatusCode)
		}
		resp, err := c.Get(f.url + "/fine")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if string(body) != "fine" {
			t.Fatalf("after a panic: %q", body)
		}
	}
	logged := f.log.String()
	if !strings.Contains(logged, "boom-value") || !strings.Contains(logged, "panic") {
		t.Errorf("the panic was not logged with its value:\n%s", logged)
	}
}

// TestContentLengthShorterThanWritten: a write past the declared length
// fails with ErrContentLength and sends nothing; the declared bytes make
// a complete answer.
func TestContentLengthShorterThanWritten(t *testing.T) {
	errs := make(chan error, 1)
	f := startServer(t, nil, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "5")
		_, err := io.WriteString(w, "hello world")
		errs <- err
		_, _ = io.WriteString(w, "hello")
	}))
	resp, err := f.client(t).Get(f.url)
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || string(body) != "hello" {
		t.Errorf("body %q, %v; want hello", body, err)
	}
	if err := recv(t, errs, "the write's error"); !errors.Is(err, http.ErrContentLength) {
		t.Errorf("write past Content-Length: %v, want ErrContentLength", err)
	}
}

// TestContentLengthLongerThanWritten: a handler that ends short of its
// Content-Length has its stream reset: the client must not take the
// short body for the whole.
func TestContentLengthLongerThanWritten(t *testing.T) {
	f := startServer(t, nil, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "100")
		_, _ = io.WriteString(w, "only ten!!")
	}))
	c := f.oneConnClient(t)
	for range 3 {
		resp, err := c.Get(f.url)
		if err != nil {
			continue // reset before the client had the header: fine too
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err == nil {
			t.Fatalf("short body %q read without error", body)
		}
	}
	resp, err := c.Get(f.url) // the resets kept the connection good for the next
	if err != nil {
		t.Fatalf("after the resets: %v", err)
	}
	resp.Body.Close()
}
