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

// Package eventingtest checks, in tests, what this module writes against
// what Knative Eventing's own code writes for the same case.
package eventingtest

import (
	"bytes"
	"context"
	"encoding/base64"
	"io"
	"net/http"
	"net/url"
	"testing"

	"github.com/cloudevents/sdk-go/v2/binding"
	cehttp "github.com/cloudevents/sdk-go/v2/protocol/http"
	"github.com/cloudevents/sdk-go/v2/types"

	"knative.dev/eventing/pkg/kncloudevents/attributes"
)

// WantErrorExtensions checks that the event a dead-letter sink got
// (gotHeader, gotBody) is the one sent (header, body) with the error
// extensions eventing's dispatcher writes for a failure of dest that
// answered code with data (its body's start, or the dispatch error).
func WantErrorExtensions(t testing.TB, gotHeader http.Header, gotBody []byte, header http.Header, body []byte, dest string, code int, data []byte) {
	t.Helper()
	ctx := context.Background()
	u, err := url.Parse(dest)
	if err != nil {
		t.Fatal(err)
	}
	want, err := binding.ToEvent(ctx, cehttp.NewMessage(header, io.NopCloser(bytes.NewReader(body))),
		attributes.KnativeErrorTransformers(*u, code, base64.StdEncoding.EncodeToString(data))...)
	if err != nil {
		t.Fatalf("eventing's transformers on the event sent: %v", err)
	}
	ev, err := binding.ToEvent(ctx, cehttp.NewMessage(gotHeader, io.NopCloser(bytes.NewReader(gotBody))))
	if err != nil {
		t.Fatalf("the dead-letter sink got no CloudEvent: %v (%v %q)", err, gotHeader, gotBody)
	}
	for _, k := range []string{"knativeerrordest", "knativeerrorcode", "knativeerrordata"} {
		gv, gok := ev.Extensions()[k]
		wv, wok := want.Extensions()[k]
		g, _ := types.Format(gv)
		w, _ := types.Format(wv)
		if g != w || gok != wok || (k != "knativeerrordata" && g == "") {
			t.Errorf("%s = %q (set: %v), want eventing's %q (set: %v)", k, g, gok, w, wok)
		}
	}
	if ev.ID() != want.ID() || ev.Source() != want.Source() || ev.Type() != want.Type() || !bytes.Equal(ev.Data(), want.Data()) {
		t.Errorf("the dead-letter sink got %v, want %v", ev, want)
	}
}
