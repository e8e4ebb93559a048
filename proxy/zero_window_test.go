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
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"knative.dev/event-forwarding-proxy/proxy/proxytest"
)

// TestOwnAnswersToAStalledCallerEnd: a caller that announces a zero
// flow-control window and opens streams the proxy answers itself (400,
// no destination) cannot pin a goroutine per stream: each answer gets
// stalledWriteGrace to be sent, then its stream is reset and its
// goroutine ends, and a legitimate caller is answered meanwhile.
func TestOwnAnswersToAStalledCallerEnd(t *testing.T) {
	const streams = 200
	tp := newTestProxy(t, nil)
	base := goroutinesIn("writeErrorRetryIn")["writeErrorRetryIn"]
	nc, err := net.DialTimeout("tcp", strings.TrimPrefix(tp.URL, "http://"), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = nc.Close() })
	_, _ = nc.Write([]byte(http2.ClientPreface))
	fr := http2.NewFramer(nc, nc)
	if err := fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 0}); err != nil {
		t.Fatal(err)
	}
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	for _, f := range []hpack.HeaderField{{Name: ":method", Value: "POST"}, {Name: ":scheme", Value: "http"}, {Name: ":path", Value: "/"}, {Name: ":authority", Value: "proxy.test"}} {
		_ = enc.WriteField(f)
	}
	for i := range streams {
		if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: uint32(2*i + 1), BlockFragment: hb.Bytes(), EndStream: true, EndHeaders: true}); err != nil {
			t.Fatal(err)
		}
	}
	// Read what comes (SETTINGS, HEADERS of the 400s, the resets), never
	// granting a window, until every stream is reset.
	resets := make(chan int, 1)
	go func() {
		n := 0
		for {
			f, err := fr.ReadFrame()
			if err != nil {
				resets <- n
				return
			}
			switch f := f.(type) {
			case *http2.SettingsFrame:
				if !f.IsAck() {
					_ = fr.WriteSettingsAck()
				}
			case *http2.RSTStreamFrame:
				if n++; n == streams {
					resets <- n
					return
				}
			}
		}
	}()
	resp, body := do(t, h1Client(t), tp.newRequest(t, "", strings.NewReader("e")))
	if resp.StatusCode != http.StatusBadRequest {
		t.Errorf("legitimate caller: status %d (%s), want the proxy's 400", resp.StatusCode, body)
	}
	select {
	case n := <-resets:
		if n != streams {
			t.Fatalf("the connection ended after %d resets, want %d", n, streams)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the stalled caller's streams were not reset")
	}
	proxytest.Eventually(t, 10*time.Second, func() bool {
		return goroutinesIn("writeErrorRetryIn")["writeErrorRetryIn"] <= base
	}, "no goroutine left writing an answer to the stalled caller")
}
