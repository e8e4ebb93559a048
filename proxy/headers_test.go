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
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestPrefersAsync(t *testing.T) {
	tests := []struct {
		name   string
		prefer []string
		want   bool
	}{
		{name: "absent", want: false},
		{name: "alone", prefer: []string{"respond-async"}, want: true},
		{name: "case-insensitive", prefer: []string{"Respond-Async"}, want: true},
		{name: "in a list", prefer: []string{"return=minimal, respond-async"}, want: true},
		{name: "with parameters", prefer: []string{"respond-async; foo=bar"}, want: true},
		{name: "with a value", prefer: []string{"respond-async=1"}, want: true},
		{name: "in a second header line", prefer: []string{"wait=10", " respond-async "}, want: true},
		{name: "other preferences", prefer: []string{"return=minimal, wait=10"}, want: false},
		{name: "longer token", prefer: []string{"respond-asynchronously"}, want: false},
		{name: "as a parameter of another preference", prefer: []string{"wait=10; respond-async"}, want: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := http.Header{}
			for _, v := range tt.prefer {
				h.Add("Prefer", v)
			}
			if got := prefersAsync(h); got != tt.want {
				t.Errorf("prefersAsync(%q) = %v, want %v", tt.prefer, got, tt.want)
			}
		})
	}
}

func TestWithoutRespondAsync(t *testing.T) {
	tests := []struct {
		name   string
		prefer []string
		want   []string // Prefer values afterwards; nil means absent
	}{
		{name: "absent", prefer: nil, want: nil},
		{name: "only respond-async", prefer: []string{"respond-async"}, want: nil},
		{name: "respond-async with parameters", prefer: []string{"Respond-Async; x=1"}, want: nil},
		{name: "others kept", prefer: []string{"respond-async, return=minimal"}, want: []string{"return=minimal"}},
		{name: "parameters of others kept", prefer: []string{"return=minimal; foo=\"bar\", respond-async, wait=10"}, want: []string{"return=minimal; foo=\"bar\", wait=10"}},
		{name: "several lines joined", prefer: []string{"respond-async", "wait=5", "handling=lenient"}, want: []string{"wait=5, handling=lenient"}},
		{name: "no respond-async: unchanged content", prefer: []string{"wait=5"}, want: []string{"wait=5"}},
		{name: "empty elements dropped", prefer: []string{"respond-async,, ,wait=5"}, want: []string{"wait=5"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := http.Header{"Other": {"kept"}}
			for _, v := range tt.prefer {
				h.Add("Prefer", v)
			}
			withoutRespondAsync(h)
			if diff := cmp.Diff(tt.want, h.Values("Prefer")); diff != "" {
				t.Errorf("Prefer after withoutRespondAsync(%q) (-want +got):\n%s", tt.prefer, diff)
			}
			if _, ok := h["Prefer"]; ok == (tt.want == nil) {
				t.Errorf("Prefer present = %v, want %v", ok, tt.want != nil)
			}
			if h.Get("Other") != "kept" {
				t.Error("another header was touched")
			}
		})
	}
}

func TestRemoveHopByHop(t *testing.T) {
	tests := []struct {
		name string
		in   http.Header
		want http.Header
	}{{
		name: "standard hop-by-hop headers",
		in: http.Header{
			"Connection": {"keep-alive"}, "Proxy-Connection": {"keep-alive"}, "Keep-Alive": {"timeout=5"},
			"Proxy-Authenticate": {"Basic"}, "Proxy-Authorization": {"Basic eA=="}, "Te": {"trailers"},
			"Trailer": {"X-Sum"}, "Transfer-Encoding": {"chunked"}, "Upgrade": {"h2c"},
			"Content-Type": {"application/json"}, "Authorization": {"Bearer t"},
		},
		want: http.Header{"Content-Type": {"application/json"}, "Authorization": {"Bearer t"}},
	}, {
		name: "headers the Connection header lists",
		in: http.Header{
			"Connection": {"X-Hop, x-other-hop", " close ,, X-Third "},
			"X-Hop":      {"1"}, "X-Other-Hop": {"2"}, "X-Third": {"3"},
			"Ce-Id": {"e1"}, "X-End-To-End": {"kept"},
		},
		want: http.Header{"Ce-Id": {"e1"}, "X-End-To-End": {"kept"}},
	}, {
		name: "nothing to remove",
		in:   http.Header{"Ce-Id": {"e1"}},
		want: http.Header{"Ce-Id": {"e1"}},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			removeHopByHop(tt.in)
			if diff := cmp.Diff(tt.want, tt.in); diff != "" {
				t.Errorf("removeHopByHop (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRemoveForwardHeaders(t *testing.T) {
	in := http.Header{
		"Kn-Forward-To":            {"http://a.ns.svc/"},
		"Kn-Forward-Timeout":       {"PT1S"},
		"Kn-Forward-Authorization": {"Bearer proxy-token"},
		"kn-forward-retry":         {"3"}, // non-canonical keys, as a map literal or h2 may leave them
		"KN-FORWARD-BACKOFF-DELAY": {"PT1S"},
		"kN-fOrWaRd-x":             {"y"},
		"Kn-Forward-":              {"bare prefix"},
		"Kn-Forwarded-For":         {"kept: not the prefix"},
		"Kn-Namespace":             {"kept"},
		"Authorization":            {"Bearer destination-token"},
		"X-Kn-Forward-To":          {"kept: prefix not at the start"},
	}
	removeForwardHeaders(in)
	want := http.Header{
		"Kn-Forwarded-For": {"kept: not the prefix"},
		"Kn-Namespace":     {"kept"},
		"Authorization":    {"Bearer destination-token"},
		"X-Kn-Forward-To":  {"kept: prefix not at the start"},
	}
	if diff := cmp.Diff(want, in); diff != "" {
		t.Errorf("removeForwardHeaders (-want +got):\n%s", diff)
	}
}

func TestHasLoopMark(t *testing.T) {
	tests := []struct {
		name    string
		cdnLoop []string
		want    bool
	}{
		{name: "absent", want: false},
		{name: "alone", cdnLoop: []string{DefaultLoopID}, want: true},
		{name: "case-insensitive", cdnLoop: []string{"Knative-Event-Forwarding-Proxy"}, want: true},
		{name: "in a list with parameters", cdnLoop: []string{"cdn-a; v=1, knative-event-forwarding-proxy; pod=x, cdn-b"}, want: true},
		{name: "in a second header line", cdnLoop: []string{"cdn-a", "cdn-b,  knative-event-forwarding-proxy  "}, want: true},
		{name: "other CDNs", cdnLoop: []string{"cdn-a, cdn-b; knative-event-forwarding-proxy"}, want: false},
		{name: "longer identity", cdnLoop: []string{"knative-event-forwarding-proxy-2"}, want: false},
		{name: "shorter identity", cdnLoop: []string{"knative-event-forwarding"}, want: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := http.Header{}
			for _, v := range tt.cdnLoop {
				h.Add(headerCDNLoop, v)
			}
			if got := hasLoopMark(h, DefaultLoopID); got != tt.want {
				t.Errorf("hasLoopMark(%q) = %v, want %v", tt.cdnLoop, got, tt.want)
			}
		})
	}
}

func TestClusterNamespace(t *testing.T) {
	tests := []struct {
		name, host, want string
	}{
		{name: "name.namespace.svc", host: "sink.team-a.svc", want: "team-a"},
		{name: "longest namespace", host: "sink." + strings.Repeat("a", 63) + ".svc", want: strings.Repeat("a", 63)},
		{name: "cluster domain", host: "sink.team-a.svc.cluster.local", want: "team-a"},
		{name: "custom cluster domain", host: "sink.team-a.svc.example.org", want: "team-a"},
		{name: "name.svc has no namespace", host: "sink.svc", want: ""},
		{name: "external host", host: "example.com", want: ""},
		{name: "svc not third", host: "a.b.c.svc.cluster.local", want: ""},
		{name: "IP literal", host: "10.0.0.1", want: ""},
		{name: "invalid namespace", host: "sink.Team_A.svc", want: ""},
		{name: "namespace starting with a dash", host: "sink.-a.svc", want: ""},
		{name: "namespace too long", host: "sink." + strings.Repeat("a", 64) + ".svc", want: ""},
		{name: "empty", host: "", want: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := clusterNamespace(tt.host); got != tt.want {
				t.Errorf("clusterNamespace(%q) = %q, want %q", tt.host, got, tt.want)
			}
		})
	}
}

func TestTenantOf(t *testing.T) {
	tests := []struct {
		name, knNamespace, destNamespace, want string
	}{
		{name: "Kn-Namespace wins", knNamespace: "team-a", destNamespace: "team-b", want: "team-a"},
		{name: "no Kn-Namespace: destination namespace", destNamespace: "team-b", want: "team-b"},
		{name: "invalid Kn-Namespace ignored", knNamespace: "Team A", destNamespace: "team-b", want: "team-b"},
		{name: "over-long Kn-Namespace ignored", knNamespace: strings.Repeat("a", 64), destNamespace: "x", want: "x"},
		{name: "neither", want: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := http.Header{}
			if tt.knNamespace != "" {
				h.Set("Kn-Namespace", tt.knNamespace)
			}
			if got := tenantOf(h, tt.destNamespace); got != tt.want {
				t.Errorf("tenantOf(%q, %q) = %q, want %q", tt.knNamespace, tt.destNamespace, got, tt.want)
			}
		})
	}
}

func TestDestinationKey(t *testing.T) {
	tests := []struct {
		name, raw, want string
	}{
		{name: "http default port", raw: "http://sink.ns.svc/x", want: "sink.ns.svc:80"},
		{name: "https default port", raw: "https://sink.ns.svc/x", want: "sink.ns.svc:443"},
		{name: "explicit port", raw: "http://sink.ns.svc:8080/x", want: "sink.ns.svc:8080"},
		{name: "explicit default port is the same key", raw: "http://sink.ns.svc:80/y", want: "sink.ns.svc:80"},
		{name: "IPv6 without port", raw: "http://[fd00::1]/", want: "[fd00::1]:80"},
		{name: "IPv6 with port", raw: "https://[fd00::1]:8443/", want: "[fd00::1]:8443"},
		{name: "path and query do not matter", raw: "http://10.0.0.1/a?b=c", want: "10.0.0.1:80"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u, err := url.Parse(tt.raw)
			if err != nil {
				t.Fatal(err)
			}
			if got := destinationKey(u); got != tt.want {
				t.Errorf("destinationKey(%q) = %q, want %q", tt.raw, got, tt.want)
			}
		})
	}
}
