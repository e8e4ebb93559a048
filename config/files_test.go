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

import "testing"

func TestDefaultMaxConnections(t *testing.T) {
	for _, tc := range []struct {
		fileLimit uint64
		want      int
	}{
		{0, 10000},
		{1, 100},
		{200, 100},
		{202, 101},
		{20000, 10000},
		{200000, 100000},
		{200002, 100000},
		{1 << 62, 100000},
	} {
		if got := DefaultMaxConnections(tc.fileLimit); got != tc.want {
			t.Errorf("DefaultMaxConnections(%d) = %d, want %d", tc.fileLimit, got, tc.want)
		}
	}
}
