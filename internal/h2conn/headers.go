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
	"errors"
	"fmt"
	"slices"

	"golang.org/x/net/http/httpguts"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// HeaderBlock is one decoded header block: a request's, an answer's, or
// trailers. Its Fields belong to the HeaderReader and are reused by the
// next block: whatever outlives the frame's handling is copied.
type HeaderBlock struct {
	StreamID    uint32
	endStream   bool
	hasPriority bool
	Priority    http2.PriorityParam
	// Fields are the pseudo-header fields, then the regular ones.
	Fields []hpack.HeaderField
	// Truncated: the list went past the limit; the fields after it were
	// decoded (HPACK's state stays in step) but dropped.
	Truncated bool
}

func (b *HeaderBlock) StreamEnded() bool { return b.endStream }
func (b *HeaderBlock) HasPriority() bool { return b.hasPriority }

// PseudoValue is the value of the pseudo-header :name, or "".
func (b *HeaderBlock) PseudoValue(name string) string {
	for _, hf := range b.PseudoFields() {
		if hf.Name[1:] == name {
			return hf.Value
		}
	}
	return ""
}

func (b *HeaderBlock) PseudoFields() []hpack.HeaderField {
	for i, hf := range b.Fields {
		if !hf.IsPseudo() {
			return b.Fields[:i]
		}
	}
	return b.Fields
}

func (b *HeaderBlock) RegularFields() []hpack.HeaderField {
	return b.Fields[len(b.PseudoFields()):]
}

// The pseudo-headers each end may receive (RFC 9113 8.3).
var (
	RequestPseudoHeaders  = []string{":method", ":path", ":scheme", ":authority", ":protocol"}
	ResponsePseudoHeaders = []string{":status"}
)

// HeaderReader decodes the header blocks of one connection's read loop,
// as x/net/http2's Framer does with ReadMetaHeaders, with its checks and
// bounds, but into one slice of fields kept for the connection's next
// block and with one emit function for the connection: a block costs no
// frame record, no closures and no slice grown field by field (1.4 KB of
// garbage for an event's request otherwise, BenchmarkHeaderBlock).
type HeaderReader struct {
	// Block is the block the last Read decoded.
	Block HeaderBlock

	fr     *http2.Framer
	dec    *hpack.Decoder
	limit  uint32 // the header list's size bound (RFC 9113 6.5.2)
	pseudo []string

	remain  uint32
	regular bool  // a regular field was seen: no pseudo-header may follow
	invalid error // the first field that breaks RFC 9113 8.2 or 8.3
}

// keptFields bounds the field slice a connection keeps between blocks: a
// peer that sent one huge list does not pin its slice.
const keptFields = 64

// NewHeaderReader reads the header blocks of what fr reads, each bounded
// to limit bytes (as SETTINGS_MAX_HEADER_LIST_SIZE counts them), with the
// pseudo-headers given.
func NewHeaderReader(fr *http2.Framer, limit uint32, pseudo []string) *HeaderReader {
	r := &HeaderReader{fr: fr, limit: limit, pseudo: pseudo}
	r.dec = hpack.NewDecoder(4096, r.emit)
	r.dec.SetMaxStringLength(int(min(int64(limit), int64(^uint(0)>>1))))
	return r
}

// Limit is the bound of a header list, to announce in SETTINGS.
func (r *HeaderReader) Limit() uint32 { return r.limit }

func (r *HeaderReader) emit(hf hpack.HeaderField) {
	if !httpguts.ValidHeaderFieldValue(hf.Value) {
		// Not the value: it may be sensitive.
		r.invalid = fmt.Errorf("invalid value of header field %q", hf.Name)
	}
	if hf.IsPseudo() {
		if r.regular {
			r.invalid = errors.New("pseudo-header field after a regular one")
		}
	} else {
		r.regular = true
		if !validFieldName(hf.Name) {
			r.invalid = fmt.Errorf("invalid header field name %q", hf.Name)
		}
	}
	if r.invalid != nil {
		r.dec.SetEmitEnabled(false)
		return
	}
	size := hf.Size()
	if size > r.remain {
		r.dec.SetEmitEnabled(false)
		r.Block.Truncated = true
		r.remain = 0
		return
	}
	r.remain -= size
	r.Block.Fields = append(r.Block.Fields, hf)
}

// Read decodes into r.Block the header block hf starts, with the
// CONTINUATION frames that carry the rest of it (the Framer checks that
// nothing comes between them). The errors are the Framer's: a malformed
// list is a stream error; a block far past the limit, or continued past
// an invalid field, or HPACK that does not decode, ends the connection.
func (r *HeaderReader) Read(hf *http2.HeadersFrame) error {
	fields := r.Block.Fields[:0]
	if cap(fields) > keptFields {
		fields = nil
	}
	r.Block = HeaderBlock{
		StreamID: hf.StreamID, endStream: hf.StreamEnded(),
		hasPriority: hf.HasPriority(), Priority: hf.Priority,
		Fields: fields,
	}
	r.remain, r.regular, r.invalid = r.limit, false, nil
	r.dec.SetEmitEnabled(true)
	frag, ended := hf.HeaderBlockFragment(), hf.HeadersEnded()
	for {
		// Decoding a block that will be dropped costs work: twice what
		// the list may still take, or any fragment after an invalid
		// field, closes the connection, as x/net's Framer does against
		// CONTINUATION floods (CVE-2023-45288).
		if int64(len(frag)) > 2*int64(r.remain) || r.invalid != nil {
			return http2.ConnectionError(http2.ErrCodeProtocol)
		}
		if _, err := r.dec.Write(frag); err != nil {
			return http2.ConnectionError(http2.ErrCodeCompression)
		}
		if ended {
			break
		}
		f, err := r.fr.ReadFrame()
		if err != nil {
			return err
		}
		cf := f.(*http2.ContinuationFrame) // the Framer's frame order check
		frag, ended = cf.HeaderBlockFragment(), cf.HeadersEnded()
	}
	if err := r.dec.Close(); err != nil {
		return http2.ConnectionError(http2.ErrCodeCompression)
	}
	if r.invalid == nil {
		r.invalid = r.checkPseudos()
	}
	if r.invalid != nil {
		return http2.StreamError{StreamID: hf.StreamID, Code: http2.ErrCodeProtocol, Cause: r.invalid}
	}
	return nil
}

// Done drops the block's references to its strings once it was handled.
func (r *HeaderReader) Done() {
	clear(r.Block.Fields)
	r.Block.Fields = r.Block.Fields[:0]
}

// checkPseudos: only the pseudo-headers this end receives, each once.
func (r *HeaderReader) checkPseudos() error {
	pf := r.Block.PseudoFields()
	for i, hf := range pf {
		if !slices.Contains(r.pseudo, hf.Name) {
			return fmt.Errorf("invalid pseudo-header %q", hf.Name)
		}
		for _, prev := range pf[:i] {
			if prev.Name == hf.Name {
				return fmt.Errorf("duplicate pseudo-header %q", hf.Name)
			}
		}
	}
	return nil
}

// validFieldName: a token in lower case (RFC 9113 8.2.1).
func validFieldName(name string) bool {
	if name == "" {
		return false
	}
	for _, r := range name {
		if !httpguts.IsTokenRune(r) || 'A' <= r && r <= 'Z' {
			return false
		}
	}
	return true
}
