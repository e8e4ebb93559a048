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

package sink

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// serve runs a sink on a loopback port until the test ends.
func serve(t *testing.T, p Params) (*Sink, string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := New(p)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, ln, s) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return s, "http://" + ln.Addr().String()
}

func client(t *testing.T, h2c bool) *http.Client {
	tr := &http.Transport{Proxy: nil, Protocols: new(http.Protocols)}
	if h2c {
		tr.Protocols.SetUnencryptedHTTP2(true)
	} else {
		tr.Protocols.SetHTTP1(true)
	}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 10 * time.Second}
}

func post(t *testing.T, c *http.Client, url string) (*http.Response, string) {
	t.Helper()
	resp, err := c.Post(url, "application/json", strings.NewReader(`{"a":1}`))
	if err != nil {
		t.Fatalf("POST %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// waitHeld polls the sink until it holds n calls, failing after 10 s.
func waitHeld(t *testing.T, s *Sink, n int64) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for s.Stats().Held != n {
		select {
		case <-deadline:
			t.Fatalf("held = %d, want %d", s.Stats().Held, n)
		case <-tick.C:
		}
	}
}

func TestSink(t *testing.T) {
	tests := []struct {
		name string
		h2c  bool
	}{
		{name: "HTTP/1.1", h2c: false},
		{name: "h2c", h2c: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, url := serve(t, Params{Hold: time.Hour})
			c := client(t, tt.h2c)

			resp, body := post(t, c, url+PathFast)
			if resp.StatusCode != http.StatusOK || body != string(reply) {
				t.Errorf("fast: %d %q", resp.StatusCode, body)
			}
			if tt.h2c != (resp.ProtoMajor == 2) {
				t.Errorf("fast answered over %s", resp.Proto)
			}

			// Two held calls end when released, long before their hour.
			ended := make(chan int, 2)
			for range 2 {
				go func() {
					r, _ := post(t, c, url+PathHold)
					ended <- r.StatusCode
				}()
			}
			waitHeld(t, s, 2)
			_, body = post(t, c, url+PathStats)
			var st Stats
			if err := json.Unmarshal([]byte(body), &st); err != nil || st.Held != 2 {
				t.Errorf("stats = %q (%v), want 2 held", body, err)
			}
			if resp, _ := post(t, c, url+PathRelease); resp.StatusCode != http.StatusNoContent {
				t.Errorf("release: %d", resp.StatusCode)
			}
			for range 2 {
				if code := <-ended; code != http.StatusOK {
					t.Errorf("held call ended with %d", code)
				}
			}

			// A call that names its hold ends by itself.
			resp, _ = post(t, c, url+PathHold+"?d=1ms")
			if resp.StatusCode != http.StatusOK {
				t.Errorf("hold 1ms: %d", resp.StatusCode)
			}
			if got := s.Stats(); got.Held != 0 || got.Served < 4 {
				t.Errorf("stats at the end = %+v", got)
			}
		})
	}
}
