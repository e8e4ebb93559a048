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
	"errors"
	"net/url"
	"strings"
	"testing"
)

func TestParseDestination(t *testing.T) {
	tests := []struct {
		name    string
		values  []string
		want    string // the URL parseDestination returns, when wantErr is nil
		wantErr error
	}{
		{name: "missing", values: nil, wantErr: errMissingDestination},
		{name: "empty", values: []string{""}, wantErr: errMissingDestination},
		{name: "repeated", values: []string{"http://a.ns.svc/", "http://a.ns.svc/"}, wantErr: errBadDestination},
		{name: "repeated with an empty first", values: []string{"", "http://a.ns.svc/"}, wantErr: errBadDestination},
		{name: "relative path", values: []string{"/events"}, wantErr: errBadDestination},
		{name: "no scheme", values: []string{"a.ns.svc/events"}, wantErr: errBadDestination},
		{name: "ftp", values: []string{"ftp://a.ns.svc/events"}, wantErr: errBadDestination},
		{name: "opaque", values: []string{"http:a.ns.svc"}, wantErr: errBadDestination},
		{name: "scheme only", values: []string{"http://"}, wantErr: errBadDestination},
		{name: "port without host", values: []string{"http://:8080/"}, wantErr: errBadDestination},
		{name: "lone dot host", values: []string{"http://./"}, wantErr: errBadDestination},
		{name: "userinfo", values: []string{"http://user:secret@a.ns.svc/"}, wantErr: errBadDestination},
		{name: "user without password", values: []string{"http://user@a.ns.svc/"}, wantErr: errBadDestination},
		{name: "fragment", values: []string{"http://a.ns.svc/x#frag"}, wantErr: errBadDestination},
		{name: "empty fragment", values: []string{"http://a.ns.svc/x#"}, wantErr: errBadDestination},
		{name: "CR LF", values: []string{"http://a.ns.svc/x\r\nX-Injected: 1"}, wantErr: errBadDestination},
		{name: "LF", values: []string{"http://a.ns.svc/\n"}, wantErr: errBadDestination},
		{name: "space", values: []string{"http://a.ns.svc/a b"}, wantErr: errBadDestination},
		{name: "leading space", values: []string{" http://a.ns.svc/"}, wantErr: errBadDestination},
		{name: "tab", values: []string{"http://a.ns.svc/\t"}, wantErr: errBadDestination},
		{name: "DEL", values: []string{"http://a.ns.svc/\x7f"}, wantErr: errBadDestination},
		{name: "NUL", values: []string{"http://a.ns.svc/\x00"}, wantErr: errBadDestination},
		{name: "port 0", values: []string{"http://a.ns.svc:0/"}, wantErr: errBadDestination},
		{name: "port 70000", values: []string{"http://a.ns.svc:70000/"}, wantErr: errBadDestination},
		{name: "port abc", values: []string{"http://a.ns.svc:abc/"}, wantErr: errBadDestination},
		{name: "bad escape", values: []string{"http://a.ns.svc/%zz"}, wantErr: errBadDestination},
		{name: "unclosed IPv6", values: []string{"http://[::1/"}, wantErr: errBadDestination},
		{name: "IPv6 that does not parse", values: []string{"http://[a:b:g::1]/"}, wantErr: errBadDestination},
		{name: "IPv6 zone with a byte that is not UTF-8", values: []string{"http://[::%25\xe5]"}, wantErr: errBadDestination},
		{name: "IPv6 zone with a non-ASCII letter", values: []string{"http://[fe80::1%25%C3%A9th0]/"}, wantErr: errBadDestination},
		{name: "IPv6 zone with a percent sign", values: []string{"http://[fe80::1%25%2525]/"}, wantErr: errBadDestination},
		{name: "IPv6 zone of unreserved characters", values: []string{"http://[fe80::1%25eth0.1_a~-]:8080/"}, want: "http://[fe80::1%25eth0.1_a~-]:8080/"},
		{name: "plain", values: []string{"http://a.ns.svc.cluster.local/events"}, want: "http://a.ns.svc.cluster.local/events"},
		{name: "https", values: []string{"https://a.ns.svc/"}, want: "https://a.ns.svc/"},
		{name: "port 65535", values: []string{"http://a.ns.svc:65535"}, want: "http://a.ns.svc:65535"},
		{name: "upper-case scheme and host lowered", values: []string{"HTTPS://Sink.NS.SVC.Cluster.Local:8443/Path"}, want: "https://sink.ns.svc.cluster.local:8443/Path"},
		{name: "trailing dot removed", values: []string{"http://sink.ns.svc.cluster.local./"}, want: "http://sink.ns.svc.cluster.local/"},
		{name: "trailing dot removed before the port", values: []string{"http://sink.ns.svc.:8080/"}, want: "http://sink.ns.svc:8080/"},
		{name: "IPv4 literal with port", values: []string{"http://10.0.0.1:8080/"}, want: "http://10.0.0.1:8080/"},
		{name: "IPv6 literal without port", values: []string{"http://[FD00::1]/x"}, want: "http://[fd00::1]/x"},
		{name: "IPv6 literal with port", values: []string{"http://[fd00::1]:8080/x"}, want: "http://[fd00::1]:8080/x"},
		{name: "query kept", values: []string{"http://a.ns.svc/p?x=1&y=a%20b&z"}, want: "http://a.ns.svc/p?x=1&y=a%20b&z"},
		{name: "escaped path kept", values: []string{"http://a.ns.svc/a%2Fb/c"}, want: "http://a.ns.svc/a%2Fb/c"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u, err := parseDestination(tt.values)
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("parseDestination(%q) = %v, %v; want an error wrapping %q", tt.values, u, err, tt.wantErr)
				}
				if errors.Is(tt.wantErr, errBadDestination) && errors.Is(err, errMissingDestination) {
					t.Errorf("error %v is both bad and missing", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("parseDestination(%q): %v", tt.values, err)
			}
			if got := u.String(); got != tt.want {
				t.Errorf("parseDestination(%q) = %q, want %q", tt.values, got, tt.want)
			}
		})
	}
}

// TestParseDestinationHostNormalised pins the promise that the host comes
// back lower-cased and without a trailing dot, so that one destination has
// one admission key however it is spelled. Regression: "sink.ns.svc.."
// came back as "sink.ns.svc." (one dot trimmed), a second key for the same
// destination and thus twice its per-destination cap.
func TestParseDestinationHostNormalised(t *testing.T) {
	tests := []struct {
		name      string
		raw       string
		mayRefuse bool // an invalid DNS name may be refused instead
	}{
		{name: "canonical", raw: "http://sink.ns.svc/"},
		{name: "upper-case host", raw: "http://SINK.ns.svc/"},
		{name: "trailing dot", raw: "http://sink.ns.svc./"},
		{name: "everything at once", raw: "HTTP://Sink.NS.Svc.:80/"},
		{name: "two trailing dots", raw: "http://sink.ns.svc../", mayRefuse: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u, err := parseDestination([]string{tt.raw})
			if err != nil {
				if !tt.mayRefuse || !errors.Is(err, errBadDestination) {
					t.Fatalf("parseDestination(%q): %v", tt.raw, err)
				}
				return
			}
			if got := destinationKey(u); got != "sink.ns.svc:80" {
				t.Errorf("destinationKey(%q) = %q, want %q", tt.raw, got, "sink.ns.svc:80")
			}
			if h := u.Hostname(); strings.HasSuffix(h, ".") || h != strings.ToLower(h) {
				t.Errorf("parseDestination(%q) host = %q: not lower-cased without a trailing dot", tt.raw, h)
			}
		})
	}
}

func FuzzParseDestination(f *testing.F) {
	for _, s := range []string{
		"", "http://", "http://a.ns.svc/x?y=1", "HTTPS://A.B.SVC.:443/", "http://[::1]:8080/",
		"http://[fe80::1%25eth0]/", "ftp://a/", "http://u:p@a/", "http://a/#f", "http://a:0/",
		"http://a:70000/", "http://a/\r\n", "//a/b", "http:a", "http://a../", "http://%C3%A9.svc/",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		u, err := parseDestination([]string{raw})
		if err != nil {
			if !errors.Is(err, errMissingDestination) && !errors.Is(err, errBadDestination) {
				t.Fatalf("parseDestination(%q) = %v, neither missing nor bad", raw, err)
			}
			return
		}
		if u.Scheme != "http" && u.Scheme != "https" {
			t.Errorf("parseDestination(%q): scheme %q", raw, u.Scheme)
		}
		if u.Host == "" || u.Hostname() == "" {
			t.Errorf("parseDestination(%q): empty host in %q", raw, u)
		}
		if u.User != nil {
			t.Errorf("parseDestination(%q): user information %q kept", raw, u.User)
		}
		if u.Fragment != "" || u.RawFragment != "" || strings.Contains(u.String(), "#") {
			t.Errorf("parseDestination(%q): fragment kept in %q", raw, u)
		}
		if u.Opaque != "" {
			t.Errorf("parseDestination(%q): opaque %q", raw, u.Opaque)
		}
		if strings.ContainsAny(u.String(), " \r\n\t\x00") {
			t.Errorf("parseDestination(%q) = %q: control characters", raw, u)
		}
		// What the proxy dials must parse back to the same destination.
		back, err := url.Parse(u.String())
		if err != nil || back.Host != u.Host || back.Scheme != u.Scheme {
			t.Errorf("parseDestination(%q) = %q, which does not parse back (%v, %v)", raw, u, back, err)
		}
	})
}

func BenchmarkParseDestination(b *testing.B) {
	values := []string{"http://sink.tenant-a.svc.cluster.local:8080/events?x=1"}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := parseDestination(values); err != nil {
			b.Fatal(err)
		}
	}
}

// TestLegacyIPv4Spellings: odd IPv4 spellings are the addresses they are,
// so the policy judges (and refuses) them before anything is dialed.
func TestLegacyIPv4Spellings(t *testing.T) {
	for _, tc := range []struct{ host, want string }{
		{"2130706433", "127.0.0.1"},
		{"0x7f000001", "127.0.0.1"},
		{"0x7F.1", "127.0.0.1"},
		{"127.1", "127.0.0.1"},
		{"127.0.1", "127.0.0.1"},
		{"0177.0.0.1", "127.0.0.1"},
		{"017700000001", "127.0.0.1"},
		{"169.254.43518", "169.254.169.254"},
		{"10.1", "10.0.0.1"},
	} {
		t.Run(tc.host, func(t *testing.T) {
			u, err := parseDestination([]string{"http://" + tc.host + ":8080/x"})
			if err != nil {
				t.Fatal(err)
			}
			if u.Hostname() != tc.want || u.Port() != "8080" {
				t.Errorf("host %q, want %q:8080", u.Host, tc.want)
			}
		})
	}
	for _, name := range []string{"1.2.3.4.5", "256.1.1.1", "1.2.3.256", "0x", "08.1.1.1", "sink.1", "1.sink", "4294967296"} {
		if u, err := parseDestination([]string{"http://" + name + "/"}); err == nil {
			if _, isIP := parseLegacyIPv4(u.Hostname()); isIP || u.Hostname() != name {
				t.Errorf("%q became %q", name, u.Hostname())
			}
		}
	}
}
