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

package demo

import (
	"strings"
	"testing"
)

func TestSumGauge(t *testing.T) {
	tests := []struct {
		name    string
		text    string
		want    int64
		wantErr bool
	}{{
		name: "series summed",
		text: "# TYPE kn_forward_active_requests gauge\n" +
			"kn_forward_active_requests{namespace=\"\"} 7\n" +
			"kn_forward_active_requests{namespace=\"a\",x=\"}\"} 3\n",
		want: 10,
	}, {
		name: "no labels",
		text: "kn_forward_active_requests 4\n",
		want: 4,
	}, {
		name: "longer names left out",
		text: "kn_forward_active_requests_total 9\nkn_forward_active_requests{} 1e3\n",
		want: 1000,
	}, {
		name:    "absent",
		text:    "kn_forward_capacity 10\n",
		wantErr: true,
	}, {
		name:    "bad value",
		text:    "kn_forward_active_requests{} x\n",
		wantErr: true,
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := sumGauge(strings.NewReader(tc.text), heldMetric)
			if (err != nil) != tc.wantErr || got != tc.want {
				t.Errorf("sumGauge = %d, %v; want %d, error %t", got, err, tc.want, tc.wantErr)
			}
		})
	}
}
