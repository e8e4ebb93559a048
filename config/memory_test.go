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
	"math"
	"os"
	"path/filepath"
	"testing"
)

func TestParseMemoryLimit(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want int64
	}{
		{name: "cgroup v2 unlimited", in: "max\n", want: 0},
		{name: "1 GiB", in: "1073741824\n", want: 1 << 30},
		{name: "no newline", in: "536870912", want: 512 << 20},
		{name: "surrounding spaces", in: "  268435456 \n", want: 256 << 20},
		{name: "cgroup v1 unlimited", in: "9223372036854771712\n", want: 0},
		{name: "just below the no-limit threshold", in: "1152921504606846975", want: 1<<60 - 1},
		{name: "at the no-limit threshold", in: "1152921504606846976", want: 0},
		{name: "zero", in: "0\n", want: 0},
		{name: "negative", in: "-1\n", want: 0},
		{name: "garbage", in: "lots\n", want: 0},
		{name: "empty", in: "", want: 0},
		{name: "out of int64 range", in: "99999999999999999999", want: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := parseMemoryLimit(tt.in); got != tt.want {
				t.Errorf("parseMemoryLimit(%q) = %d, want %d", tt.in, got, tt.want)
			}
		})
	}
}

func TestMemoryLimit(t *testing.T) {
	write := func(t *testing.T, name, content string) string {
		p := filepath.Join(t.TempDir(), name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	missing := filepath.Join(t.TempDir(), "absent")
	tests := []struct {
		name  string
		files func(t *testing.T) []string
		want  int64
	}{
		{name: "v2 limit", files: func(t *testing.T) []string {
			return []string{write(t, "memory.max", "1073741824\n"), write(t, "v1", "2147483648\n")}
		}, want: 1 << 30},
		{name: "v2 unlimited wins over v1", files: func(t *testing.T) []string {
			return []string{write(t, "memory.max", "max\n"), write(t, "v1", "2147483648\n")}
		}, want: 0},
		{name: "v1 when v2 is absent", files: func(t *testing.T) []string {
			return []string{missing, write(t, "memory.limit_in_bytes", "2147483648\n")}
		}, want: 2 << 30},
		{name: "neither", files: func(*testing.T) []string { return []string{missing, missing} }, want: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			saved := cgroupMemoryFiles
			t.Cleanup(func() { cgroupMemoryFiles = saved })
			cgroupMemoryFiles = tt.files(t)
			if got := MemoryLimit(); got != tt.want {
				t.Errorf("MemoryLimit() = %d, want %d", got, tt.want)
			}
		})
	}
}

func TestDefaultMaxInflight(t *testing.T) {
	tests := []struct {
		name     string
		memLimit int64
		want     int
	}{
		{name: "no limit", memLimit: 0, want: 10000},
		{name: "negative", memLimit: -1, want: 10000},
		{name: "tiny", memLimit: 1 << 20, want: 100},
		{name: "just below the floor", memLimit: 6553599, want: 100},
		{name: "at the floor", memLimit: 6553600, want: 100},
		{name: "above the floor", memLimit: 8 << 20, want: 128},
		// 50 % of 1 GiB at 32 KiB per held call: 1073741824*50/100/32768.
		{name: "1 GiB", memLimit: 1 << 30, want: 16384},
		{name: "2 GiB", memLimit: 2 << 30, want: 32768},
		{name: "just below the ceiling", memLimit: 6553599999, want: 99999},
		{name: "at the ceiling", memLimit: 6553600000, want: 100000},
		{name: "huge", memLimit: 1 << 40, want: 100000},
		// Regression: memLimit*6 overflowed int64 and gave the floor.
		{name: "past int64/6", memLimit: math.MaxInt64/6 + 1, want: 100000},
		{name: "past int64/50", memLimit: math.MaxInt64/50 + 1, want: 100000},
		{name: "largest", memLimit: math.MaxInt64, want: 100000},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := DefaultMaxInflight(tt.memLimit); got != tt.want {
				t.Errorf("DefaultMaxInflight(%d) = %d, want %d", tt.memLimit, got, tt.want)
			}
		})
	}
}

func TestDefaultMemoryBudget(t *testing.T) {
	tests := []struct {
		name     string
		memLimit int64
		want     int64
	}{
		{name: "no limit", memLimit: 0, want: 256 << 20},
		{name: "negative", memLimit: -1, want: 256 << 20},
		// 30 % of the limit: 134217728/100*30.
		{name: "128 MiB", memLimit: 128 << 20, want: 40265310},
		{name: "1 GiB", memLimit: 1 << 30, want: 322122540},
		{name: "one byte", memLimit: 1, want: 0},
		{name: "at the clamp", memLimit: 1 << 60, want: (1 << 60) / 100 * 30},
		{name: "largest", memLimit: math.MaxInt64, want: (1 << 60) / 100 * 30},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := DefaultMemoryBudget(tt.memLimit); got != tt.want {
				t.Errorf("DefaultMemoryBudget(%d) = %d, want %d", tt.memLimit, got, tt.want)
			}
		})
	}
}

func TestSoftMemoryLimit(t *testing.T) {
	env := func(kv map[string]string) func(string) (string, bool) {
		return func(k string) (string, bool) { v, ok := kv[k]; return v, ok }
	}
	tests := []struct {
		name     string
		env      map[string]string
		memLimit int64
		want     int64
		wantOK   bool
	}{
		{name: "container limit, no GOMEMLIMIT", memLimit: 128 << 20, want: 128 << 20 / 10 * 9, wantOK: true},
		{name: "GOMEMLIMIT set wins", env: map[string]string{"GOMEMLIMIT": "100MiB"}, memLimit: 128 << 20},
		{name: "GOMEMLIMIT=off is the operator's choice too", env: map[string]string{"GOMEMLIMIT": "off"}, memLimit: 128 << 20},
		{name: "GOMEMLIMIT empty counts as unset", env: map[string]string{"GOMEMLIMIT": " "}, memLimit: 1 << 30, want: 1 << 30 / 10 * 9, wantOK: true},
		{name: "no container limit", memLimit: 0},
		{name: "below 1 MiB is no limit", memLimit: 1<<20 - 1},
		{name: "1 MiB", memLimit: 1 << 20, want: 1 << 20 / 10 * 9, wantOK: true},
		{name: "huge limit does not overflow", memLimit: math.MaxInt64, want: 1 << 60 / 10 * 9, wantOK: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := SoftMemoryLimit(env(tt.env), tt.memLimit)
			if got != tt.want || ok != tt.wantOK {
				t.Errorf("SoftMemoryLimit(%v, %d) = %d, %v; want %d, %v", tt.env, tt.memLimit, got, ok, tt.want, tt.wantOK)
			}
		})
	}
}
