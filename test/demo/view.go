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

package demo

import (
	"fmt"
	"io"
	"strings"
	"time"
)

// reading is what one refresh of the view shows for a phase.
type reading struct {
	T           time.Duration
	Sender      SenderReport
	SenderRSSKB int64
	ProxyHeld   int64
	ProxyRSSKB  int64
	SinkHeld    int64
	// Seen is set once the phase has had a reading.
	Seen bool
}

// view draws the live table: a header and one row per phase. Live, it
// redraws the block in place with ANSI escapes (cursor up, erase line);
// otherwise it prints one line per refresh, for logs and pipes.
type view struct {
	out    io.Writer
	live   bool
	phase  time.Duration
	names  []string
	rows   []reading
	drawn  int // lines of the block already on screen (live)
	header string
}

const rowFormat = "%-10s %7s | %9s %7s %10s %17s | %9s %7s | %9s"

func newView(out io.Writer, live bool, phase time.Duration, names []string) *view {
	return &view{
		out: out, live: live, phase: phase, names: names, rows: make([]reading, len(names)),
		header: fmt.Sprintf(rowFormat, "phase", "time", "in-flight", "RSS MB", "goroutines", "hand-off p50/p99", "held", "RSS MB", "held"),
	}
}

// update records phase i's reading and draws.
func (v *view) update(i int, r reading) {
	r.Seen = true
	v.rows[i] = r
	if !v.live {
		fmt.Fprintln(v.out, v.line(i))
		return
	}
	v.draw()
}

// draw redraws the whole block (live only).
func (v *view) draw() {
	var b strings.Builder
	if v.drawn > 0 {
		fmt.Fprintf(&b, "\x1b[%dA", v.drawn)
	}
	lines := []string{
		fmt.Sprintf("%-18s | %-46s | %-17s | %s", "", "sender (the adapter)", "proxy", "sink"),
		v.header,
	}
	for i := range v.rows {
		lines = append(lines, v.row(i))
	}
	for _, l := range lines {
		b.WriteString("\r\x1b[2K" + l + "\n")
	}
	v.drawn = len(lines)
	_, _ = io.WriteString(v.out, b.String())
}

// row is phase i as a table row.
func (v *view) row(i int) string {
	r := v.rows[i]
	if !r.Seen {
		return fmt.Sprintf(rowFormat, v.names[i], "-", "-", "-", "-", "-", "-", "-", "-")
	}
	return fmt.Sprintf(rowFormat, v.names[i], clock(r.T, v.phase),
		fmt.Sprint(r.Sender.Inflight), mb(r.SenderRSSKB), fmt.Sprint(r.Sender.Goroutines), handOff(r.Sender),
		fmt.Sprint(r.ProxyHeld), mb(r.ProxyRSSKB), fmt.Sprint(r.SinkHeld))
}

// line is phase i as one self-describing log line.
func (v *view) line(i int) string {
	r := v.rows[i]
	return fmt.Sprintf("%-9s %6s  sender: in-flight %d, RSS %s MB, %d goroutines, hand-off p50/p99 %s  proxy: held %d, RSS %s MB  sink: held %d",
		v.names[i], clock(r.T, v.phase), r.Sender.Inflight, mb(r.SenderRSSKB), r.Sender.Goroutines, handOff(r.Sender),
		r.ProxyHeld, mb(r.ProxyRSSKB), r.SinkHeld)
}

func clock(t, of time.Duration) string {
	return fmt.Sprintf("%d/%ds", int(t.Seconds()), int(of.Seconds()))
}

func mb(kb int64) string { return fmt.Sprintf("%.1f", float64(kb)/1024) }

// handOff shows the percentiles of the sends that ended in the last
// interval, "-" when none did (direct, until the sink answers).
func handOff(r SenderReport) string {
	if r.N == 0 {
		return "-"
	}
	return duration(r.P50) + " / " + duration(r.P99)
}

// duration shows d with a precision that suits its size.
func duration(d time.Duration) string {
	switch {
	case d >= time.Second:
		return fmt.Sprintf("%.1fs", d.Seconds())
	case d >= 10*time.Millisecond:
		return fmt.Sprintf("%dms", d.Milliseconds())
	default:
		return fmt.Sprintf("%.1fms", float64(d)/float64(time.Millisecond))
	}
}
