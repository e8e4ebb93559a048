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
	"strings"
)

// NewRequestGuardHandler refuses, with 400 bad_request and before anything
// is read or dialed, the requests the proxy does not forward:
//   - CONNECT: the proxy forwards requests, it opens no tunnels;
//   - an upgrade (Connection: upgrade with an Upgrade header), which
//     httputil.ReverseProxy would otherwise turn into a raw tunnel past
//     every limit once the destination answers 101;
//   - a request the framing listener marked as ambiguously framed (see
//     NewFramingListener); the connection is then closed, since where the
//     next request starts is a matter of opinion.
func NewRequestGuardHandler(next http.Handler) http.Handler {
	return &requestGuardHandler{next: next}
}

type requestGuardHandler struct{ next http.Handler }

func (h *requestGuardHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !refused(w, r) {
		h.next.ServeHTTP(w, r)
	}
}

// refused answers r if the proxy does not forward it.
func refused(w http.ResponseWriter, r *http.Request) bool {
	switch {
	case r.Header.Get(headerFramingError) != "":
		w.Header().Set("Connection", "close")
		writeError(w, ReasonBadRequest, "ambiguous request framing: "+r.Header.Get(headerFramingError))
	case r.Method == http.MethodConnect:
		writeError(w, ReasonBadRequest, "CONNECT is not supported: the proxy forwards requests and opens no tunnels")
	case isUpgrade(r.Header):
		writeError(w, ReasonBadRequest, "protocol upgrades ("+r.Header.Get("Upgrade")+") are not forwarded")
	default:
		return false
	}
	return true
}

// isUpgrade reports whether h asks for a protocol upgrade, as
// httputil.ReverseProxy sees it: an Upgrade header and an "upgrade" token
// in Connection.
func isUpgrade(h http.Header) bool {
	if _, ok := h["Upgrade"]; !ok {
		return false
	}
	for _, v := range h["Connection"] {
		for tok := range strings.SplitSeq(v, ",") {
			if strings.EqualFold(strings.TrimSpace(tok), "upgrade") {
				return true
			}
		}
	}
	return false
}
