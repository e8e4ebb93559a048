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

package h2server

import (
	"errors"
	"net/http"
	"net/textproto"
	"net/url"
	"strconv"
	"strings"

	"golang.org/x/net/http/httpguts"

	"knative.dev/event-forwarding-proxy/internal/h2conn"
)

var errMalformed = errors.New("h2server: malformed request")

// newRequest makes the http.Request of a HEADERS frame that opens st, as
// RFC 9113 8.3.1 wants it: the pseudo-headers a request needs, no
// connection-specific field, a content-length that is a number.
func (c *conn) newRequest(st *stream, f *h2conn.HeaderBlock) (*http.Request, error) {
	method := f.PseudoValue("method")
	path := f.PseudoValue("path")
	scheme := f.PseudoValue("scheme")
	authority := f.PseudoValue("authority")
	if method == "" || f.PseudoValue("protocol") != "" || !httpguts.ValidHostHeader(authority) {
		return nil, errMalformed
	}
	var u *url.URL
	var err error
	switch {
	case method == http.MethodConnect:
		if path != "" || scheme != "" || authority == "" {
			return nil, errMalformed
		}
		u = &url.URL{Host: authority}
		path = authority
	case path == "" || scheme == "":
		return nil, errMalformed
	case method == http.MethodOptions && path == "*":
		u = &url.URL{Path: "*"}
	case path[0] != '/':
		return nil, errMalformed
	default:
		if u, err = url.ParseRequestURI(path); err != nil {
			return nil, errMalformed
		}
	}

	fields := f.RegularFields()
	h := make(http.Header, len(fields))
	values := make([]string, 0, len(fields)) // one array for every value
	var cookies []string
	for _, hf := range fields {
		switch hf.Name {
		case "connection", "proxy-connection", "keep-alive", "transfer-encoding", "upgrade":
			return nil, errMalformed
		case "te":
			if hf.Value != "trailers" {
				return nil, errMalformed
			}
		case "cookie":
			cookies = append(cookies, hf.Value) // joined below (RFC 9113 8.2.3)
			continue
		}
		k := canonicalKey(hf.Name)
		if vv := h[k]; vv != nil {
			h[k] = append(vv, hf.Value)
			continue
		}
		values = append(values, hf.Value)
		h[k] = values[len(values)-1 : len(values) : len(values)]
	}
	if len(cookies) > 0 {
		h["Cookie"] = []string{strings.Join(cookies, "; ")}
	}
	if authority == "" {
		authority = h.Get("Host")
	}
	delete(h, "Host")

	st.declared = -1
	length := int64(-1)
	if vv := h["Content-Length"]; len(vv) > 0 {
		n, err := strconv.ParseUint(vv[0], 10, 63)
		for _, v := range vv[1:] {
			if v != vv[0] {
				err = errMalformed
			}
		}
		if err != nil || f.StreamEnded() && n != 0 {
			return nil, errMalformed
		}
		length = int64(n)
		st.declared = length
	}
	if f.StreamEnded() {
		length = 0
	}
	st.continued = length == 0
	st.rw.head = method == http.MethodHead
	if vv := h["Expect"]; len(vv) == 1 && strings.EqualFold(vv[0], "100-continue") {
		st.rw.expectContinue = true
	}
	var trailer http.Header
	for _, v := range h["Trailer"] {
		for _, k := range strings.Split(v, ",") {
			k = textproto.CanonicalMIMEHeaderKey(textproto.TrimString(k))
			if httpguts.ValidTrailerHeader(k) {
				if trailer == nil {
					trailer = make(http.Header)
				}
				trailer[k] = nil
			}
		}
	}

	r := &http.Request{
		Method:        method,
		URL:           u,
		Proto:         "HTTP/2.0",
		ProtoMajor:    2,
		Header:        h,
		ContentLength: length,
		Host:          authority,
		RemoteAddr:    c.remote,
		RequestURI:    path,
		Trailer:       trailer,
		Body:          http.NoBody,
	}
	if length != 0 {
		r.Body = (*requestBody)(st)
	}
	return r.WithContext((*requestContext)(st)), nil
}

// canonicalKey is the canonical form of a lower-case field name, without
// an allocation for the fields events usually carry.
func canonicalKey(name string) string {
	if k, ok := commonKeys[name]; ok {
		return k
	}
	return textproto.CanonicalMIMEHeaderKey(name)
}

var commonKeys = func() map[string]string {
	m := make(map[string]string)
	for _, k := range []string{
		"Accept", "Accept-Encoding", "Authorization", "Content-Encoding", "Content-Length",
		"Content-Type", "Date", "Expect", "Host", "Prefer", "Te", "Trailer", "Traceparent", "Tracestate",
		"Baggage", "User-Agent", "Ce-Id", "Ce-Source", "Ce-Type", "Ce-Specversion", "Ce-Subject",
		"Ce-Time", "Ce-Dataschema", "Kn-Forward-To", "Kn-Forward-Timeout", "Kn-Forward-Retry",
		"Kn-Forward-Backoff-Delay", "Kn-Forward-Authorization", "Kn-Namespace", "X-Request-Id",
	} {
		m[strings.ToLower(k)] = k
	}
	return m
}()
