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

package http1_test

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"slices"
	"testing"

	"knative.dev/event-forwarding-proxy/delivery/http1"
)

// TestRoundTripResponse: the destination's status, headers and body come
// through.
func TestRoundTripResponse(t *testing.T) {
	srv, _ := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header()["X-Multi"] = []string{"b", "a"}
		w.Header().Set("Ce-Type", "t")
		w.WriteHeader(http.StatusCreated)
		io.WriteString(w, "created")
	})
	tr, _ := newTransport(t, &http1.Transport{})
	r := get(t, tr, srv.URL)
	if r.Resp.StatusCode != http.StatusCreated {
		t.Errorf("status %d, want 201", r.Resp.StatusCode)
	}
	if got := r.Resp.Header["X-Multi"]; !slices.Equal(got, []string{"b", "a"}) {
		t.Errorf("X-Multi %q, want [b a]", got)
	}
	if got := r.Resp.Header.Get("Ce-Type"); got != "t" {
		t.Errorf("Ce-Type %q, want t", got)
	}
	if r.Body != "created" {
		t.Errorf("body %q, want created", r.Body)
	}
}

// TestRoundTripResponseTrailers: trailers the destination declares, and
// those it sends undeclared, are in resp.Trailer once the body is read.
func TestRoundTripResponseTrailers(t *testing.T) {
	srv, _ := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Trailer", "X-Declared")
		io.WriteString(w, "body")
		w.(http.Flusher).Flush()
		w.Header().Set("X-Declared", "d")
		w.Header().Set(http.TrailerPrefix+"X-Undeclared", "u")
	})
	tr, dials := newTransport(t, &http1.Transport{})
	for range 2 {
		r := get(t, tr, srv.URL)
		if r.Body != "body" {
			t.Errorf("body %q, want body", r.Body)
		}
		if got := r.Resp.Trailer.Get("X-Declared"); got != "d" {
			t.Errorf("trailer X-Declared %q, want d (trailer %v)", got, r.Resp.Trailer)
		}
		if got := r.Resp.Trailer.Get("X-Undeclared"); got != "u" {
			t.Errorf("trailer X-Undeclared %q, want u (trailer %v)", got, r.Resp.Trailer)
		}
	}
	if n := dials.Load(); n != 1 {
		t.Errorf("2 calls with trailers dialed %d times, want 1", n)
	}
}

// TestRoundTripNoBodyAnswers: answers to HEAD, and 204 and 304 answers,
// have no body even when they announce a length, and leave the
// connection ready for the next call.
func TestRoundTripNoBodyAnswers(t *testing.T) {
	srv, _ := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/head":
			w.Header().Set("Content-Length", "7")
			io.WriteString(w, "content")
		case "/204":
			w.WriteHeader(http.StatusNoContent)
		case "/304":
			w.Header().Set("Etag", `"x"`)
			w.WriteHeader(http.StatusNotModified)
		default:
			io.WriteString(w, "next")
		}
	})
	tests := []struct {
		name, method, path string
		wantStatus         int
	}{
		{name: "HEAD", method: "HEAD", path: "/head", wantStatus: 200},
		{name: "204", method: "GET", path: "/204", wantStatus: 204},
		{name: "304", method: "GET", path: "/304", wantStatus: 304},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr, dials := newTransport(t, &http1.Transport{})
			r := mustCall(t, tr, newRequest(t, newCtx(t), tt.method, srv.URL+tt.path, nil, 0))
			if r.Resp.StatusCode != tt.wantStatus || r.Body != "" {
				t.Errorf("got %d with body %q, want %d with none", r.Resp.StatusCode, r.Body, tt.wantStatus)
			}
			if next := get(t, tr, srv.URL+"/next"); next.Body != "next" {
				t.Errorf("the next call read %q, want next", next.Body)
			}
			if n := dials.Load(); n != 1 {
				t.Errorf("dialed %d times, want 1 (the connection reused)", n)
			}
		})
	}
}

// TestRoundTripInterimAnswers: 1xx interim answers are skipped and the
// final answer returned; the connection stays usable.
func TestRoundTripInterimAnswers(t *testing.T) {
	raw := newRawServer(t, answerEach("HTTP/1.1 100 Continue\r\n\r\n"+
		"HTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload\r\n\r\n"+
		"HTTP/1.1 102 Processing\r\n\r\n"+
		"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nfinal"))
	srv, _ := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Link", "</style.css>; rel=preload")
		w.WriteHeader(http.StatusEarlyHints)
		w.WriteHeader(http.StatusEarlyHints)
		w.WriteHeader(http.StatusAccepted)
		io.WriteString(w, "final")
	})
	tests := []struct {
		name, url  string
		wantStatus int
	}{
		{name: "100, 103 and 102 from a raw destination", url: raw.url, wantStatus: 200},
		{name: "two 103 from net/http", url: srv.URL, wantStatus: 202},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr, dials := newTransport(t, &http1.Transport{})
			for range 2 {
				r := get(t, tr, tt.url)
				if r.Resp.StatusCode != tt.wantStatus || r.Body != "final" {
					t.Errorf("got %d %q, want %d %q", r.Resp.StatusCode, r.Body, tt.wantStatus, "final")
				}
			}
			if n := dials.Load(); n != 1 {
				t.Errorf("dialed %d times, want 1", n)
			}
		})
	}
}

// TestRoundTripSwitchingProtocols: a 101 answer is returned as it is.
func TestRoundTripSwitchingProtocols(t *testing.T) {
	srv := newRawServer(t, func(s *rawServer, c net.Conn) {
		if _, err := http.ReadRequest(bufio.NewReader(c)); err != nil {
			return
		}
		io.WriteString(c, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: test\r\n\r\n")
		<-s.done
	})
	tr, _ := newTransport(t, &http1.Transport{})
	req := newRequest(t, newCtx(t), "GET", srv.url, nil, 0)
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", "test")
	done := make(chan result, 1)
	go func() {
		var r result
		r.Resp, r.RTErr = tr.RoundTrip(req)
		done <- r
	}()
	r := receive(t, done, "RoundTrip to return the 101")
	if r.RTErr != nil {
		t.Fatal(r.RTErr)
	}
	r.Resp.Body.Close()
	if r.Resp.StatusCode != http.StatusSwitchingProtocols {
		t.Errorf("status %d, want 101", r.Resp.StatusCode)
	}
}

// TestRoundTripBodyUntilClose: an HTTP/1.1 answer with neither a length nor
// chunks, and Connection: close, has the bytes up to the end of the
// connection as its body; the connection is not reused.
func TestRoundTripBodyUntilClose(t *testing.T) {
	srv := newRawServer(t, func(_ *rawServer, c net.Conn) {
		if _, err := http.ReadRequest(bufio.NewReader(c)); err != nil {
			return
		}
		io.WriteString(c, "HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nall of it, until the end")
	})
	tr, dials := newTransport(t, &http1.Transport{})
	for range 2 {
		if r := get(t, tr, srv.url); r.Body != "all of it, until the end" {
			t.Errorf("body %q", r.Body)
		}
		if n := tr.IdleConns(); n != 0 {
			t.Errorf("%d idle connections, want 0", n)
		}
	}
	if n := dials.Load(); n != 2 {
		t.Errorf("2 calls dialed %d times, want 2", n)
	}
}
