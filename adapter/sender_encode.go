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

package adapter

import (
	"bytes"
	"context"
	"io"
	"net/http"

	"github.com/cloudevents/sdk-go/v2/binding"
	"github.com/cloudevents/sdk-go/v2/event"
	cehttp "github.com/cloudevents/sdk-go/v2/protocol/http"
)

// encoded is an event written once in HTTP binary mode, replayed by every
// attempt on either route.
type encoded struct {
	header http.Header
	body   []byte
}

// encode writes e with the SDK's HTTP binding in binary mode: attributes in
// Ce-* headers, data as the body.
func encode(ctx context.Context, e *event.Event) (*encoded, error) {
	req := &http.Request{Header: make(http.Header, 8)}
	if err := cehttp.WriteRequest(binding.WithForceBinary(ctx), binding.ToMessage(e), req); err != nil {
		return nil, err
	}
	m := &encoded{header: req.Header}
	if req.Body != nil && req.Body != http.NoBody {
		b, err := io.ReadAll(req.Body)
		if err != nil {
			return nil, err
		}
		m.body = b
	}
	return m, nil
}

// request builds one attempt's POST to u, under ctx, with the event's
// headers (cloned: the attempt adds its own) and body.
func (m *encoded) request(ctx context.Context, u string) (*http.Request, error) {
	var body io.Reader = http.NoBody
	if len(m.body) > 0 {
		body = bytes.NewReader(m.body)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, body)
	if err != nil {
		return nil, err
	}
	for k, v := range m.header {
		req.Header[k] = append([]string(nil), v...)
	}
	return req, nil
}

// Reply decodes the event a Sync send's answer carries, in binary or
// structured mode; nil when the answer carries none.
func (r *Result) Reply(ctx context.Context) (*event.Event, error) {
	if r.Header == nil {
		return nil, nil
	}
	msg := cehttp.NewMessage(r.Header, io.NopCloser(bytes.NewReader(r.Body)))
	defer func() { _ = msg.Finish(nil) }() // a message over a byte slice: nothing to release
	if msg.ReadEncoding() == binding.EncodingUnknown {
		return nil, nil
	}
	return binding.ToEvent(ctx, msg)
}
