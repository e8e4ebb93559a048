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
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/net/http2"

	"knative.dev/event-forwarding-proxy/delivery/h2c"
	"knative.dev/event-forwarding-proxy/delivery/internal/calltest"
	"knative.dev/event-forwarding-proxy/test/testproc"
)

// seen is what a Go server handler saw of a request.
type seen struct {
	proto       string
	method      string
	requestURI  string
	host        string
	contentType string
	body        string
}

// TestRoundTripBasics: GET and POST through Go's h2c server: the request
// arrives as sent, over HTTP/2, and the answer's status, headers and body
// come back; the calls share one connection.
func TestRoundTripBasics(t *testing.T) {
	got := make(chan seen, 8)
	srv := newGoServer(t, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got <- seen{r.Proto, r.Method, r.RequestURI, r.Host, r.Header.Get("Content-Type"), string(b)}
		w.Header()["X-Multi"] = []string{"b", "a"}
		w.Header().Set("x-lower", "l")
		if r.Method == http.MethodPost {
			w.WriteHeader(http.StatusCreated)
		}
		io.WriteString(w, "answer to "+r.Method)
	}, nil)
	tests := []struct {
		name, method, path, body string
		wantStatus               int
		wantStatusText           string
	}{
		{name: "GET", method: http.MethodGet, path: "/get?a=1&b=%20x", wantStatus: 200, wantStatusText: "200 OK"},
		{name: "POST", method: http.MethodPost, path: "/post", body: `{"hello":"world"}`, wantStatus: 201, wantStatusText: "201 Created"},
	}
	tr, dials := newTransport(t, &h2c.Transport{})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var body io.Reader
			if tt.body != "" {
				body = strings.NewReader(tt.body)
			}
			req := newRequest(t, newCtx(t), tt.method, srv.url+tt.path, body, int64(len(tt.body)))
			if tt.body != "" {
				req.Header.Set("Content-Type", "application/json")
			}
			resp, err := tr.RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, err := io.ReadAll(resp.Body)
			if err != nil {
				t.Fatalf("reading the body: %v", err)
			}
			if n, err := resp.Body.Read(make([]byte, 8)); n != 0 || err != io.EOF {
				t.Errorf("Read after EOF: %d, %v; want 0, io.EOF", n, err)
			}
			want := seen{"HTTP/2.0", tt.method, tt.path, srv.addr, req.Header.Get("Content-Type"), tt.body}
			if diff := cmp.Diff(want, receive(t, got, "the request at the server"), cmp.AllowUnexported(seen{})); diff != "" {
				t.Errorf("the server saw (-want +got):\n%s", diff)
			}
			if resp.StatusCode != tt.wantStatus || resp.Status != tt.wantStatusText {
				t.Errorf("status %d %q, want %d %q", resp.StatusCode, resp.Status, tt.wantStatus, tt.wantStatusText)
			}
			if resp.Proto != "HTTP/2.0" || resp.ProtoMajor != 2 || resp.ProtoMinor != 0 {
				t.Errorf("proto %q %d.%d, want HTTP/2.0 2.0", resp.Proto, resp.ProtoMajor, resp.ProtoMinor)
			}
			if got := resp.Header["X-Multi"]; !slices.Equal(got, []string{"b", "a"}) {
				t.Errorf("X-Multi %q, want [b a] (header %v)", got, resp.Header)
			}
			if got := resp.Header["X-Lower"]; !slices.Equal(got, []string{"l"}) {
				t.Errorf("X-Lower %q, want [l]: keys canonical (header %v)", got, resp.Header)
			}
			wantBody := "answer to " + tt.method
			if string(b) != wantBody {
				t.Errorf("body %q, want %q", b, wantBody)
			}
			if resp.ContentLength != int64(len(wantBody)) {
				t.Errorf("ContentLength %d, want %d (content-length %q)", resp.ContentLength, len(wantBody), resp.Header.Get("Content-Length"))
			}
		})
	}
	if n := dials.Load(); n != 1 {
		t.Errorf("dialed %d times, want 1", n)
	}
	if n := tr.Conns(); n != 1 {
		t.Errorf("Conns() = %d, want 1", n)
	}
}

// TestRoundTripOnlyHTTP: a URL of another scheme than http fails the call
// without dialing.
func TestRoundTripOnlyHTTP(t *testing.T) {
	srv := newGoServer(t, echo, nil)
	addr := strings.TrimPrefix(srv.url, "http://")
	for _, scheme := range []string{"https", "ws", "ftp"} {
		t.Run(scheme, func(t *testing.T) {
			tr, dials := newTransport(t, &h2c.Transport{})
			r := call(t, tr, newRequest(t, newCtx(t), http.MethodGet, scheme+"://"+addr+"/", nil, 0))
			if r.RTErr == nil {
				t.Fatalf("RoundTrip to %s:// succeeded, want an error", scheme)
			}
			if n := dials.Load(); n != 0 {
				t.Errorf("dialed %d times, want 0", n)
			}
		})
	}
}

// TestRoundTripSkipsInformational: 1xx answers before the final one are
// skipped, their headers with them.
func TestRoundTripSkipsInformational(t *testing.T) {
	t.Run("Go server, 103", func(t *testing.T) {
		srv := newGoServer(t, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Link", "</style.css>; rel=preload")
			w.WriteHeader(http.StatusEarlyHints)
			w.Header().Del("Link")
			w.Header().Set("X-Final", "f")
			w.WriteHeader(http.StatusOK)
			io.WriteString(w, "final")
		}, nil)
		tr, _ := newTransport(t, &h2c.Transport{})
		r := get(t, tr, srv.url)
		if r.Resp.StatusCode != http.StatusOK || r.Body != "final" || r.Resp.Header.Get("X-Final") != "f" {
			t.Errorf("got %d %q X-Final %q, want 200 %q f", r.Resp.StatusCode, r.Body, r.Resp.Header.Get("X-Final"), "final")
		}
	})
	t.Run("frame server, 100 and 103", func(t *testing.T) {
		srv := newFrameServer(t, nil, func(fc *frameConn) {
			r, err := fc.readRequest()
			if err != nil {
				return
			}
			fc.writeHeaders(r.stream, false, ":status", "100")
			fc.writeHeaders(r.stream, false, ":status", "103", "link", "</a>; rel=preload")
			fc.writeHeaders(r.stream, false, ":status", "200", "x-final", "f")
			fc.writeData(r.stream, true, []byte("final"))
			holdStreams(fc)
		})
		tr, _ := newTransport(t, &h2c.Transport{})
		r := get(t, tr, srv.url)
		if r.Resp.StatusCode != http.StatusOK || r.Body != "final" {
			t.Errorf("got %d %q, want 200 %q", r.Resp.StatusCode, r.Body, "final")
		}
		want := http.Header{"X-Final": {"f"}}
		if diff := cmp.Diff(want, r.Resp.Header); diff != "" {
			t.Errorf("header (-want +got):\n%s", diff)
		}
	})
}

// TestRoundTripEndStreamHeaders: an answer whose HEADERS end the stream
// has http.NoBody as its body; its content-length, if any, is reported (an
// answer to HEAD announces the length of the body it does not carry, as
// Go's server does).
func TestRoundTripEndStreamHeaders(t *testing.T) {
	frames := newFrameServer(t, nil, func(fc *frameConn) {
		for {
			r, err := fc.readRequest()
			if err != nil {
				return
			}
			switch r.values(":path")[0] {
			case "/204":
				fc.writeHeaders(r.stream, true, ":status", "204")
			case "/head":
				fc.writeHeaders(r.stream, true, ":status", "200", "content-length", "7")
			}
		}
	})
	goSrv := newGoServer(t, func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "content")
	}, nil)
	tests := []struct {
		name, method, url string
		status            int
		length            int64
	}{
		{"204", http.MethodGet, frames.url + "/204", 204, -1},
		{"HEAD", http.MethodHead, frames.url + "/head", 200, 7},
		{"HEAD to Go's server", http.MethodHead, goSrv.url + "/", 200, 7},
	}
	tr, _ := newTransport(t, &h2c.Transport{})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, err := tr.RoundTrip(newRequest(t, newCtx(t), tt.method, tt.url, nil, 0))
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			if resp.Body != http.NoBody {
				t.Errorf("Body is %T, want http.NoBody", resp.Body)
			}
			if resp.StatusCode != tt.status || resp.ContentLength != tt.length {
				t.Errorf("status %d, ContentLength %d; want %d, %d", resp.StatusCode, resp.ContentLength, tt.status, tt.length)
			}
		})
	}
}

// TestHeadAnswerWithEmptyData: a HEAD answer (or a 304) that names a
// content-length and ends with an empty DATA frame is complete: the length
// is the resource's, not the body's.
func TestHeadAnswerWithEmptyData(t *testing.T) {
	frames := newFrameServer(t, nil, func(fc *frameConn) {
		for {
			r, err := fc.readRequest()
			if err != nil {
				return
			}
			status := "200"
			if r.values(":path")[0] == "/304" {
				status = "304"
			}
			fc.writeHeaders(r.stream, false, ":status", status, "content-length", "7")
			fc.writeData(r.stream, true, nil)
		}
	})
	tr, _ := newTransport(t, &h2c.Transport{})
	for _, tt := range []struct{ method, path string }{{http.MethodHead, "/"}, {http.MethodGet, "/304"}} {
		resp, err := tr.RoundTrip(newRequest(t, newCtx(t), tt.method, frames.url+tt.path, nil, 0))
		if err != nil {
			t.Fatalf("%s %s: %v", tt.method, tt.path, err)
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || len(b) != 0 || resp.ContentLength != 7 {
			t.Errorf("%s %s: body %q, %v, ContentLength %d; want empty, no error, 7", tt.method, tt.path, b, err, resp.ContentLength)
		}
	}
}

// TestSettingsAdvertised: the client's SETTINGS disable push, advertise
// MaxResponseHeaderBytes as SETTINGS_MAX_HEADER_LIST_SIZE and the stream
// window as SETTINGS_INITIAL_WINDOW_SIZE, and the connection window is
// raised to MaxReceiveBufferPerConnection by WINDOW_UPDATE; zero values
// mean 64 KiB, 256 KiB and 4 MiB.
func TestSettingsAdvertised(t *testing.T) {
	tests := []struct {
		name                                 string
		tr                                   *h2c.Transport
		wantHeaderList, wantStream, wantConn uint32
	}{
		{name: "defaults", tr: &h2c.Transport{}, wantHeaderList: 64 << 10, wantStream: 256 << 10, wantConn: 4 << 20},
		{name: "set", tr: &h2c.Transport{MaxResponseHeaderBytes: 10000, MaxReceiveBufferPerStream: 100000, MaxReceiveBufferPerConnection: 1 << 20},
			wantHeaderList: 10000, wantStream: 100000, wantConn: 1 << 20},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			type settings struct {
				push, headerList, stream uint32
				hasPush, hasHeaderList   bool
			}
			got := make(chan settings, 1)
			conns := make(chan *frameConn, 1)
			srv := newFrameServer(t, nil, func(fc *frameConn) {
				push, hasPush := fc.settings[http2.SettingEnablePush]
				hl, hasHL := fc.settings[http2.SettingMaxHeaderListSize]
				stream, ok := fc.settings[http2.SettingInitialWindowSize]
				if !ok {
					stream = 65535
				}
				got <- settings{push, hl, stream, hasPush, hasHL}
				conns <- fc
				r, err := fc.readRequest()
				if err != nil {
					return
				}
				fc.writeHeaders(r.stream, true, ":status", "200") // no body: no window refunded
				holdStreams(fc)
			})
			tr, _ := newTransport(t, tt.tr)
			get(t, tr, srv.url)
			s := receive(t, got, "the client's SETTINGS")
			if !s.hasPush || s.push != 0 {
				t.Errorf("SETTINGS_ENABLE_PUSH %d (sent: %t), want 0 sent", s.push, s.hasPush)
			}
			if !s.hasHeaderList || s.headerList != tt.wantHeaderList {
				t.Errorf("SETTINGS_MAX_HEADER_LIST_SIZE %d (sent: %t), want %d", s.headerList, s.hasHeaderList, tt.wantHeaderList)
			}
			if s.stream != tt.wantStream {
				t.Errorf("SETTINGS_INITIAL_WINDOW_SIZE %d, want %d", s.stream, tt.wantStream)
			}
			connGranted := receive(t, conns, "the connection")
			want := int64(tt.wantConn) - 65535
			testproc.Eventually(t, waitLimit, "the connection window is raised to "+strconv.Itoa(int(tt.wantConn)), func() bool {
				return connGranted.connWindowGranted.Load() >= want
			})
			if n := connGranted.connWindowGranted.Load(); n != want {
				t.Errorf("the connection window was raised by %d before any body, want %d", n, want)
			}
		})
	}
}

var errBoom = errors.New("boom")

// TestDialDefault: a Transport with a nil Dial dials with a net.Dialer.
func TestDialDefault(t *testing.T) {
	srv := newGoServer(t, echo, nil)
	tr := &h2c.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	r := mustCall(t, tr, newRequest(t, newCtx(t), "POST", srv.url, strings.NewReader("x"), 1))
	if r.Body != "x" {
		t.Errorf("body %q, want x", r.Body)
	}
}

// TestDialFailures: a destination that cannot be reached, that does not
// speak h2c, or that does not finish the handshake before the call's
// deadline, fails the call; the last with the context's error.
func TestDialFailures(t *testing.T) {
	// A port a socket holds, not a closed listener's: the servers
	// started next, or another test's, could be given that one.
	closedURL := refusingURL(t)
	http1 := httptest.NewServer(http.HandlerFunc(echo)) // HTTP/1.1 only
	t.Cleanup(http1.Close)
	silent := newRawListener(t) // accepts, reads, never answers
	tests := []struct {
		name, url string
		timeout   time.Duration
		want      error // nil: any error
	}{
		{name: "refused", url: closedURL},
		{name: "HTTP/1.1 only", url: http1.URL},
		{name: "silent", url: silent, timeout: 300 * time.Millisecond, want: context.DeadlineExceeded},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr, _ := newTransport(t, &h2c.Transport{})
			ctx := newCtx(t)
			if tt.timeout > 0 {
				var cancel func()
				ctx, cancel = context.WithTimeout(ctx, tt.timeout)
				defer cancel()
			}
			r := call(t, tr, newRequest(t, ctx, "GET", tt.url, nil, 0))
			if r.RTErr == nil {
				t.Fatalf("RoundTrip succeeded (status %d), want an error", r.Resp.StatusCode)
			}
			if tt.want != nil && !errors.Is(r.RTErr, tt.want) {
				t.Errorf("RoundTrip error %v, want one wrapping %v", r.RTErr, tt.want)
			}
			if n := tr.Conns(); n != 0 {
				t.Errorf("Conns() = %d after a failed dial, want 0", n)
			}
		})
	}
}

// newRawListener accepts connections and reads them, never writing; it
// returns its URL.
func newRawListener(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	calltest.ServeConns(t, ln, nil, nil, func(c net.Conn, _ int64) { io.Copy(io.Discard, c) })
	return "http://" + ln.Addr().String()
}
