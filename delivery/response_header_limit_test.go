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

package delivery_test

import (
	"context"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"knative.dev/event-forwarding-proxy/delivery"
)

// TestTransportsResponseHeaderLimitEdges: a destination's response headers
// are bounded by MaxResponseHeaderBytes on both transports, 64 KiB when it
// is zero: under the bound they come through, over it the round trip fails
// before any of the response is handed on.
func TestTransportsResponseHeaderLimitEdges(t *testing.T) {
	srv, _ := newBackend(t, func(w http.ResponseWriter, r *http.Request) {
		n, _ := strconv.Atoi(r.URL.Query().Get("n"))
		w.Header().Set("X-Big", strings.Repeat("b", n))
		_, _ = io.WriteString(w, "body")
	})
	tests := []struct {
		name   string
		limit  int64
		size   int
		wantOK bool
	}{
		{name: "default, under 64 KiB", size: 60 << 10, wantOK: true},
		{name: "default, over 64 KiB", size: 70 << 10},
		{name: "4 KiB, under", limit: 4 << 10, size: 3 << 10, wantOK: true},
		{name: "4 KiB, over", limit: 4 << 10, size: 5 << 10},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			trs := delivery.NewTransports(delivery.TransportParams{MaxResponseHeaderBytes: tt.limit})
			t.Cleanup(trs.CloseIdleConnections)
			for _, tr := range []struct {
				name string
				rt   http.RoundTripper
			}{{"http1", trs.HTTP1}, {"h2c", trs.H2C}} {
				req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, srv.URL+"/?n="+strconv.Itoa(tt.size), nil)
				if err != nil {
					t.Fatal(err)
				}
				resp, err := tr.rt.RoundTrip(req)
				if !tt.wantOK {
					if err == nil {
						resp.Body.Close()
						t.Errorf("%s: %d header bytes came through", tr.name, tt.size)
					}
					continue
				}
				if err != nil {
					t.Errorf("%s: %v", tr.name, err)
					continue
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if len(resp.Header.Get("X-Big")) != tt.size || string(body) != "body" {
					t.Errorf("%s: got %d header bytes and body %q", tr.name, len(resp.Header.Get("X-Big")), body)
				}
			}
		})
	}
}
