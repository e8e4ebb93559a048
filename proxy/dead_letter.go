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
	"encoding/base64"
	"encoding/json"
	"mime"
	"net/http"
	"net/url"
	"strconv"

	"knative.dev/event-forwarding-proxy/delivery"
)

// Knative's error extensions, as eventing's dispatcher writes them on an
// event it sends to a dead-letter sink (knative.dev/eventing
// pkg/kncloudevents/attributes).
const (
	extErrorDest = "knativeerrordest"
	extErrorCode = "knativeerrorcode"
	extErrorData = "knativeerrordata"
	// errorDataBytes is as much of the last answer's body as
	// knativeerrordata carries: 1,024 characters of base64, eventing's
	// bound.
	errorDataBytes = 768
)

// deadLetter is where an async event goes once its destination failed for
// the last time (Kn-Forward-Dead-Letter-To), and, once it is on its way
// there, why the destination failed.
type deadLetter struct {
	url     *url.URL
	sending bool   // the event is the dead-letter sink's now
	cause   string // the destination's last failure, for the log
}

// newDeadLetter is the dead-letter sink of a call with header h, or nil.
// The destination handler checked it already (checkDeadLetter).
func newDeadLetter(h http.Header) *deadLetter {
	values := h.Values(delivery.HeaderForwardDeadLetterTo)
	if len(values) == 0 {
		return nil
	}
	u, err := parseDestination(values)
	if err != nil {
		return nil
	}
	return &deadLetter{url: u}
}

// errorData is what knativeerrordata says of a failure: the start of the
// destination's answer, or, with no answer, eventing's "dispatch error:"
// and the error.
func errorData(head []byte, err error) string {
	if head == nil && err != nil {
		head = []byte("dispatch error: " + err.Error())
	}
	return base64.StdEncoding.EncodeToString(head[:min(len(head), errorDataBytes)])
}

// deadLetterEvent returns the event of header h and body as its
// dead-letter sink gets it: with Knative's error extensions, in the JSON
// of a structured CloudEvent or as Ce- headers of a binary one (or of any
// other body), and without the caller's Authorization, its credential for
// the destination, not for the sink. h is not modified.
func deadLetterEvent(h http.Header, body []byte, dest string, code int, data string) (http.Header, []byte) {
	h = h.Clone()
	h.Del("Authorization")
	if mt, _, err := mime.ParseMediaType(h.Get("Content-Type")); err == nil && mt == "application/cloudevents+json" {
		var ev map[string]json.RawMessage
		if json.Unmarshal(body, &ev) == nil && ev != nil {
			ev[extErrorDest], _ = json.Marshal(dest)
			ev[extErrorCode], _ = json.Marshal(code)
			ev[extErrorData], _ = json.Marshal(data)
			if b, err := json.Marshal(ev); err == nil {
				return h, b
			}
		}
	}
	h.Set("Ce-"+extErrorDest, dest)
	h.Set("Ce-"+extErrorCode, strconv.Itoa(code))
	h.Set("Ce-"+extErrorData, data)
	return h, body
}
