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
	"io"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"weak"
)

// TestDetachedStreamKeepsNoRequest: once a detached handler has returned
// and the request's body is over, the stream no longer keeps the request:
// what a held call costs is what the handler chose to keep.
func TestDetachedStreamKeepsNoRequest(t *testing.T) {
	tests := []struct {
		name string
		body io.Reader
	}{
		{name: "no body"},
		{name: "with a body", body: strings.NewReader("event")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			type held struct {
				w   http.ResponseWriter
				end func(p any)
			}
			calls := make(chan held, 1)
			reqs := make(chan weak.Pointer[http.Request], 1)
			h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				end := w.(detacher).Detach()
				_, _ = io.Copy(io.Discard, r.Body)
				reqs <- weak.Make(r)
				calls <- held{w, end}
			})
			f := startServer(t, nil, h)
			c := f.client(t)
			done := make(chan error, 1)
			go func() {
				req, _ := http.NewRequest(http.MethodPost, f.url, tt.body)
				resp, err := c.Do(req)
				if err == nil {
					resp.Body.Close()
				}
				done <- err
			}()
			req := recv(t, reqs, "the request")
			d := recv(t, calls, "a detached call")
			eventually(t, "the handler's goroutine to end", func() bool { return goroutinesIn(runHandlerFrame) == 0 })
			eventually(t, "the request to be collected", func() bool {
				runtime.GC()
				return req.Value() == nil
			})
			d.w.WriteHeader(http.StatusNoContent)
			d.end(nil)
			if err := recv(t, done, "the answer"); err != nil {
				t.Fatal(err)
			}
		})
	}
}
