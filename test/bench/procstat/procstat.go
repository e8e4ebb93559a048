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

// Package procstat reads what the bench measures of a process from /proc:
// resident memory and CPU time, of one process or of it and its children.
package procstat

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// RSSKB returns the resident set size of pid in KiB (VmRSS).
func RSSKB(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	return parseStatusKB(b, "VmRSS:")
}

func parseStatusKB(status []byte, key string) (int64, error) {
	for line := range bytes.Lines(status) {
		if rest, ok := bytes.CutPrefix(line, []byte(key)); ok {
			f := strings.Fields(string(rest))
			if len(f) == 0 {
				break
			}
			return strconv.ParseInt(f[0], 10, 64)
		}
	}
	return 0, fmt.Errorf("no %s in status", key)
}

// CPUSeconds returns the CPU time pid has used, all its threads, to the
// nanosecond: the process's CPU-time clock (clock_gettime on the clock id
// clock_getcpuclockid(3) gives, CPUCLOCK_SCHED). /proc/<pid>/stat counts
// in clock ticks (10 ms), under which a short run of an efficient peer
// reads zero.
func CPUSeconds(pid int) (float64, error) {
	const cpuclockSched = 2
	if pid <= 0 {
		return 0, fmt.Errorf("no CPU clock for pid %d", pid)
	}
	clock := int32(^pid)<<3 | cpuclockSched
	var ts unix.Timespec
	if err := unix.ClockGettime(clock, &ts); err != nil {
		return 0, fmt.Errorf("CPU clock of pid %d: %w", pid, err)
	}
	return float64(ts.Nano()) / 1e9, nil
}

// statFields returns the fields of a /proc/<pid>/stat line after the
// command name, which may itself hold spaces and parentheses.
func statFields(b []byte) ([]string, error) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return nil, errors.New("malformed stat")
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return nil, errors.New("short stat")
	}
	return f, nil
}

// Children returns the pids whose parent is pid.
func Children(pid int) []int {
	paths, _ := filepath.Glob("/proc/[0-9]*/stat")
	var out []int
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		f, err := statFields(b)
		if err != nil {
			continue
		}
		if ppid, _ := strconv.Atoi(f[1]); ppid == pid {
			child, _ := strconv.Atoi(filepath.Base(filepath.Dir(p)))
			out = append(out, child)
		}
	}
	return out
}

// Group is a process and, when WithChildren, its direct children (nginx's
// workers), measured together.
type Group struct {
	Pid          int
	WithChildren bool
}

func (g Group) pids() []int {
	if !g.WithChildren {
		return []int{g.Pid}
	}
	return append([]int{g.Pid}, Children(g.Pid)...)
}

// RSSKB is the sum of the group's resident memory in KiB.
func (g Group) RSSKB() (int64, error) {
	var sum int64
	for _, p := range g.pids() {
		kb, err := RSSKB(p)
		if err != nil {
			return 0, err
		}
		sum += kb
	}
	return sum, nil
}

// CPUSeconds is the sum of the group's CPU time.
func (g Group) CPUSeconds() (float64, error) {
	var sum float64
	for _, p := range g.pids() {
		s, err := CPUSeconds(p)
		if err != nil {
			return 0, err
		}
		sum += s
	}
	return sum, nil
}

// LoadAvg is the machine's 1-minute load average, 0 when unknown.
func LoadAvg() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0
	}
	v, _ := strconv.ParseFloat(f[0], 64)
	return v
}

// CPUModel is the machine's CPU model name, "" when unknown.
func CPUModel() string {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return ""
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// Kernel is the running kernel's release, "" when unknown.
func Kernel() string {
	b, err := os.ReadFile("/proc/sys/kernel/osrelease")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}
