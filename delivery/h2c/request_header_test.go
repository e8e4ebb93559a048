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
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"knative.dev/event-forwarding-proxy/delivery/h2c"
)

// sendCaptured runs req through tr to a capture server and returns the
// request as the server read it.
func sendCaptured(t *testing.T, tr *h2c.Transport, got <-chan captured, req *http.Request) *rawRequest {
	t.Helper()
	r := mustCall(t, tr, req)
	if r.Body != "ok" {
		t.Errorf("answer body %q, want ok", r.Body)
	}
	c := receive(t, got, "the request at the server")
	if c.err != nil {
		t.Fatalf("the server could not read the request: %v", c.err)
	}
	return c.req
}

// TestRequestPseudoHeaders: :method, :scheme, :path (the URL's request
// URI) and :authority (req.Host, else the URL's host), and no host field.
func TestRequestPseudoHeaders(t *testing.T) {
	srv, got := newCaptureServer(t)
	addr := strings.TrimPrefix(srv.url, "http://")
	tests := []struct {
		name, method, path, host string
		want                     map[string]string
	}{
		{name: "URL host", method: "GET", path: "/p/a?x=1&y=%20z",
			want: map[string]string{":method": "GET", ":scheme": "http", ":path": "/p/a?x=1&y=%20z", ":authority": addr}},
		{name: "req.Host", method: "DELETE", path: "/", host: "example.com:8080",
			want: map[string]string{":method": "DELETE", ":scheme": "http", ":path": "/", ":authority": "example.com:8080"}},
		{name: "escaped path", method: "GET", path: "/a%2Fb/c%20d",
			want: map[string]string{":method": "GET", ":scheme": "http", ":path": "/a%2Fb/c%20d", ":authority": addr}},
	}
	tr, _ := newTransport(t, &h2c.Transport{})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := newRequest(t, newCtx(t), tt.method, srv.url+tt.path, nil, 0)
			req.Host = tt.host
			r := sendCaptured(t, tr, got, req)
			gotPseudo := map[string]string{}
			for _, f := range r.fields {
				if strings.HasPrefix(f.Name, ":") {
					if _, dup := gotPseudo[f.Name]; dup {
						t.Errorf("pseudo-header %s sent twice", f.Name)
					}
					gotPseudo[f.Name] = f.Value
				}
			}
			if diff := cmp.Diff(tt.want, gotPseudo); diff != "" {
				t.Errorf("pseudo-headers (-want +got):\n%s", diff)
			}
			if v := r.values("host"); v != nil {
				t.Errorf("host field sent: %q", v)
			}
		})
	}
}

// TestRequestHeaderRules: which header fields are sent, and how.
func TestRequestHeaderRules(t *testing.T) {
	srv, got := newCaptureServer(t)
	tests := []struct {
		name        string
		method      string
		body        io.Reader
		length      int64
		wantBody    string
		header      map[string][]string // set as is: the keys' case kept
		want        map[string][]string // fields sent (lower-case names); nil value: not sent
		wantNoOther bool                // no regular field besides those in want
	}{
		{name: "hop-by-hop, any case", method: "GET", header: map[string][]string{
			"Connection": {"close"}, "keep-alive": {"timeout=5"}, "PROXY-CONNECTION": {"keep-alive"},
			"Transfer-Encoding": {"chunked"}, "upgrade": {"h2c"}, "HOST": {"evil.example"}, "X-Kept": {"k"},
		}, want: map[string][]string{"x-kept": {"k"}}, wantNoOther: true},
		{name: "hop-by-hop, canonical", method: "GET", header: map[string][]string{
			"Connection": {"keep-alive"}, "Keep-Alive": {"timeout=5"}, "Proxy-Connection": {"keep-alive"},
			"Upgrade": {"websocket"}, "Host": {"evil.example"},
		}, want: map[string][]string{}, wantNoOther: true},
		{name: "keys lower-cased, values in order", method: "GET", header: map[string][]string{
			"X-Mixed-Case": {"v"}, "x-already-lower": {"l"}, "ALLCAPS": {"c"}, "Ce-Id": {"1"}, "X-Multi": {"a", "b"},
		}, want: map[string][]string{"x-mixed-case": {"v"}, "x-already-lower": {"l"}, "allcaps": {"c"}, "ce-id": {"1"}, "x-multi": {"a", "b"}}},
		{name: "te: trailers", method: "GET", header: map[string][]string{"Te": {"trailers"}},
			want: map[string][]string{"te": {"trailers"}}},
		{name: "te: gzip, trailers", method: "GET", header: map[string][]string{"Te": {"gzip, trailers"}},
			want: map[string][]string{"te": {"trailers"}}},
		{name: "te: gzip", method: "GET", header: map[string][]string{"Te": {"gzip"}},
			want: map[string][]string{"te": nil}},
		{name: "no user-agent", method: "GET", want: map[string][]string{"user-agent": nil}},
		{name: "empty user-agent", method: "GET", header: map[string][]string{"User-Agent": {""}},
			want: map[string][]string{"user-agent": nil}},
		{name: "user-agent", method: "GET", header: map[string][]string{"User-Agent": {"agent/1"}},
			want: map[string][]string{"user-agent": {"agent/1"}}},
		{name: "GET without body", method: "GET", want: map[string][]string{"content-length": nil}},
		{name: "DELETE without body", method: "DELETE", want: map[string][]string{"content-length": nil}},
		{name: "POST with body", method: "POST", body: strings.NewReader("payload"), length: 7, wantBody: "payload",
			want: map[string][]string{"content-length": {"7"}}},
		{name: "POST without body", method: "POST", want: map[string][]string{"content-length": {"0"}}},
		{name: "POST with NoBody", method: "POST", body: http.NoBody, want: map[string][]string{"content-length": {"0"}}},
		{name: "PUT without body", method: "PUT", want: map[string][]string{"content-length": {"0"}}},
		{name: "PATCH without body", method: "PATCH", want: map[string][]string{"content-length": {"0"}}},
		{name: "POST of unknown length", method: "POST", body: strings.NewReader("streamed"), length: -1, wantBody: "streamed",
			want: map[string][]string{"content-length": nil}},
	}
	tr, _ := newTransport(t, &h2c.Transport{})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := newRequest(t, newCtx(t), tt.method, srv.url+"/", tt.body, tt.length)
			for k, v := range tt.header {
				req.Header[k] = v
			}
			r := sendCaptured(t, tr, got, req)
			gotFields := map[string][]string{}
			for _, f := range r.fields {
				if strings.HasPrefix(f.Name, ":") {
					continue
				}
				if f.Name != strings.ToLower(f.Name) {
					t.Errorf("field name %q not lower-case", f.Name)
				}
				gotFields[f.Name] = append(gotFields[f.Name], f.Value)
			}
			for name, want := range tt.want {
				if g := joinValues(gotFields[name]); g != joinValues(want) || (want == nil) != (gotFields[name] == nil) {
					t.Errorf("field %s: %q, want %q (nil: not sent); fields %v", name, gotFields[name], want, gotFields)
				}
			}
			if tt.wantNoOther {
				for name := range gotFields {
					if _, ok := tt.want[name]; !ok && name != "content-length" {
						t.Errorf("field %s: %q sent, want not sent", name, gotFields[name])
					}
				}
			}
			if n := len(gotFields["content-length"]); n > 1 {
				t.Errorf("content-length sent %d times: %q", n, gotFields["content-length"])
			}
			if string(r.body) != tt.wantBody {
				t.Errorf("body %q, want %q", r.body, tt.wantBody)
			}
		})
	}
}

// joinValues joins a field's values the way a list-valued field may be
// sent either as one field or as several.
func joinValues(v []string) string { return strings.Join(v, ", ") }

// TestRequestInvalidHeaders: a header with an invalid name or value fails
// the call before anything of it is sent.
func TestRequestInvalidHeaders(t *testing.T) {
	tests := []struct {
		name       string
		key, value string
	}{
		{name: "space in name", key: "Bad Name", value: "v"},
		{name: "colon in name", key: "x:y", value: "v"},
		{name: "empty name", key: "", value: "v"},
		{name: "non-ASCII name", key: "X-Caf\u00e9", value: "v"},
		{name: "newline in value", key: "X-Split", value: "a\r\nX-Injected: 1"},
		{name: "LF in value", key: "X-Split", value: "a\nb"},
		{name: "NUL in value", key: "X-Nul", value: "a\x00b"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv, got := newCaptureServer(t)
			tr, _ := newTransport(t, &h2c.Transport{})
			req := newRequest(t, newCtx(t), "POST", srv.url+"/invalid", strings.NewReader("x"), 1)
			req.Header[tt.key] = []string{tt.value}
			if r := call(t, tr, req); r.RTErr == nil {
				t.Errorf("RoundTrip with header %q: %q succeeded (status %d), want an error", tt.key, tt.value, r.Resp.StatusCode)
			}
			// The first request the server sees must be the valid one that follows.
			r := sendCaptured(t, tr, got, newRequest(t, newCtx(t), "GET", srv.url+"/after", nil, 0))
			if p := r.values(":path"); !slices.Equal(p, []string{"/after"}) {
				t.Errorf("the server first saw :path %q, want /after (the invalid request was sent)", p)
			}
		})
	}
}
