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
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestInts(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    []int
		wantErr bool
	}{
		{name: "empty means default", in: "", want: nil},
		{name: "none means no runs", in: "none", want: []int{}},
		{name: "list", in: "1000, 10000,100000", want: []int{1000, 10000, 100000}},
		{name: "not a number", in: "1k", wantErr: true},
		{name: "zero", in: "0", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ints(tt.in)
			if (err != nil) != tt.wantErr {
				t.Fatalf("ints(%q) error = %v, want error %v", tt.in, err, tt.wantErr)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("ints(%q) (-want +got):\n%s", tt.in, diff)
			}
		})
	}
}

func TestDefaultsScale(t *testing.T) {
	tests := []struct {
		name       string
		scale      float64
		wantH2C    []int
		wantHTTP1  []int
		wantWindow time.Duration
		wantSeed   SeedConfig
	}{
		{name: "full", scale: 0, wantH2C: []int{1000, 10000, 50000, 100000}, wantHTTP1: []int{1000, 5000, 9000},
			wantWindow: 10 * time.Second, wantSeed: SeedConfig{Sources: 5000, Period: 10 * time.Second, Hold: time.Minute, Duration: 90 * time.Second}},
		{name: "tenth", scale: 0.1, wantH2C: []int{100, 1000, 5000, 10000}, wantHTTP1: []int{100, 500, 900},
			wantWindow: time.Second, wantSeed: SeedConfig{Sources: 500, Period: time.Second, Hold: 6 * time.Second, Duration: 9 * time.Second}},
		{name: "floors", scale: 0.0001, wantH2C: []int{10, 10, 10, 10}, wantHTTP1: []int{10, 10, 10},
			wantWindow: time.Second, wantSeed: SeedConfig{Sources: 10, Period: 500 * time.Millisecond, Hold: 3 * time.Second, Duration: 4 * time.Second}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := Config{ProxyBin: "proxy", Self: []string{"loadgen"}, Scale: tt.scale}
			if err := c.defaults(); err != nil {
				t.Fatal(err)
			}
			got := []any{c.HeldH2C, c.HeldHTTP1, c.Window, c.Seed}
			want := []any{tt.wantH2C, tt.wantHTTP1, tt.wantWindow, tt.wantSeed}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("defaults at scale %v (-want +got):\n%s", tt.scale, diff)
			}
		})
	}
}

func TestPaddingValue(t *testing.T) {
	for _, n := range []int{60000, 1000, len(paddingHeader) + 5} {
		line := paddingHeader + ": " + paddingValue(n) + "\r\n"
		if len(line) != n {
			t.Errorf("paddingValue(%d) makes a %d-byte header line", n, len(line))
		}
	}
	for _, n := range []int{0, len(paddingHeader) + 4} {
		if v := paddingValue(n); v != "" {
			t.Errorf("paddingValue(%d) = %q, want none: no room for a value", n, v)
		}
	}
}
