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
	"net/url"

	"knative.dev/event-forwarding-proxy/delivery"
)

// deadLetter is where an async event goes once its destination failed for
// the last time (Kn-Forward-Dead-Letter-To), and, once it is on its way
// there, why the destination failed.
type deadLetter struct {
	url     *url.URL
	sending bool   // the event is the dead-letter sink's now
	cause   string // the destination's last failure, for the log
	reason  string // the same, as delivery.FailureReason gives it
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
