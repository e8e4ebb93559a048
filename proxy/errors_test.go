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
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// allReasons is every reason of the wire contract with its status.
var allReasons = []struct {
	reason Reason
	status int
}{
	{ReasonMissingDestination, http.StatusBadRequest},
	{ReasonBadDestination, http.StatusBadRequest},
	{ReasonBadRequest, http.StatusBadRequest},
	{ReasonUnauthenticated, http.StatusUnauthorized},
	{ReasonDestinationDenied, http.StatusForbidden},
	{ReasonLoopDetected, http.StatusForbidden},
	{ReasonBodyTooLarge, http.StatusRequestEntityTooLarge},
	{ReasonTenantLimited, http.StatusTooManyRequests},
	{ReasonOverloaded, http.StatusServiceUnavailable},
	{ReasonDestinationBusy, http.StatusServiceUnavailable},
	{ReasonDraining, http.StatusServiceUnavailable},
	{ReasonUnreachable, http.StatusBadGateway},
	{ReasonTimeout, http.StatusGatewayTimeout},
}

func TestReasonStatus(t *testing.T) {
	for _, tt := range allReasons {
		t.Run(string(tt.reason), func(t *testing.T) {
			if got := tt.reason.Status(); got != tt.status {
				t.Errorf("%s.Status() = %d, want %d", tt.reason, got, tt.status)
			}
		})
	}
	t.Run("unknown", func(t *testing.T) {
		if got := Reason("no_such_reason").Status(); got != http.StatusInternalServerError {
			t.Errorf("unknown reason status = %d, want 500", got)
		}
	})
}

// TestReasonNames pins the wire names, which callers outside the
// repository match on.
func TestReasonNames(t *testing.T) {
	got := make([]string, 0, len(allReasons))
	for _, r := range allReasons {
		got = append(got, string(r.reason))
	}
	want := []string{
		"missing_destination", "bad_destination", "bad_request", "unauthenticated",
		"destination_denied", "loop_detected", "body_too_large", "tenant_limited",
		"overloaded", "destination_busy", "draining", "unreachable", "timeout",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("reason names (-want +got):\n%s", diff)
	}
}

func TestWriteError(t *testing.T) {
	for _, tt := range allReasons {
		t.Run(string(tt.reason), func(t *testing.T) {
			rec := httptest.NewRecorder()
			msg := "why \"it\" failed\n<script>"
			writeError(rec, tt.reason, msg)

			if rec.Code != tt.status {
				t.Errorf("status = %d, want %d", rec.Code, tt.status)
			}
			h := rec.Result().Header
			if got := h.Get("Kn-Forward-Error"); got != string(tt.reason) {
				t.Errorf("Kn-Forward-Error = %q, want %q", got, tt.reason)
			}
			if got := h.Get("Content-Type"); got != "application/json" {
				t.Errorf("Content-Type = %q, want application/json", got)
			}
			if got, want := h.Get("Content-Length"), strconv.Itoa(rec.Body.Len()); got != want {
				t.Errorf("Content-Length = %q, body has %s bytes", got, want)
			}
			retryable := tt.status == http.StatusTooManyRequests || tt.status == http.StatusServiceUnavailable
			ra, hasRA := h["Retry-After"]
			switch {
			case retryable && (!hasRA || len(ra) != 1 || ra[0] != "1"):
				t.Errorf("Retry-After = %q, want [\"1\"] on %d", ra, tt.status)
			case !retryable && hasRA:
				t.Errorf("Retry-After = %q on %d, want none", ra, tt.status)
			}

			var body map[string]string
			if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
				t.Fatalf("body %q is not JSON: %v", rec.Body.String(), err)
			}
			want := map[string]string{"reason": string(tt.reason), "message": msg}
			if diff := cmp.Diff(want, body); diff != "" {
				t.Errorf("body (-want +got):\n%s", diff)
			}
		})
	}
}

func BenchmarkWriteError(b *testing.B) {
	w := &discardWriter{h: http.Header{}}
	b.ReportAllocs()
	for b.Loop() {
		clear(w.h)
		writeError(w, ReasonOverloaded, "the pod holds its maximum of calls")
	}
}

// discardWriter is a ResponseWriter that keeps nothing but its headers, so
// that BenchmarkWriteError measures writeError alone.
type discardWriter struct{ h http.Header }

func (w *discardWriter) Header() http.Header         { return w.h }
func (w *discardWriter) Write(b []byte) (int, error) { return len(b), nil }
func (w *discardWriter) WriteHeader(int)             {}

var _ http.ResponseWriter = (*discardWriter)(nil)
