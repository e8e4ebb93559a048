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
	"bufio"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"knative.dev/event-forwarding-proxy/proxy/proxytest"
)

// TestStalledBodyRefused: a caller that stops sending its body mid-way is
// answered 400 bad_request once FORWARD_BODY_IDLE_TIMEOUT passes, and the
// destination never sees a complete request.
func TestStalledBodyRefused(t *testing.T) {
	for _, async := range []bool{false, true} {
		p := newTestProxy(t, map[string]string{"FORWARD_BODY_IDLE_TIMEOUT": "200ms"})
		dest := proxytest.NewDestination(t, nil)
		conn, err := net.Dial("tcp", strings.TrimPrefix(p.URL, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		prefer := ""
		if async {
			prefer = "Prefer: respond-async\r\n"
		}
		// Ten bytes announced, three sent, then silence.
		if _, err := conn.Write([]byte("POST / HTTP/1.1\r\nHost: proxy\r\nKn-Forward-To: " + dest.URL + "\r\n" + prefer +
			"Content-Length: 10\r\n\r\nabc")); err != nil {
			t.Fatal(err)
		}
		_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatalf("async=%v: no answer to a stalled body: %v", async, err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest || resp.Header.Get("Kn-Forward-Error") != string(ReasonBadRequest) {
			t.Errorf("async=%v: got %d %q, want 400 bad_request", async, resp.StatusCode, resp.Header.Get("Kn-Forward-Error"))
		}
		for _, r := range dest.Requests() {
			if r.BodyErr == nil {
				t.Errorf("async=%v: the destination got a complete request %q", async, r.Body)
			}
		}
	}
}

// TestBodyDeadlineNeverCutsTheAnswer: once the body is in, a destination
// may take far longer than the body idle timeout to answer.
func TestBodyDeadlineNeverCutsTheAnswer(t *testing.T) {
	p := newTestProxy(t, map[string]string{"FORWARD_BODY_IDLE_TIMEOUT": "100ms"})
	dest := proxytest.NewDestination(t, func(w http.ResponseWriter, r *http.Request, _ int) {
		select {
		case <-time.After(600 * time.Millisecond):
			_, _ = w.Write([]byte("late answer"))
		case <-r.Context().Done():
		}
	})
	for _, c := range []*http.Client{h1Client(t), h2cClient(t)} {
		resp, body := do(t, c, p.newRequest(t, dest.URL, strings.NewReader("a body")))
		if resp.StatusCode != http.StatusOK || string(body) != "late answer" {
			t.Errorf("%s: got %d %q, want the destination's late answer", resp.Proto, resp.StatusCode, body)
		}
	}
}
