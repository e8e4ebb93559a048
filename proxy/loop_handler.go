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

import "net/http"

// DefaultLoopID is the identity the proxy writes into CDN-Loop.
const DefaultLoopID = "knative-event-forwarding-proxy"

// NewLoopHandler refuses, before anything else, a request that already
// passed through this proxy (its identity is in CDN-Loop) with 403
// loop_detected: not 508, which Knative senders would retry forever.
func NewLoopHandler(id string, next http.Handler) http.Handler {
	return &loopHandler{id: id, next: next}
}

type loopHandler struct {
	id   string
	next http.Handler
}

func (h *loopHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if hasLoopMark(r.Header, h.id) {
		writeError(w, ReasonLoopDetected, "the request already passed through this proxy")
		return
	}
	h.next.ServeHTTP(w, r)
}
