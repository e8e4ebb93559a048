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
	"net/http"
	"net/http/httptest"
	"runtime"
	"testing"
	"unsafe"
	"weak"

	"go.uber.org/zap"
)

// detachedRecorder is a ResponseWriter whose stream can outlive its
// handler, as h2server's does.
type detachedRecorder struct {
	*httptest.ResponseRecorder
	ended bool
}

func (d *detachedRecorder) Detach() func(p any) { return func(any) { d.ended = true } }

// TestDeliveringCallKeepsNoStream: once the chain of an HTTP/2 request
// whose call goes on in the background (async) has returned, the call no
// longer keeps the observation, nor through it the server's stream.
func TestDeliveringCallKeepsNoStream(t *testing.T) {
	kept, stream := serveDelivering(t)
	runtime.GC()
	if kept.held != nil || stream.Value() != nil {
		t.Error("the delivering call still keeps its request's stream")
	}
	runtime.KeepAlive(kept)
}

// serveDelivering serves one HTTP/2-like request whose call goes on in
// the background, and returns the call and its writer, weakly held.
func serveDelivering(t *testing.T) (*call, weak.Pointer[detachedRecorder]) {
	var kept *call
	next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		kept = callOf(w, r)
		kept.leave(delivering)
		w.WriteHeader(http.StatusAccepted)
	})
	h := NewObserveHandler(nil, nil, zap.NewNop().Sugar(), 0, next)
	w := &detachedRecorder{ResponseRecorder: httptest.NewRecorder()}
	h.ServeHTTP(w, httptest.NewRequest(http.MethodPost, "/", nil))
	if !w.ended || w.Code != http.StatusAccepted {
		t.Fatalf("ended %t, status %d: want the request ended with 202", w.ended, w.Code)
	}
	return kept, weak.Make(w)
}

// TestHeldRecordsFitTheirSizeClass: the records a held call keeps for
// minutes stay within the allocation size they were trimmed to; a field
// that breaks this costs every held call the next size class.
func TestHeldRecordsFitTheirSizeClass(t *testing.T) {
	tests := []struct {
		name      string
		size, max uintptr
	}{
		{name: "call", size: unsafe.Sizeof(call{}), max: 256},
		{name: "observation", size: unsafe.Sizeof(observation{}), max: 128},
		{name: "async job", size: unsafe.Sizeof(job{}), max: 176},
	}
	for _, tt := range tests {
		if tt.size > tt.max {
			t.Errorf("%s is %d bytes, more than %d", tt.name, tt.size, tt.max)
		}
	}
}
