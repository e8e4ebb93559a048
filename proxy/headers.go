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

	"knative.dev/event-forwarding-proxy/delivery"
)

// headerCDNLoop is RFC 8586's loop-detection header: every proxy appends its
// identity, and refuses a request that already carries it.
const headerCDNLoop = "CDN-Loop"

// hopByHop are the headers that describe one connection, never forwarded
// (RFC 9110 section 7.6.1, plus the legacy Proxy-Connection and Keep-Alive).
var hopByHop = []string{
	"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate",
	"Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade",
}

// removeHopByHop deletes the hop-by-hop headers of h and every header the
// Connection header lists.
func removeHopByHop(h http.Header) {
	for _, v := range h["Connection"] {
		for f := range strings.SplitSeq(v, ",") {
			if f = strings.TrimSpace(f); f != "" {
				h.Del(f)
			}
		}
	}
	for _, k := range hopByHop {
		h.Del(k)
	}
}

// removeForwardHeaders deletes every Kn-Forward-* header: they are
// instructions to this proxy (and a token meant for it), never for the
// destination.
func removeForwardHeaders(h http.Header) {
	for k := range h {
		if len(k) >= len(delivery.HeaderForwardPrefix) &&
			strings.EqualFold(k[:len(delivery.HeaderForwardPrefix)], delivery.HeaderForwardPrefix) {
			delete(h, k)
		}
	}
}

// withoutRespondAsync removes the respond-async preference, which was meant
// for this proxy, from the Prefer headers and keeps every other preference.
func withoutRespondAsync(h http.Header) {
	vals := h.Values(delivery.HeaderPrefer)
	if len(vals) == 0 {
		return
	}
	var kept []string
	for _, v := range vals {
		for pref := range strings.SplitSeq(v, ",") {
			tok, _, _ := strings.Cut(pref, ";")
			tok, _, _ = strings.Cut(tok, "=")
			if !strings.EqualFold(strings.TrimSpace(tok), delivery.PreferRespondAsync) && strings.TrimSpace(pref) != "" {
				kept = append(kept, strings.TrimSpace(pref))
			}
		}
	}
	if len(kept) == 0 {
		h.Del(delivery.HeaderPrefer)
		return
	}
	h.Set(delivery.HeaderPrefer, strings.Join(kept, ", "))
}

// hasLoopMark reports whether h carries id in a CDN-Loop entry.
func hasLoopMark(h http.Header, id string) bool {
	for _, v := range h.Values(headerCDNLoop) {
		for entry := range strings.SplitSeq(v, ",") {
			name, _, _ := strings.Cut(entry, ";")
			if strings.EqualFold(strings.TrimSpace(name), id) {
				return true
			}
		}
	}
	return false
}
