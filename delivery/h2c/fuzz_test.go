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
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"golang.org/x/net/http/httpguts"

	"knative.dev/event-forwarding-proxy/delivery/h2c"
)

// notForwarded are the header names (lower-case) the transport sends by
// its own rules or not at all.
var notForwarded = map[string]bool{
	"connection": true, "keep-alive": true, "proxy-connection": true, "transfer-encoding": true,
	"upgrade": true, "host": true, "te": true, "content-length": true, "trailer": true, "user-agent": true,
}

// FuzzHeaders: a request header with a valid name and value arrives under
// its lower-case name with its value; an invalid one fails the call.
func FuzzHeaders(f *testing.F) {
	for _, seed := range [][2]string{
		{"X-Custom", "v"}, {"x-MiXeD", "Value With Spaces"}, {"Ce-Id", "1234"}, {"X-Empty", ""},
		{"Bad Name", "v"}, {"x:y", "v"}, {"", "v"}, {"X-Caf\u00e9", "v"},
		{"X-Split", "a\r\nX-Injected: 1"}, {"X-Nul", "a\x00b"}, {"X-Del", "\x7f"},
		{"X-Obs", "caf\u00e9"}, {"X-Tab", "a\tb"}, {"X-Lead", " lead"}, {"X-Trail", "trail "},
		{"Connection", "close"}, {"HOST", "evil"}, {"Te", "trailers"}, {"Content-Length", "99"},
	} {
		f.Add(seed[0], seed[1])
	}
	srv, got := newCaptureServer(f)
	tr, _ := newTransport(f, &h2c.Transport{})
	var seq atomic.Int64
	f.Fuzz(func(t *testing.T, name, value string) {
		path := fmt.Sprintf("/fuzz/%d", seq.Add(1))
		req := newRequest(t, newCtx(t), "GET", srv.url+path, nil, 0)
		req.Header[name] = []string{value}
		valid := httpguts.ValidHeaderFieldName(name) && httpguts.ValidHeaderFieldValue(value)
		r := call(t, tr, req)
		if !valid {
			if r.RTErr == nil {
				t.Fatalf("header %q: %q sent (status %d), want an error", name, value, r.Resp.StatusCode)
			}
			return
		}
		trimmed := strings.Trim(value, " \t")
		if r.Err() != nil {
			if trimmed != value { // a field with leading or trailing whitespace is malformed in HTTP/2
				return
			}
			t.Fatalf("header %q: %q: %v", name, value, r.Err())
		}
		var c captured
		for {
			c = receive(t, got, "the request at the server")
			if c.err != nil {
				t.Fatalf("the server: %v", c.err)
			}
			if p := c.req.values(":path"); len(p) == 1 && p[0] == path {
				break
			}
		}
		lower := strings.ToLower(name)
		if notForwarded[lower] {
			return
		}
		vals := c.req.values(lower)
		if len(vals) != 1 || (vals[0] != value && vals[0] != trimmed) {
			t.Errorf("header %q: %q arrived as %s: %q", name, value, lower, vals)
		}
	})
}
