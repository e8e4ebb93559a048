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

import "testing"

func TestH2CConnsPerDestination(t *testing.T) {
	tests := []struct {
		maxPerDestination, want int
	}{
		{maxPerDestination: 1, want: 4},
		{maxPerDestination: 400, want: 4},
		{maxPerDestination: 401, want: 5},
		{maxPerDestination: 450, want: 5}, // the manifests' 900 per pod, half per destination
		{maxPerDestination: 50000, want: 500},
	}
	for _, tt := range tests {
		if got := H2CConnsPerDestination(tt.maxPerDestination); got != tt.want {
			t.Errorf("H2CConnsPerDestination(%d) = %d, want %d", tt.maxPerDestination, got, tt.want)
		}
	}
	cfg := testConfig(t, map[string]string{"FORWARD_MAX_INFLIGHT": "2000", "FORWARD_MAX_INFLIGHT_PER_DESTINATION": "1000", "FORWARD_MAX_INFLIGHT_PER_TENANT": "1000"})
	if got := TransportParams(cfg, DestinationPolicy(cfg)).MaxH2CConnsPerHost; got != 10 {
		t.Errorf("TransportParams with 1000 calls per destination: %d h2c connections per destination, want 10", got)
	}
}
