//go:build integration

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

package hostile

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestHostilePeers runs every attack class against a proxy process of its
// own while a legitimate caller sends a request every 100 ms, and holds
// the proxy to the suite's bounds (runAttack); with -v it ends with a
// table of what each attack cost.
func TestHostilePeers(t *testing.T) {
	attacks := []attack{
		{name: "frame header announcing 16 MiB", run: frameSizeAbuse},
		{name: "zero-window hold", run: zeroWindowHold},
		{name: "rapid reset", run: rapidReset},
		{name: "HPACK bomb", run: hpackBomb},
		{name: "empty DATA flood", run: emptyDataFlood},
		{name: "zero-length HEADERS flood", run: zeroLengthHeadersFlood},
		{name: "PING and SETTINGS flood, acks unread", run: controlFrameFlood},
		{name: "connection flood", env: []string{"FORWARD_MAX_CONNECTIONS=" + strconv.Itoa(maxConnections)}, run: connectionFlood},
		{name: "half-closed HTTP/1.1 callers", run: halfClosedCallers},
		{name: "slow headers", run: slowHeaders},
		{name: "async bodies past the memory budget", env: asyncBudgetEnv, run: asyncBodies},
		{name: "interim-answer flood from a destination", env: []string{"FORWARD_H2C_HOSTS=127.0.0.1"}, run: interimFlood},
		{name: "large legal headers held", env: headerBudgetEnv, run: largeHeaders},
	}
	var rows []figures
	for _, at := range attacks {
		f, ran := figures{name: at.name}, false // not run when -run leaves it out
		t.Run(at.name, func(t *testing.T) { ran = true; runAttack(t, at, &f) })
		if ran {
			rows = append(rows, f)
		}
	}
	t.Logf("what each attack cost:\n%s", table(rows))
}

// table is the figures as a Markdown table.
func table(rows []figures) string {
	var b strings.Builder
	b.WriteString("| attack | legitimate calls answered / failed | p50 ms | p99 ms | goroutines at rest / peak | heap in use at rest / peak MiB | what the attacker saw |\n")
	b.WriteString("|---|---|---|---|---|---|---|\n")
	ms := func(d time.Duration) string {
		return strconv.FormatFloat(float64(d)/float64(time.Millisecond), 'f', 2, 64)
	}
	for _, f := range rows {
		fmt.Fprintf(&b, "| %s | %d / %d | %s | %s | %d / %d | %.1f / %.1f | %s |\n", f.name, f.legit, f.legitFailed, ms(f.p50), ms(f.p99),
			f.base.goroutines, f.peak.goroutines, float64(f.base.heap)/(1<<20), float64(f.peak.heap)/(1<<20),
			strings.ReplaceAll(f.outcome, "|", "/"))
	}
	return b.String()
}
