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

package mtping

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"syscall"
	"time"

	"knative.dev/event-forwarding-proxy/test/bench/procstat"
	"knative.dev/event-forwarding-proxy/test/bench/report"
)

// Where BenchmarkSeed writes, relative to this package's folder (go test
// runs a package's tests and benchmarks in it).
var (
	seedDocsDir  = filepath.Join("..", "..", "docs")
	seedDoc      = filepath.Join(seedDocsDir, "benchmarks.md")
	seedJSON     = filepath.Join(seedDocsDir, "bench", "mtping-seed.json")
	seedPlotFile = filepath.Join(seedDocsDir, "bench", "mtping-seed.png")
)

// The generated block of docs/benchmarks.md lies between
// report.MtpingSeedBegin and report.MtpingSeedEnd: only that is
// rewritten; when the markers are missing, the section is appended under
// seedHeading.
const seedHeading = "## The seed scenario with the real mt-ping adapter"

// seedMachine describes where the benchmark ran, as report reads it.
type seedMachine report.MtpingSeedMachine

func newMachine() *seedMachine {
	m := &seedMachine{
		Cores: runtime.NumCPU(), GoVersion: runtime.Version(), LoadAvgStart: procstat.LoadAvg(),
		CPUModel: procstat.CPUModel(), Kernel: procstat.Kernel(),
	}
	var rl syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl) == nil {
		m.NofileLimit = rl.Cur
	}
	return m
}

func (m *seedMachine) finish() { m.LoadAvgEnd = procstat.LoadAvg() }

// seedOutput is docs/bench/mtping-seed.json.
type seedOutput struct {
	Config  seedConfig   `json:"config"`
	Machine *seedMachine `json:"machine"`
	Started time.Time    `json:"started"`
	Runs    []*seedRun   `json:"runs"`
}

// write writes the JSON, the plot and the block of docs/benchmarks.md,
// which report renders from the JSON as written, as
// TestBenchmarksDocIsGenerated (test/bench/report) checks it.
func (o seedOutput) write() error {
	b, err := json.MarshalIndent(o, "", " ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(seedJSON, append(b, '\n'), 0o644); err != nil {
		return err
	}
	seed, err := report.ParseMtpingSeed(b)
	if err != nil {
		return err
	}
	if err := seedPlot(o.Runs, seedPlotFile); err != nil {
		return fmt.Errorf("plot: %w", err)
	}
	doc, err := os.ReadFile(seedDoc)
	if err != nil {
		return err
	}
	return os.WriteFile(seedDoc, replaceSeedBlock(doc, seed.Markdown()), 0o644)
}

// replaceSeedBlock puts body between the markers of doc, or appends the
// section with its markers when doc lacks them; nothing else changes.
func replaceSeedBlock(doc []byte, body string) []byte {
	begin, end := report.MtpingSeedBegin, report.MtpingSeedEnd
	i := bytes.Index(doc, []byte(begin))
	j := bytes.Index(doc, []byte(end))
	if i < 0 || j < i {
		out := append(bytes.TrimRight(doc, "\n"), "\n\n"+seedHeading+"\n\n"+begin+"\n"+body+"\n"+end+"\n"...)
		return out
	}
	var out bytes.Buffer
	out.Write(doc[:i+len(begin)])
	out.WriteString("\n" + body + "\n")
	out.Write(doc[j:])
	return out.Bytes()
}
