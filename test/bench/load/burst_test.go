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

package load

import (
	"context"
	"testing"
	"time"
)

// TestBurstSizeBounds: a burst outside 1..maxBurstEvents is refused before
// any connection is dialed (the address is one nobody listens on).
func TestBurstSizeBounds(t *testing.T) {
	for _, n := range []int{-1, 0, maxBurstEvents + 1} {
		if _, _, err := burst(context.Background(), "127.0.0.1:1", "/", "", n, true, 202, time.Second); err == nil {
			t.Errorf("a burst of %d events was not refused", n)
		}
	}
}
