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

package h2conn

import (
	"bytes"
	"fmt"
	"testing"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// eventRequest is the header list of an event forwarded to the proxy, as
// an adapter sends it.
var eventRequest = []string{
	":method", "POST", ":scheme", "http", ":path", "/", ":authority", "event-forwarding-proxy.knative-eventing.svc",
	"content-type", "application/json", "content-length", "17",
	"ce-specversion", "1.0", "ce-id", "a8b1c2d3-0b9f-4c8e-9d55-7f3e2a1b4c5d", "ce-source", "/apis/v1/namespaces/tenant/pingsources/p",
	"ce-type", "dev.knative.sources.ping", "ce-time", "2026-12-04T01:00:00Z",
	"kn-forward-to", "http://sink.tenant.svc.cluster.local/", "kn-namespace", "tenant",
	"traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
}

// headerFrames writes the HEADERS frames of n requests with fields, each
// encoded afresh (literals, as a connection's first request is).
func headerFrames(t testing.TB, n int, fields []string) []byte {
	t.Helper()
	var buf, block bytes.Buffer
	fr := http2.NewFramer(&buf, nil)
	for i := range n {
		block.Reset()
		enc := hpack.NewEncoder(&block)
		enc.SetMaxDynamicTableSizeLimit(0)
		for j := 0; j < len(fields); j += 2 {
			if err := enc.WriteField(hpack.HeaderField{Name: fields[j], Value: fields[j+1]}); err != nil {
				t.Fatal(err)
			}
		}
		if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: uint32(1 + 2*i), BlockFragment: block.Bytes(), EndStream: true, EndHeaders: true}); err != nil {
			t.Fatal(err)
		}
	}
	return buf.Bytes()
}

func readBlock(t testing.TB, fr *http2.Framer, r *HeaderReader) *HeaderBlock {
	t.Helper()
	f, err := fr.ReadFrame()
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Read(f.(*http2.HeadersFrame)); err != nil {
		t.Fatal(err)
	}
	return &r.Block
}

// TestHeaderReaderFields: a block's fields come in order, pseudo-headers
// first; the next block reuses the connection's field slice, unless a
// huge list grew it.
func TestHeaderReaderFields(t *testing.T) {
	many := append([]string(nil), eventRequest...)
	for i := range 2 * keptFields {
		many = append(many, fmt.Sprintf("x-f%03d", i), "v")
	}
	var frames []byte
	for _, fields := range [][]string{eventRequest, eventRequest, many, eventRequest} {
		frames = append(frames, headerFrames(t, 1, fields)...)
	}
	fr := http2.NewFramer(nil, bytes.NewReader(frames))
	r := NewHeaderReader(fr, 1<<20, RequestPseudoHeaders)

	b := readBlock(t, fr, r)
	if got, want := len(b.Fields), len(eventRequest)/2; got != want {
		t.Fatalf("%d fields, want %d", got, want)
	}
	for i, hf := range b.Fields {
		if hf.Name != eventRequest[2*i] || hf.Value != eventRequest[2*i+1] {
			t.Fatalf("field %d is %s: %s, want %s: %s", i, hf.Name, hf.Value, eventRequest[2*i], eventRequest[2*i+1])
		}
	}
	if got := b.PseudoValue("authority"); got != eventRequest[7] {
		t.Errorf(":authority %q, want %q", got, eventRequest[7])
	}
	if n := len(b.PseudoFields()); n != 4 {
		t.Errorf("%d pseudo-header fields, want 4", n)
	}
	if !b.StreamEnded() || b.StreamID != 1 {
		t.Errorf("stream %d ended %v, want stream 1 ended", b.StreamID, b.StreamEnded())
	}
	first := &b.Fields[0]
	r.Done()

	if b := readBlock(t, fr, r); &b.Fields[0] != first {
		t.Errorf("the second block got a new field slice")
	}
	r.Done()
	b = readBlock(t, fr, r)
	if len(b.RegularFields()) != len(many)/2-4 {
		t.Fatalf("%d regular fields, want %d", len(b.RegularFields()), len(many)/2-4)
	}
	huge := &b.Fields[0]
	r.Done()
	if b := readBlock(t, fr, r); cap(b.Fields) > keptFields || &b.Fields[0] == huge {
		t.Errorf("after a list of %d fields the next block has a slice for %d, want at most %d", len(many)/2, cap(b.Fields), keptFields)
	}
}

// BenchmarkHeaderBlock decodes an event request's header block with the
// connection's HeaderReader, and with x/net's Framer.ReadMetaHeaders.
func BenchmarkHeaderBlock(b *testing.B) {
	const perRound = 100
	frames := headerFrames(b, perRound, eventRequest)
	src := bytes.NewReader(frames)
	b.Run("HeaderReader", func(b *testing.B) {
		fr := http2.NewFramer(nil, src)
		r := NewHeaderReader(fr, 1<<20, RequestPseudoHeaders)
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			if i%perRound == 0 {
				src.Reset(frames)
			}
			readBlock(b, fr, r)
			r.Done()
		}
	})
	b.Run("x-net-ReadMetaHeaders", func(b *testing.B) {
		fr := http2.NewFramer(nil, src)
		fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
		fr.MaxHeaderListSize = 1 << 20
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			if i%perRound == 0 {
				src.Reset(frames)
			}
			if _, err := fr.ReadFrame(); err != nil {
				b.Fatal(err)
			}
		}
	})
}
