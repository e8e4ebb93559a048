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

package naive

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func TestNaive(t *testing.T) {
	tests := []struct {
		name       string
		outbound   string
		h2cIn      bool
		forwardTo  bool
		wantStatus int
		wantProto  int // the destination's view
	}{
		{name: "h2c both sides", outbound: H2C, h2cIn: true, forwardTo: true, wantStatus: http.StatusOK, wantProto: 2},
		{name: "HTTP/1.1 both sides", outbound: HTTP1, forwardTo: true, wantStatus: http.StatusOK, wantProto: 1},
		{name: "default transport", outbound: DefaultTransport, forwardTo: true, wantStatus: http.StatusOK, wantProto: 1},
		{name: "no destination", outbound: H2C, wantStatus: http.StatusBadRequest},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			seen := make(chan *http.Request, 1)
			dest := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				b, _ := io.ReadAll(r.Body)
				r.Body = io.NopCloser(strings.NewReader(string(b)))
				seen <- r
				_, _ = w.Write([]byte("reply:" + string(b)))
			}))
			dest.Config.Protocols = new(http.Protocols)
			dest.Config.Protocols.SetHTTP1(true)
			dest.Config.Protocols.SetUnencryptedHTTP2(true)
			dest.Start()
			defer dest.Close()

			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			served := make(chan error, 1)
			go func() { served <- Serve(ctx, ln, Params{Outbound: tt.outbound}) }()
			defer func() {
				cancel()
				if err := <-served; err != nil {
					t.Errorf("Serve: %v", err)
				}
			}()

			tr := &http.Transport{Proxy: nil, Protocols: new(http.Protocols)}
			if tt.h2cIn {
				tr.Protocols.SetUnencryptedHTTP2(true)
			} else {
				tr.Protocols.SetHTTP1(true)
			}
			defer tr.CloseIdleConnections()
			req, _ := http.NewRequest(http.MethodPost, "http://"+ln.Addr().String()+"/ignored", strings.NewReader("event"))
			if tt.forwardTo {
				req.Header.Set(headerForwardTo, dest.URL+"/events?x=1")
			}
			req.Header.Set("Ce-Id", "1")
			resp, err := (&http.Client{Transport: tr, Timeout: 10 * time.Second}).Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			_ = resp.Body.Close()
			if resp.StatusCode != tt.wantStatus {
				t.Fatalf("status %d, want %d; body %q", resp.StatusCode, tt.wantStatus, body)
			}
			if tt.wantStatus != http.StatusOK {
				return
			}
			if string(body) != "reply:event" {
				t.Errorf("body %q", body)
			}
			r := <-seen
			if r.URL.Path != "/events" || r.URL.RawQuery != "x=1" || r.Header.Get("Ce-Id") != "1" ||
				r.Header.Get(headerForwardTo) != "" || r.ProtoMajor != tt.wantProto {
				t.Errorf("destination saw %s %s?%s over %s with headers %v", r.Method, r.URL.Path, r.URL.RawQuery, r.Proto, r.Header)
			}
		})
	}
}
