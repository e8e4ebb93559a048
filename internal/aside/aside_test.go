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

package aside

import (
	"errors"
	"runtime"
	"testing"
)

// TestDoRunsOnAnotherGoroutine: Do returns f's value and error, and f does
// not run on the caller's goroutine.
func TestDoRunsOnAnotherGoroutine(t *testing.T) {
	caller := goroutineID()
	id, err := Do(func() (string, error) { return goroutineID(), errors.New("boom") })
	if err == nil || err.Error() != "boom" {
		t.Errorf("error %v, want f's", err)
	}
	if id == caller {
		t.Errorf("f ran on the caller's goroutine (%s)", id)
	}
}

// goroutineID is the "goroutine N" header of the current stack.
func goroutineID() string {
	buf := make([]byte, 64)
	buf = buf[:runtime.Stack(buf, false)]
	for i, b := range buf {
		if b == '[' {
			return string(buf[:i])
		}
	}
	return string(buf)
}
