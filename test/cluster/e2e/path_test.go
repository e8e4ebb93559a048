//go:build cluster

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

package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"testing"
	"time"
)

// TestRealPath sends events through the real path (Traefik, the
// activator or queue-proxy, the proxy, Traefik again, the sink's
// queue-proxy, the sink) and checks what arrives and what comes back.
func TestRealPath(t *testing.T) {
	realPathStage.begin(t) // before t.Parallel: see stages_test.go
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	ns := newNamespace(ctx, t, "path")
	s := newSink(ctx, t, ns)
	after(t, upgradeStage)
	auth := "Bearer " + proxyToken(ctx, t, ns)
	n := 0
	event := func(contentType string) (string, map[string]string) {
		n++
		id := fmt.Sprintf("path-%d-%d", time.Now().UnixNano(), n)
		return id, map[string]string{
			"Kn-Forward-Authorization": auth, "Ce-Specversion": "1.0", "Ce-Id": id,
			"Ce-Source": "/e2e/path", "Ce-Type": "e2e.path", "Content-Type": contentType,
		}
	}
	arrivedOnce := func(t *testing.T, id string, body []byte) record {
		t.Helper()
		var got []record
		eventually(t, time.Minute, 500*time.Millisecond, func() string { return fmt.Sprintf("%s arrived %d times", id, len(got)) }, func() bool {
			got = byID(s.records(ctx, t), id)
			return len(got) == 1 && got[0].Outcome == "answered"
		})
		r := got[0]
		if sum := sha256.Sum256(body); r.BodySHA256 != hex.EncodeToString(sum[:]) || r.BodyBytes != len(body) {
			t.Errorf("%s: the sink got %d bytes (sha256 %s), sent %d", id, r.BodyBytes, r.BodySHA256, len(body))
		}
		if len(r.ForwardHeaders) > 0 {
			t.Errorf("%s: Kn-Forward-* headers reached the sink: %v", id, r.ForwardHeaders)
		}
		return r
	}

	t.Run("binary, sync", func(t *testing.T) {
		body := make([]byte, 10_000)
		_, _ = rand.Read(body)
		id, h := event("application/octet-stream")
		a := forward(ctx, t, s.URL+"/binary", h, body)
		if a.Status != http.StatusOK || a.reason() != "" {
			t.Fatalf("got %d %q", a.Status, a.reason())
		}
		if r := arrivedOnce(t, id, body); r.Source != "/e2e/path" || r.ContentType != "application/octet-stream" {
			t.Errorf("attributes: %+v", r)
		}
	})

	t.Run("structured, sync", func(t *testing.T) {
		id, h := event("application/cloudevents+json; charset=utf-8")
		for _, k := range []string{"Ce-Specversion", "Ce-Id", "Ce-Source", "Ce-Type"} {
			delete(h, k)
		}
		body := fmt.Appendf(nil, `{"specversion":"1.0","id":%q,"source":"/e2e/path","type":"e2e.structured","data":{"n":1}}`, id)
		if a := forward(ctx, t, s.URL+"/structured", h, body); a.Status != http.StatusOK {
			t.Fatalf("got %d %q", a.Status, a.reason())
		}
		arrivedOnce(t, id, body)
	})

	t.Run("reply event", func(t *testing.T) {
		id, h := event("application/json")
		body := []byte(`{"reply":"please"}`)
		a := forward(ctx, t, s.URL+"/reply?reply=1", h, body)
		if a.Status != http.StatusOK || a.Header.Get("Ce-Id") != "reply-"+id || a.Header.Get("Ce-Type") != "e2e.reply" || !bytes.Equal(a.Body, body) {
			t.Fatalf("got %d, Ce-Id %q, Ce-Type %q, body %q", a.Status, a.Header.Get("Ce-Id"), a.Header.Get("Ce-Type"), a.Body)
		}
	})

	t.Run("async", func(t *testing.T) {
		id, h := event("application/json")
		h["Prefer"] = "respond-async"
		body := []byte(`{"async":true}`)
		if a := forward(ctx, t, s.URL+"/async?hold=2s", h, body); a.Status != http.StatusAccepted {
			t.Fatalf("got %d %q %s, want 202", a.Status, a.reason(), a.Body)
		}
		arrivedOnce(t, id, body)
	})

	t.Run("the destination's own error passes unchanged", func(t *testing.T) {
		id, h := event("application/json")
		a := forward(ctx, t, s.URL+"/error?status=503", h, []byte(`{}`))
		if a.Status != http.StatusServiceUnavailable || a.reason() != "" {
			t.Fatalf("got %d %q, want the sink's 503 without Kn-Forward-Error", a.Status, a.reason())
		}
		arrivedOnce(t, id, []byte(`{}`))
	})

	t.Run("refusals reach the caller unchanged", func(t *testing.T) {
		tests := []struct {
			name        string
			destination string
			headers     map[string]string
			status      int
			reason      string
		}{
			{name: "no destination", headers: map[string]string{"Kn-Forward-To": ""}, status: 400, reason: "missing_destination"},
			{name: "not http", destination: "ftp://e2esink." + ns + ".svc.cluster.local/", status: 400, reason: "bad_destination"},
			{name: "not on the allow-list", destination: "http://example.com/", status: 403, reason: "destination_denied"},
			{name: "no token", destination: s.URL, headers: map[string]string{"Kn-Forward-Authorization": ""}, status: 401, reason: "unauthenticated"},
			{name: "a bad token", destination: s.URL, headers: map[string]string{"Kn-Forward-Authorization": "Bearer e30.e30.e30"}, status: 401, reason: "unauthenticated"},
		}
		for _, tc := range tests {
			t.Run(tc.name, func(t *testing.T) {
				_, h := event("application/json")
				for k, v := range tc.headers {
					h[k] = v
				}
				checkRefusal(t, forward(ctx, t, tc.destination, h, []byte(`{}`)), tc.status, tc.reason)
			})
		}
	})

	t.Run("the proxy's own timeout", func(t *testing.T) {
		id, h := event("application/json")
		h["Kn-Forward-Timeout"] = "PT3S"
		checkRefusal(t, forward(ctx, t, s.URL+"/slow?hold=60s", h, []byte(`{}`)), http.StatusGatewayTimeout, "timeout")
		var got []record
		eventually(t, 30*time.Second, 500*time.Millisecond, func() string { return fmt.Sprintf("%s at the sink: %+v", id, got) }, func() bool {
			got = byID(s.records(ctx, t), id)
			return len(got) == 1 && got[0].Outcome == "canceled"
		})
	})
}
