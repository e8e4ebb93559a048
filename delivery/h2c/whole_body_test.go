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

package h2c

import (
	"bytes"
	"io"
	"net/http"
	"testing"
)

// bytesBody is a body with all its bytes at hand (wholeBody).
type bytesBody struct {
	*bytes.Reader
	b []byte
}

func (b bytesBody) Close() error  { return nil }
func (b bytesBody) Bytes() []byte { return b.b }

// TestWholeBodyNotCopied: a small body that has its bytes at hand goes
// out from them; one whose bytes are not its declared length is read.
func TestWholeBodyNotCopied(t *testing.T) {
	event := []byte(`{"id":"1"}`)
	tests := []struct {
		name     string
		body     io.ReadCloser
		length   int64
		wantSame bool
	}{
		{name: "whole body", body: bytesBody{bytes.NewReader(event), event}, length: int64(len(event)), wantSame: true},
		{name: "bytes not its length", body: bytesBody{bytes.NewReader(event), event[:3]}, length: int64(len(event))},
		{name: "plain body", body: io.NopCloser(bytes.NewReader(event)), length: int64(len(event))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, err := http.NewRequest(http.MethodPost, "http://example.com/", nil)
			if err != nil {
				t.Fatal(err)
			}
			req.Body, req.ContentLength = tt.body, tt.length
			o, err := newOutgoing(req)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(o.data, event) || o.body != nil {
				t.Fatalf("data %q, body %v: want the event read ahead", o.data, o.body)
			}
			if same := &o.data[0] == &event[0]; same != tt.wantSame {
				t.Errorf("sent from the body's own bytes: %t, want %t", same, tt.wantSame)
			}
		})
	}
}
