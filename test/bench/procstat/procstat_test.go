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

package procstat

import (
	"os"
	"os/exec"
	"testing"
)

func TestStatFields(t *testing.T) {
	tests := []struct {
		name      string
		stat      string
		wantPPID  string
		wantUtime string
		wantErr   bool
	}{
		{name: "plain", stat: "42 (proxy) S 7 42 42 0 -1 4194560 100 0 0 0 150 25 0 0 20 0 3 0 100 1000 200",
			wantPPID: "7", wantUtime: "150"},
		{name: "command with spaces and parentheses", stat: "42 (a) b (c) R 9 42 42 0 -1 0 0 0 0 0 7 8 0 0",
			wantPPID: "9", wantUtime: "7"},
		{name: "no command", stat: "42 proxy S 7", wantErr: true},
		{name: "short", stat: "42 (proxy) S 7 42", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := statFields([]byte(tt.stat))
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, want error %v", err, tt.wantErr)
			}
			if err != nil {
				return
			}
			if f[1] != tt.wantPPID || f[11] != tt.wantUtime {
				t.Errorf("ppid, utime = %q, %q; want %q, %q", f[1], f[11], tt.wantPPID, tt.wantUtime)
			}
		})
	}
}

func TestParseStatusKB(t *testing.T) {
	status := "Name:\tproxy\nVmPeak:\t  200 kB\nVmRSS:\t   12345 kB\nThreads:\t5\n"
	tests := []struct {
		name    string
		key     string
		want    int64
		wantErr bool
	}{
		{name: "rss", key: "VmRSS:", want: 12345},
		{name: "peak", key: "VmPeak:", want: 200},
		{name: "missing", key: "VmSwap:", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseStatusKB([]byte(status), tt.key)
			if (err != nil) != tt.wantErr || got != tt.want {
				t.Errorf("parseStatusKB(%s) = %d, %v; want %d, error %v", tt.key, got, err, tt.want, tt.wantErr)
			}
		})
	}
}

func TestSelf(t *testing.T) {
	g := Group{Pid: os.Getpid(), WithChildren: true}
	if kb, err := g.RSSKB(); err != nil || kb <= 0 {
		t.Errorf("RSSKB of this process = %d, %v; want > 0", kb, err)
	}
	if _, err := g.CPUSeconds(); err != nil {
		t.Errorf("CPUSeconds of this process: %v", err)
	}
}

// TestCPUSecondsBelowATick reads a process's CPU time to below a clock
// tick: the first increase seen while this test works is far less than
// the 10 ms that /proc/<pid>/stat counts in.
func TestCPUSecondsBelowATick(t *testing.T) {
	pid := os.Getpid()
	start, err := CPUSeconds(pid)
	if err != nil {
		t.Fatal(err)
	}
	if start <= 0 {
		t.Fatalf("CPU time %v of a running process", start)
	}
	now := start
	for i := 0; now == start && i < 1e7; i++ {
		if now, err = CPUSeconds(pid); err != nil {
			t.Fatal(err)
		}
	}
	if d := now - start; d <= 0 || d >= 0.01 {
		t.Errorf("first increase of the CPU time %v s, want above 0 and below a tick (0.01 s)", d)
	}
	// Clock ids of pids 0 and below name the caller; a reaped process
	// has none.
	gone := exec.Command("true")
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	for _, pid := range []int{0, -1, gone.Process.Pid} {
		if _, err := CPUSeconds(pid); err == nil {
			t.Errorf("CPU time of pid %d: no error", pid)
		}
	}
}
