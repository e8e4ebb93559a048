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
	"net/http"
	"testing"
	"time"

	"golang.org/x/net/http2"

	"knative.dev/event-forwarding-proxy/delivery/h2c"
	"knative.dev/event-forwarding-proxy/internal/h2conn/h2conntest"
)

// TestBothEndsAlikeClient runs the cases both ends of an h2c connection
// share (h2conntest.Cases) against the client, with a frame server as
// the peer; proxy/internal/h2server runs them against the server.
func TestBothEndsAlikeClient(t *testing.T) {
	h2conntest.Run(t, func(t *testing.T, tc h2conntest.Case) {
		answered := make(chan error, 1)
		srv := newFrameServer(t, nil, func(fc *frameConn) {
			answered <- answerCase(fc, tc)
		})
		tr, _ := newTransport(t, &h2c.Transport{})
		go func() {
			// The answer's body is read by nobody: stream Open's
			// window only fills.
			req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, srv.url+"/held", nil)
			if resp, err := tr.RoundTrip(req); err == nil {
				<-t.Context().Done()
				resp.Body.Close()
			}
		}()
		select {
		case err := <-answered:
			if err != nil {
				t.Error(err)
			}
		case <-time.After(waitLimit):
			t.Fatalf("no answer to the case's frames within %v", waitLimit)
		}
	})
}

// answerCase opens stream Open on fc (the client's request, answered with
// headers and no end), sends the case's frames, and reads what the client
// answers: an error says how it differs from the case's.
func answerCase(fc *frameConn, tc h2conntest.Case) error {
	r, err := fc.readRequest()
	if err != nil {
		return err
	}
	if r.stream != h2conntest.Open {
		return fmt.Errorf("the request came on stream %d, want %d", r.stream, h2conntest.Open)
	}
	if err := fc.writeHeaders(r.stream, false, ":status", "200"); err != nil {
		return err
	}
	if err := fc.write(func(fr *http2.Framer) error { return tc.Send(fr, fc.settings[http2.SettingInitialWindowSize]) }); err != nil {
		return err
	}
	alive := false // a PING of ours is out to see that the connection lives on
	for {
		f, err := fc.fr.ReadFrame()
		if err != nil {
			return fmt.Errorf("the connection ended (%w) before the answer", err)
		}
		switch f := f.(type) {
		case *http2.GoAwayFrame:
			if tc.Answer != h2conntest.GoAway {
				return fmt.Errorf("GOAWAY %v, want the connection to live on", f.ErrCode)
			}
			if f.ErrCode != tc.Code {
				return fmt.Errorf("GOAWAY %v, want %v", f.ErrCode, tc.Code)
			}
			if f, err := fc.fr.ReadFrame(); err == nil {
				return fmt.Errorf("after the GOAWAY: %v, want the connection closed", f)
			}
			return nil
		case *http2.RSTStreamFrame:
			if tc.Answer != h2conntest.Reset || f.StreamID != h2conntest.Open {
				return fmt.Errorf("RST_STREAM %v on stream %d, unexpected", f.ErrCode, f.StreamID)
			}
			if f.ErrCode != tc.Code {
				return fmt.Errorf("RST_STREAM %v, want %v", f.ErrCode, tc.Code)
			}
			if err := fc.write(func(fr *http2.Framer) error { return fr.WritePing(false, h2conntest.Ping) }); err != nil {
				return err
			}
			alive = true
		case *http2.SettingsFrame:
			if f.IsAck() && tc.Answer == h2conntest.SettingsAck {
				return nil
			}
		case *http2.PingFrame:
			if !f.IsAck() {
				_ = fc.write(func(fr *http2.Framer) error { return fr.WritePing(true, f.Data) })
				continue
			}
			if f.Data != h2conntest.Ping {
				return fmt.Errorf("PING ack carries %q, want %q", f.Data, h2conntest.Ping)
			}
			if alive || tc.Answer == h2conntest.PingAck {
				return nil
			}
		}
	}
}
