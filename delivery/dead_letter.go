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

package delivery

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"mime"
	"net/http"
	"strconv"
)

// Knative's error extensions, as eventing's dispatcher writes them on an
// event it sends to a dead-letter sink (knative.dev/eventing
// pkg/kncloudevents/attributes).
const (
	ExtensionErrorDest = "knativeerrordest"
	ExtensionErrorCode = "knativeerrorcode"
	ExtensionErrorData = "knativeerrordata"
	// ErrorDataBytes is as much of the last answer's body as
	// knativeerrordata carries: 1,024 characters of base64, eventing's
	// bound.
	ErrorDataBytes = 768
)

// DeadLetterCode is knativeerrorcode for a last attempt that ended with
// status: the status, or 500, eventing's code, when no answer came.
func DeadLetterCode(status int) int {
	if status == 0 {
		return http.StatusInternalServerError
	}
	return status
}

// ErrorData is what knativeerrordata says of a failure: the start of the
// destination's answer (head), or, with no answer (status 0), eventing's
// "dispatch error:" and the error.
func ErrorData(status int, head []byte, err error) string {
	if status == 0 {
		head = nil
		if err != nil {
			head = []byte("dispatch error: " + err.Error())
		}
	}
	return base64.StdEncoding.EncodeToString(head[:min(len(head), ErrorDataBytes)])
}

// DeadLetterEvent returns the event of header h and body as its
// dead-letter sink gets it: with Knative's error extensions, in the JSON
// of a structured CloudEvent or as Ce- headers of a binary one (or of any
// other body), and without the sender's Authorization, its credential for
// the destination, not for the sink. h is not modified.
func DeadLetterEvent(h http.Header, body []byte, dest string, code int, data string) (http.Header, []byte) {
	h = h.Clone()
	h.Del("Authorization")
	if mt, _, err := mime.ParseMediaType(h.Get("Content-Type")); err == nil && mt == "application/cloudevents+json" {
		var ev map[string]json.RawMessage
		if json.Unmarshal(body, &ev) == nil && ev != nil {
			ev[ExtensionErrorDest], _ = json.Marshal(dest)
			ev[ExtensionErrorCode], _ = json.Marshal(code)
			ev[ExtensionErrorData], _ = json.Marshal(data)
			if b, err := json.Marshal(ev); err == nil {
				return h, b
			}
		}
	}
	h.Set("Ce-"+ExtensionErrorDest, dest)
	h.Set("Ce-"+ExtensionErrorCode, strconv.Itoa(code))
	h.Set("Ce-"+ExtensionErrorData, data)
	return h, body
}

// FailureReasons are the values FailureReason returns: a metric label's
// whole, bounded set.
var FailureReasons = []string{"3xx", "4xx", "5xx", "timeout", "unreachable", "denied"}

// FailureReason says, for a metric label, why a delivery's last attempt
// failed: the class of its answer's status, or with no answer (status 0)
// timeout, unreachable, or denied when the destination policy refused the
// address. err wraps context.DeadlineExceeded when the call timed out.
func FailureReason(status int, err error) string {
	switch {
	case status >= 500:
		return "5xx"
	case status >= 400:
		return "4xx"
	case status > 0:
		return "3xx"
	case errors.Is(err, ErrDestinationDenied):
		return "denied"
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	}
	return "unreachable"
}
