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
	"os"
	"strconv"
	"strings"
)

// cgroupMemoryFiles hold the container's memory limit: cgroup v2 first,
// then v1.
var cgroupMemoryFiles = []string{
	"/sys/fs/cgroup/memory.max",
	"/sys/fs/cgroup/memory/memory.limit_in_bytes",
}

// MemoryLimit returns the container's memory limit in bytes, or zero when
// there is none or it cannot be read.
func MemoryLimit() int64 {
	for _, f := range cgroupMemoryFiles {
		if b, err := os.ReadFile(f); err == nil {
			return parseMemoryLimit(string(b))
		}
	}
	return 0
}

// parseMemoryLimit reads a cgroup limit file's content: "max" and the
// huge values cgroup v1 uses for "no limit" mean zero.
func parseMemoryLimit(s string) int64 {
	n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
	if err != nil || n <= 0 || n >= 1<<60 {
		return 0
	}
	return n
}

// How the proxy's defaults share a container's memory limit (see
// docs/operations.md, "Sizing a pod"): heldCallsPercent sizes
// FORWARD_MAX_INFLIGHT at bytesPerHeldCall per call, memoryBudgetPercent
// is FORWARD_MEMORY_BUDGET_BYTES, the headers and async bodies the calls
// keep. The rest, a fifth, is the Go runtime and the garbage between two
// collections; GOMEMLIMIT at 90 % of the limit makes the collector work
// harder before the kernel's OOM killer acts.
const (
	heldCallsPercent    = 50
	memoryBudgetPercent = 30
)

// noLimitMemoryBudget is the memory budget of a process with no memory
// limit.
const noLimitMemoryBudget = 256 << 20

// DefaultMemoryBudget sizes the memory budget of a container limited to
// memLimit bytes: memoryBudgetPercent of it. Without a limit (zero or
// negative) it is 256 MiB.
func DefaultMemoryBudget(memLimit int64) int64 {
	if memLimit <= 0 {
		return noLimitMemoryBudget
	}
	// Clamp first so that the product cannot overflow.
	return min(memLimit, 1<<60) / 100 * memoryBudgetPercent
}

// ProxyGODEBUG is the Go runtime setting the proxy runs with in its
// manifests (the GODEBUG variable), and the PingSource adapter in its
// settings ConfigMap: goroutines start with the smallest stack instead of
// the running average the runtime measures. A held call's
// goroutines wait with shallow stacks, and at the average size tens of
// thousands of them cost about a sixth more memory (docs/benchmarks.md).
// The runtime reads this setting only at start-up, so it cannot be set
// from inside the program.
const ProxyGODEBUG = "adaptivestackstart=0"

// SoftMemoryLimit is the Go runtime's soft memory limit for a container
// limited to memLimit bytes: 90 % of it, so that the collector works
// harder before the kernel's OOM killer acts, and a large heap of held
// calls is collected by the limit rather than only when it doubles. It
// reports false, leaving the runtime alone, when GOMEMLIMIT is set (the
// operator's value wins; the runtime has applied it already) or there is
// no limit (below 1 MiB, no Go process could start in it: not a limit
// worth following).
func SoftMemoryLimit(lookup func(string) (string, bool), memLimit int64) (int64, bool) {
	if v, ok := lookup("GOMEMLIMIT"); ok && strings.TrimSpace(v) != "" {
		return 0, false
	}
	if memLimit < 1<<20 {
		return 0, false
	}
	return min(memLimit, 1<<60) / 10 * 9, true
}
