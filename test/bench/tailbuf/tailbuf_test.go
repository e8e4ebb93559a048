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

package tailbuf

import (
	"strings"
	"sync"
	"testing"
)

func TestTail(t *testing.T) {
	tests := []struct {
		name   string
		max    int
		writes []string
		want   string
	}{
		{name: "under the bound", max: 10, writes: []string{"abc", "def"}, want: "abcdef"},
		{name: "at the bound", max: 6, writes: []string{"abc", "def"}, want: "abcdef"},
		{name: "over the bound keeps the end", max: 4, writes: []string{"abc", "def"}, want: "cdef"},
		{name: "one write longer than the bound", max: 3, writes: []string{"abcdefgh"}, want: "fgh"},
		{name: "nothing written", max: 3, want: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tb := New(tt.max)
			for _, w := range tt.writes {
				if n, err := tb.Write([]byte(w)); n != len(w) || err != nil {
					t.Fatalf("Write(%q) = %d, %v", w, n, err)
				}
			}
			if got := tb.String(); got != tt.want {
				t.Errorf("String() = %q, want %q", got, tt.want)
			}
		})
	}
}

// TestTailConcurrentWriters: two streams writing at once (run with -race)
// never leave more than the bound.
func TestTailConcurrentWriters(t *testing.T) {
	tb := New(100)
	var wg sync.WaitGroup
	for _, s := range []string{"out\n", "err\n"} {
		wg.Go(func() {
			for range 1000 {
				_, _ = tb.Write([]byte(s))
			}
		})
	}
	wg.Wait()
	if got := tb.String(); len(got) != 100 || strings.Trim(got, "outer\n") != "" {
		t.Errorf("kept %d bytes %q, want the last 100 of the two streams", len(got), got)
	}
}
