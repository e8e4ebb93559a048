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

package config

import (
	"strings"
	"testing"
	"time"
)

func TestNewForwardingFromMap(t *testing.T) {
	tests := []struct {
		name      string
		data      map[string]string
		wantURL   string // "" for off
		threshold int
		wantErr   string // a part of the error; "" for none
	}{
		{name: "absent ConfigMap: off, default threshold", data: nil, threshold: 500},
		{name: "empty values: off, default threshold", data: map[string]string{ForwardingProxyKey: "", ForwardingThresholdKey: " "}, threshold: 500},
		{name: "proxy set, default threshold",
			data:    map[string]string{ForwardingProxyKey: "http://event-forwarding-proxy.knative-eventing.svc.cluster.local"},
			wantURL: "http://event-forwarding-proxy.knative-eventing.svc.cluster.local", threshold: 500},
		{name: "https proxy with a path and spaces around",
			data:    map[string]string{ForwardingProxyKey: "  https://proxy.example:8443/forward ", ForwardingThresholdKey: "20"},
			wantURL: "https://proxy.example:8443/forward", threshold: 20},
		{name: "threshold 0 means always", data: map[string]string{ForwardingProxyKey: "http://p", ForwardingThresholdKey: "0"}, wantURL: "http://p", threshold: 0},
		{name: "threshold without proxy is kept", data: map[string]string{ForwardingThresholdKey: "7"}, threshold: 7},
		{name: "negative threshold", data: map[string]string{ForwardingThresholdKey: "-1"}, wantErr: `event-forwarding-threshold="-1": want an integer >= 0`},
		{name: "threshold not a number", data: map[string]string{ForwardingThresholdKey: "five hundred"}, wantErr: `event-forwarding-threshold="five hundred"`},
		{name: "threshold with a fraction", data: map[string]string{ForwardingThresholdKey: "1.5"}, wantErr: "event-forwarding-threshold"},
		{name: "threshold out of range", data: map[string]string{ForwardingThresholdKey: "99999999999999999999"}, wantErr: "event-forwarding-threshold"},
		{name: "relative proxy URL", data: map[string]string{ForwardingProxyKey: "event-forwarding-proxy"}, wantErr: `event-forwarding-proxy="event-forwarding-proxy": want an absolute http or https URL`},
		{name: "proxy URL of another scheme", data: map[string]string{ForwardingProxyKey: "ftp://p"}, wantErr: "event-forwarding-proxy"},
		{name: "proxy URL without host", data: map[string]string{ForwardingProxyKey: "http:///x"}, wantErr: "no host"},
		{name: "proxy URL with userinfo", data: map[string]string{ForwardingProxyKey: "http://u:p@p"}, wantErr: "user information"},
		{name: "proxy URL with a query", data: map[string]string{ForwardingProxyKey: "http://p/?a=b"}, wantErr: "query"},
		{name: "proxy URL unparsable", data: map[string]string{ForwardingProxyKey: "http://[::1"}, wantErr: "event-forwarding-proxy"},
		{name: "relative dead-letter sink", data: map[string]string{ForwardingDeadLetterSinkKey: "dls"}, threshold: 500,
			wantErr: `event-forwarding-dead-letter-sink="dls": want an absolute http or https URL`},
		{name: "dead-letter sink with userinfo", data: map[string]string{ForwardingDeadLetterSinkKey: "http://u@dls"}, wantErr: "user information"},
		{name: "unknown backoff policy", data: map[string]string{ForwardingBackoffPolicyKey: "fibonacci"},
			wantErr: `event-forwarding-backoff-policy="fibonacci": want linear or exponential`},
		{name: "retry-after cap in ISO 8601", data: map[string]string{ForwardingRetryAfterMaxKey: "PT30S"}, wantErr: "event-forwarding-retry-after-max"},
		{name: "negative retry-after cap", data: map[string]string{ForwardingRetryAfterMaxKey: "-1s"}, wantErr: "event-forwarding-retry-after-max"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f, err := NewForwardingFromMap(tc.data)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := ""
			if f.ProxyURL != nil {
				got = f.ProxyURL.String()
			}
			if got != tc.wantURL || f.Enabled() != (tc.wantURL != "") || f.Threshold != tc.threshold {
				t.Errorf("got URL %q (enabled %v), threshold %d; want %q, %d", got, f.Enabled(), f.Threshold, tc.wantURL, tc.threshold)
			}
		})
	}
}

// TestForwardingDeliverySpec: the keys a Knative delivery spec has
// beside the proxy's, absent and set.
func TestForwardingDeliverySpec(t *testing.T) {
	tests := []struct {
		name             string
		data             map[string]string
		dls              string
		linear, ignoreRA bool
		retryAfterMax    time.Duration
	}{
		{name: "absent: none, exponential, the source's own cap"},
		{name: "empty values", data: map[string]string{ForwardingDeadLetterSinkKey: " ", ForwardingBackoffPolicyKey: "", ForwardingRetryAfterMaxKey: ""}},
		{name: "all set", dls: "http://dls.tenant.svc.cluster.local/failed", linear: true, retryAfterMax: 45 * time.Second,
			data: map[string]string{ForwardingDeadLetterSinkKey: "http://dls.tenant.svc.cluster.local/failed", ForwardingBackoffPolicyKey: "Linear", ForwardingRetryAfterMaxKey: "45s"}},
		{name: "exponential, Retry-After ignored", ignoreRA: true,
			data: map[string]string{ForwardingBackoffPolicyKey: "exponential", ForwardingRetryAfterMaxKey: "0"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f, err := NewForwardingFromMap(tc.data)
			if err != nil {
				t.Fatal(err)
			}
			dls := ""
			if f.DeadLetterSink != nil {
				dls = f.DeadLetterSink.String()
			}
			if dls != tc.dls || f.LinearBackoff != tc.linear || f.RetryAfterMax != tc.retryAfterMax || f.IgnoreRetryAfter != tc.ignoreRA {
				t.Errorf("got sink %q, linear %v, retry-after max %s (ignored %v); want %q, %v, %s (%v)",
					dls, f.LinearBackoff, f.RetryAfterMax, f.IgnoreRetryAfter, tc.dls, tc.linear, tc.retryAfterMax, tc.ignoreRA)
			}
		})
	}
}

func TestForwardingString(t *testing.T) {
	tests := []struct {
		name string
		data map[string]string
		want string
	}{
		{name: "off", want: "off"},
		{name: "on", data: map[string]string{ForwardingProxyKey: "http://p.ns.svc", ForwardingThresholdKey: "3"},
			want: "proxy http://p.ns.svc above 3 direct sources or 500 direct sends in flight (held 5m0s)"},
		{name: "dead-letter sink only", data: map[string]string{ForwardingDeadLetterSinkKey: "http://dls.ns.svc"},
			want: "off; dead-letter sink http://dls.ns.svc"},
		{name: "no in-flight switch", data: map[string]string{ForwardingProxyKey: "http://p.ns.svc", ForwardingThresholdKey: "3", ForwardingInflightThresholdKey: "0"},
			want: "proxy http://p.ns.svc above 3 direct sources"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f, err := NewForwardingFromMap(tc.data)
			if err != nil {
				t.Fatal(err)
			}
			if got := f.String(); got != tc.want {
				t.Errorf("String() = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestSystemNamespace(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
		want string
	}{
		{name: "unset", want: "knative-eventing"},
		{name: "empty", env: map[string]string{"SYSTEM_NAMESPACE": " "}, want: "knative-eventing"},
		{name: "set", env: map[string]string{"SYSTEM_NAMESPACE": "my-eventing"}, want: "my-eventing"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := SystemNamespace(func(k string) (string, bool) { v, ok := tc.env[k]; return v, ok })
			if got != tc.want {
				t.Errorf("SystemNamespace() = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestForwardingInflightKeys(t *testing.T) {
	tests := []struct {
		name      string
		data      map[string]string
		threshold int
		hold      time.Duration
		wantErr   string
	}{
		{name: "defaults", threshold: 500, hold: 5 * time.Minute},
		{name: "empty values take the defaults", data: map[string]string{ForwardingInflightThresholdKey: " ", ForwardingInflightHoldKey: ""}, threshold: 500, hold: 5 * time.Minute},
		{name: "set", data: map[string]string{ForwardingInflightThresholdKey: "20", ForwardingInflightHoldKey: "90s"}, threshold: 20, hold: 90 * time.Second},
		{name: "0 turns the switch off", data: map[string]string{ForwardingInflightThresholdKey: "0"}, threshold: 0, hold: 5 * time.Minute},
		{name: "shortest hold", data: map[string]string{ForwardingInflightHoldKey: "1s"}, threshold: 500, hold: time.Second},
		{name: "hold below a second", data: map[string]string{ForwardingInflightHoldKey: "999ms"}, wantErr: `event-forwarding-inflight-hold="999ms": want a duration such as 30s or 10m, at least 1s`},
		{name: "hold not a duration", data: map[string]string{ForwardingInflightHoldKey: "5"}, wantErr: "event-forwarding-inflight-hold"},
		{name: "negative threshold", data: map[string]string{ForwardingInflightThresholdKey: "-1"}, wantErr: `event-forwarding-inflight-threshold="-1": want an integer >= 0`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f, err := NewForwardingFromMap(tc.data)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if f.InflightThreshold != tc.threshold || f.InflightHold != tc.hold {
				t.Errorf("in-flight threshold %d, hold %s; want %d, %s", f.InflightThreshold, f.InflightHold, tc.threshold, tc.hold)
			}
		})
	}
}
