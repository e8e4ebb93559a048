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

package report

import (
	"fmt"
	"os"
	"path"
	"strings"

	"knative.dev/event-forwarding-proxy/test/bench/result"
)

// Generated blocks of docs/benchmarks.md, in the order a new file gets
// them. Text outside the blocks is kept as written.
var blocks = []string{"machine", "targets", "held", "throughput", "burst", "seed", "plots", "gobench"}

func begin(name string) string { return "<!-- BEGIN generated:" + name + " -->" }
func end(name string) string   { return "<!-- END generated:" + name + " -->" }

// Doc is what the generated blocks are made of.
type Doc struct {
	Results *result.Results
	// GoBench is the output of the Go benchmarks; if empty, the block
	// keeps what it has.
	GoBench string
	// PlotDir is the plots' folder relative to the document.
	PlotDir string
}

// Sections returns the content of every generated block.
func Sections(d Doc) map[string]string {
	r := d.Results
	s := map[string]string{
		"machine":    machine(r),
		"targets":    targets(r),
		"held":       heldTable(r),
		"throughput": throughputTable(r),
		"burst":      burstTable(r),
		"seed":       seedTable(r),
		"plots":      plots(d.PlotDir),
	}
	if d.GoBench != "" {
		s["gobench"] = "```\n" + strings.TrimRight(d.GoBench, "\n") + "\n```"
	}
	return s
}

// Update replaces the content of each block of doc named in sections; a
// block doc lacks is appended at its end under a heading of its name.
func Update(doc string, sections map[string]string) string {
	for _, name := range blocks {
		body, ok := sections[name]
		if !ok {
			continue
		}
		b, e := begin(name), end(name)
		i := strings.Index(doc, b)
		j := strings.Index(doc, e)
		if i < 0 || j < i {
			doc = strings.TrimRight(doc, "\n") + "\n\n## " + name + "\n\n" + b + "\n" + body + "\n" + e + "\n"
			continue
		}
		doc = doc[:i+len(b)] + "\n" + body + "\n" + doc[j:]
	}
	return doc
}

// WriteDoc updates the generated blocks of the Markdown file at p,
// creating it when missing.
func WriteDoc(p string, d Doc) error {
	old, err := os.ReadFile(p)
	if err != nil && !os.IsNotExist(err) {
		return err
	}
	return os.WriteFile(p, []byte(Update(string(old), Sections(d))), 0o644)
}

func machine(r *result.Results) string {
	m := r.Machine
	pinned := "no"
	if m.PeerCPU >= 0 {
		pinned = fmt.Sprintf("peer on core %d (`taskset -c %d`); load generator, sinks and sender on core 0", m.PeerCPU, m.PeerCPU)
	}
	return table([]string{"", ""}, [][]string{
		{"CPU", m.CPUModel},
		{"cores", fmt.Sprint(m.Cores)},
		{"Go", m.GoVersion},
		{"kernel", m.Kernel},
		{"open files (load generator)", fmt.Sprint(m.NofileLimit)},
		{"pinning", pinned},
		{"1-minute load average at start / end", fmt.Sprintf("%.2f / %.2f", m.LoadAvgStart, m.LoadAvgEnd)},
		{"run", fmt.Sprintf("%s, %.0f s of scenarios, scale %g", r.Started.Format("2006-01-02 15:04 MST"), r.WallSeconds, r.Scale)},
	}) + notes(r.Notes)
}

func notes(ns []string) string {
	if len(ns) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("\nNotes from the run:\n\n")
	for _, n := range ns {
		b.WriteString("- " + n + "\n")
	}
	return b.String()
}

func heldTable(r *result.Results) string {
	var rows [][]string
	for _, h := range r.Held {
		note := h.Note
		if h.BodyBytes > 0 {
			note = strings.TrimPrefix(note+fmt.Sprintf("; async, a %d-byte body each", h.BodyBytes), "; ")
		}
		rows = append(rows, []string{
			h.Protocol, fmt.Sprint(h.N), h.Peer, fmt.Sprint(h.Reached),
			mb(h.IdleRSSKB), mb(h.HeldRSSKB), kb(h.BytesPerCall),
			f2(h.Added.P50), f2(h.Added.P99), f2(h.Added.Max),
			f2(h.RampAdded.P50) + " / " + f2(h.RampAdded.P99),
			f1(h.RampSeconds), f2(h.RampCPUSeconds), f2(h.CPUSeconds), note,
		})
	}
	return table([]string{"protocol", "N", "peer", "held", "idle RSS MB", "held RSS MB", "KB/call",
		"added p50 ms", "p99 ms", "max ms", "during ramp p50 / p99 ms", "ramp s", "CPU ramp s", "CPU total s", "note"}, rows)
}

func throughputTable(r *result.Results) string {
	var rows [][]string
	for _, t := range r.Throughput {
		rows = append(rows, []string{
			t.Protocol, t.Peer, fmt.Sprintf("%.0f", t.RPS), f1(t.CPUMicrosPerRequest),
			f2(t.CPUSeconds / max(t.Seconds, 1e-9)), f2(t.LoadCPUSeconds), f2(t.SinkCPUSeconds),
			f2(t.Latency.P50), f2(t.Latency.P99), fmt.Sprint(t.Errors),
		})
	}
	return table([]string{"protocol", "peer", "req/s", "CPU µs/req", "peer cores busy", "load gen CPU s", "sink CPU s",
		"p50 ms", "p99 ms", "errors"}, rows)
}

func burstTable(r *result.Results) string {
	var rows [][]string
	for _, b := range r.Burst {
		peer, cpu, perEvent := b.Peer, f2(b.CPUSeconds), "–"
		if b.Peer == "direct" {
			peer, cpu = "a Go HTTP/2 server answering at once", "–"
		} else if n := b.Events * b.Bursts; n > 0 {
			perEvent = f1(b.CPUSeconds * 1e6 / float64(n))
		}
		rows = append(rows, []string{
			peer, fmt.Sprintf("%d × %d", b.Bursts, b.Events), fmt.Sprint(b.Conns),
			f2(b.HandOff.P50), f2(b.HandOff.P99), f2(b.HandOff.Max), fmt.Sprint(b.Errors), cpu, perEvent, b.Note,
		})
	}
	return table([]string{"answered by", "bursts × events", "connections", "answer p50 ms", "p99 ms", "max ms", "errors",
		"peer CPU s", "CPU µs per event", "note"}, rows)
}

func seedTable(r *result.Results) string {
	var rows [][]string
	for _, s := range r.Seed {
		peer, peerCPU := "–", "–"
		if s.Peer != "" || s.PeakProxyRSSKB > 0 {
			peer, peerCPU = mb(s.PeakProxyRSSKB), f2(s.ProxyCPUSeconds)
		}
		rows = append(rows, []string{
			s.Mode, fmt.Sprintf("%d / %gs", s.Sources, s.PeriodSeconds), fmt.Sprintf("%gs", s.HoldSeconds),
			fmt.Sprintf("%gs", s.DurationSeconds), fmt.Sprint(s.Sent), fmt.Sprint(s.Errors), fmt.Sprint(s.Cut),
			mb(s.PeakSenderRSSKB), fmt.Sprint(s.PeakSenderInflight), peer, fmt.Sprint(s.PeakSinkHeld),
			f2(s.HandOff.P50) + " / " + f2(s.HandOff.P99), f2(s.SenderCPUSeconds), peerCPU,
		})
	}
	return table([]string{"mode", "sources / period", "hold", "run", "sent", "errors", "cut at the end", "sender peak RSS MB",
		"sender peak in flight", "peer peak RSS MB", "sinks peak held", "sender wait p50 / p99 ms", "sender CPU s", "peer CPU s"}, rows)
}

func plots(dir string) string {
	var b strings.Builder
	for _, p := range []struct{ file, alt string }{
		{PlotMemory, "memory vs held calls"},
		{PlotLatency, "added latency vs held calls"},
		{PlotCPU, "CPU per forwarded request"},
		{PlotSeed, "seed scenario over time"},
	} {
		fmt.Fprintf(&b, "![%s](%s)\n\n", p.alt, path.Join(dir, p.file))
	}
	return strings.TrimRight(b.String(), "\n")
}

func table(head []string, rows [][]string) string {
	var b strings.Builder
	b.WriteString("| " + strings.Join(head, " | ") + " |\n|")
	for range head {
		b.WriteString("---|")
	}
	b.WriteString("\n")
	for _, r := range rows {
		b.WriteString("| " + strings.Join(r, " | ") + " |\n")
	}
	return strings.TrimRight(b.String(), "\n")
}

func mb(kib int64) string     { return fmt.Sprintf("%.1f", float64(kib)/1024) }
func kb(bytes float64) string { return fmt.Sprintf("%.1f", bytes/1024) }
func f1(v float64) string     { return fmt.Sprintf("%.1f", v) }
func f2(v float64) string     { return fmt.Sprintf("%.2f", v) }
