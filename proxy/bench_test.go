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

package proxy

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
)

// BenchmarkForwardSync measures one synchronous call through the whole
// in-process chain: an HTTP/1.1 keep-alive caller, the proxy's inbound
// server and handlers, its outbound transport and a loopback destination
// answering 200 with a small body.
func BenchmarkForwardSync(b *testing.B) {
	reply := []byte(`{"ok":true}`)
	dest := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(reply)
	}))
	b.Cleanup(dest.Close)
	tp := newTestProxy(b, map[string]string{"FORWARD_MAX_INFLIGHT": "1000", "FORWARD_MAX_INFLIGHT_PER_DESTINATION": "1000", "FORWARD_MAX_INFLIGHT_PER_TENANT": "1000"})
	client := h1Client(b)
	body := []byte(`{"specversion":"1.0","id":"e-1","source":"/s","type":"t","data":"hello"}`)

	b.ReportAllocs()
	for b.Loop() {
		req, err := http.NewRequestWithContext(b.Context(), http.MethodPost, tp.URL+"/", bytes.NewReader(body))
		if err != nil {
			b.Fatal(err)
		}
		req.Header.Set("Kn-Forward-To", dest.URL+"/events")
		req.Header.Set("Ce-Id", "e-1")
		req.Header.Set("Content-Type", "application/cloudevents+json")
		resp, err := client.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			b.Fatalf("status %d", resp.StatusCode)
		}
	}
}
