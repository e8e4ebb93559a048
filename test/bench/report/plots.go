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

// Package report turns the scenario bench's results into PNG plots and
// the generated tables of docs/benchmarks.md.
package report

import (
	"cmp"
	"fmt"
	"image/color"
	"math"
	"path/filepath"
	"slices"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"knative.dev/event-forwarding-proxy/test/bench/result"
)

// Plot files, written into the plot folder.
const (
	PlotMemory  = "memory.png"
	PlotLatency = "latency.png"
	PlotCPU     = "cpu.png"
	PlotSeed    = "seed.png"
)

// Reference figures drawn on the plots.
const (
	upstreamBytesPerCall = 30 << 10 // 100,000 in flight ≈ 3 GB upstream
	targetBytesPerCall   = 8 << 10
	targetP50Ms          = 2
	targetP99Ms          = 50
	targetCPUMicros      = 50
)

// Targets judged in the table only.
const (
	targetLeanBytesPerCall   = 2.5 * (1 << 10)
	targetAsyncBytesPerEvent = 3 << 10
	targetBurstP99Ms         = 250
	targetThroughputRatio    = 0.8
)

var gray = color.Gray{Y: 120}

// series is one line: a peer over one protocol.
type series struct {
	name string
	xys  plotter.XYs
}

// heldSeries groups held runs into one series per peer and protocol, in
// a stable order, with y taken from each run by f (runs f rejects, with
// ok false, are left out).
func heldSeries(runs []result.HeldRun, f func(result.HeldRun) (float64, bool)) []series {
	by := map[string]*series{}
	var order []string
	for _, r := range runs {
		y, ok := f(r)
		if !ok || r.Reached == 0 {
			continue
		}
		k := r.Peer + " " + r.Protocol
		if by[k] == nil {
			by[k] = &series{name: k}
			order = append(order, k)
		}
		by[k].xys = append(by[k].xys, plotter.XY{X: float64(r.N), Y: y})
	}
	out := make([]series, 0, len(order))
	for _, k := range order {
		s := by[k]
		slices.SortFunc(s.xys, func(a, b plotter.XY) int { return cmp.Compare(a.X, b.X) })
		out = append(out, *s)
	}
	return out
}

// addSeries draws each series with points, a colour per series and a
// dash pattern chosen by dash.
func addSeries(p *plot.Plot, ss []series, first int, dash func(string) int) error {
	for i, s := range ss {
		l, pts, err := plotter.NewLinePoints(s.xys)
		if err != nil {
			return err
		}
		l.Color = plotutil.Color(first + i)
		l.Dashes = plotutil.Dashes(dash(s.name))
		pts.Color = l.Color
		pts.Shape = plotutil.Shape(first + i)
		p.Add(l, pts)
		p.Legend.Add(s.name, l, pts)
	}
	return nil
}

// refLine draws y = f(x) over [x0, x1] as a gray dashed reference.
func refLine(p *plot.Plot, name string, x0, x1 float64, f func(float64) float64, dashes int) error {
	var xys plotter.XYs
	for i := range 41 {
		x := x0 * math.Pow(x1/x0, float64(i)/40)
		xys = append(xys, plotter.XY{X: x, Y: f(x)})
	}
	l, err := plotter.NewLine(xys)
	if err != nil {
		return err
	}
	l.Color = gray
	l.Dashes = plotutil.Dashes(dashes)
	l.Width = vg.Points(1.5)
	p.Add(l)
	if name != "" {
		p.Legend.Add(name, l)
	}
	return nil
}

func xRange(runs []result.HeldRun) (float64, float64) {
	lo, hi := 0.0, 0.0
	for _, r := range runs {
		x := float64(r.N)
		if lo == 0 || x < lo {
			lo = x
		}
		hi = max(hi, x)
	}
	if lo == 0 {
		return 1, 10
	}
	if hi <= lo {
		hi = lo * 10
	}
	return lo, hi
}

func newPlot(title, x, y string) *plot.Plot {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = x
	p.Y.Label.Text = y
	p.Legend.Top = true
	p.Legend.Left = true
	p.Add(plotter.NewGrid())
	return p
}

// protoDash: solid for h2c, dashed for HTTP/1.1.
func protoDash(name string) int {
	if len(name) > 5 && name[len(name)-5:] == "http1" {
		return 1
	}
	return 0
}

// memoryPlot: memory over idle against held calls.
func memoryPlot(res *result.Results, path string) error {
	p := newPlot("Resident memory held vs calls held (slow sink)", "held calls", "RSS over idle (MB)")
	ss := heldSeries(res.Held, func(r result.HeldRun) (float64, bool) {
		return float64(r.HeldRSSKB-r.IdleRSSKB) / 1024, true
	})
	if err := addSeries(p, ss, 0, protoDash); err != nil {
		return err
	}
	_, hi := xRange(res.Held)
	lo := 0.0001 * hi
	if err := refLine(p, "upstream adapter, ≈30 KB/call", lo, hi, func(x float64) float64 { return x * upstreamBytesPerCall / (1 << 20) }, 2); err != nil {
		return err
	}
	if err := refLine(p, "target, 8 KB/call", lo, hi, func(x float64) float64 { return x * targetBytesPerCall / (1 << 20) }, 3); err != nil {
		return err
	}
	p.X.Min, p.Y.Min = 0, 0
	p.X.Tick.Marker = plot.TickerFunc(wholeTicks)
	return p.Save(8*vg.Inch, 5*vg.Inch, path)
}

// latencyPlot: added latency against held calls, log-log, with
// upstream's "1-2 s per 500 in flight" drawn: p50 and p99 while N are
// held, and p99 while they are being opened, one panel each.
func latencyPlot(res *result.Results, path string) error {
	panels := []struct {
		title string
		f     func(result.HeldRun) result.Latency
		pick  func(result.Latency) float64
	}{
		{"p50 added latency while N calls are held", func(r result.HeldRun) result.Latency { return r.Added }, func(l result.Latency) float64 { return l.P50 }},
		{"p99 added latency while N calls are held", func(r result.HeldRun) result.Latency { return r.Added }, func(l result.Latency) float64 { return l.P99 }},
		{"p99 added latency while the N calls are being opened", func(r result.HeldRun) result.Latency { return r.RampAdded }, func(l result.Latency) float64 { return l.P99 }},
	}
	var ps []*plot.Plot
	lo, hi := xRange(res.Held)
	for _, pn := range panels {
		p := newPlot(pn.title, "held calls", "added latency (ms)")
		p.X.Scale, p.Y.Scale = plot.LogScale{}, plot.LogScale{}
		p.X.Tick.Marker, p.Y.Tick.Marker = plot.LogTicks{Prec: -1}, plot.LogTicks{Prec: -1}
		const floor = 0.01 // ms: log axes need y > 0
		ss := heldSeries(res.Held, func(r result.HeldRun) (float64, bool) {
			l := pn.f(r)
			return max(pn.pick(l), floor), l.Count > 0
		})
		if err := addSeries(p, ss, 0, protoDash); err != nil {
			return err
		}
		refs := []struct {
			name   string
			f      func(float64) float64
			dashes int
		}{
			{"upstream adapter: 1-2 s per 500 in flight", func(x float64) float64 { return x / 500 * 1000 }, 2},
			{"", func(x float64) float64 { return x / 500 * 2000 }, 2},
			{"target p99: 50 ms", func(float64) float64 { return targetP99Ms }, 3},
			{"target p50: 2 ms", func(float64) float64 { return targetP50Ms }, 4},
		}
		for _, r := range refs {
			if err := refLine(p, r.name, lo, hi, r.f, r.dashes); err != nil {
				return err
			}
		}
		// Room above the data for the legend, top left.
		p.Y.Min, p.Y.Max = floor, 1e7
		ps = append(ps, p)
	}
	return saveStacked(path, ps...)
}

// wholeTicks are the default ticks labelled without decimals.
func wholeTicks(lo, hi float64) []plot.Tick {
	ts := plot.DefaultTicks{}.Ticks(lo, hi)
	for i := range ts {
		if ts[i].Label != "" {
			ts[i].Label = fmt.Sprintf("%.0f", ts[i].Value)
		}
	}
	return ts
}

// cpuPlot: CPU per forwarded request, a bar per peer and protocol.
func cpuPlot(res *result.Results, path string) error {
	p := newPlot("Peer CPU per forwarded request (fast sink)", "", "CPU µs per request")
	var names []string
	var vals plotter.Values
	for _, r := range res.Throughput {
		if r.Requests == 0 {
			continue
		}
		names = append(names, fmt.Sprintf("%s\n%s", r.Peer, r.Protocol))
		vals = append(vals, r.CPUMicrosPerRequest)
	}
	if len(vals) == 0 {
		vals, names = plotter.Values{0}, []string{"no data"}
	}
	b, err := plotter.NewBarChart(vals, vg.Points(28))
	if err != nil {
		return err
	}
	b.Color = plotutil.Color(0)
	b.LineStyle.Width = 0
	p.Add(b)
	p.NominalX(names...)
	t := plotter.NewFunction(func(float64) float64 { return targetCPUMicros })
	t.XMin, t.XMax = -0.5, float64(len(vals))-0.5
	t.Color, t.Dashes, t.Width = gray, plotutil.Dashes(3), vg.Points(1.5)
	p.Add(t)
	p.Legend.Add("target over HTTP/1.1: 50 µs", t)
	p.Legend.Left = false
	p.Y.Min = 0
	return p.Save(vg.Length(max(6, len(vals)))*vg.Inch, 5*vg.Inch, path)
}

// seedPlot: memory of the sender (direct and async) and of the proxy over
// the seed run, and the calls the sinks hold.
func seedPlot(res *result.Results, path string) error {
	mem := newPlot("Seed scenario: memory", "seconds", "RSS (MB)")
	held := newPlot("Seed scenario: calls in flight", "seconds", "calls")
	i := 0
	for _, r := range res.Seed {
		var snd, px, infl, sink plotter.XYs
		for _, s := range r.Samples {
			snd = append(snd, plotter.XY{X: s.T, Y: float64(s.SenderRSSKB) / 1024})
			px = append(px, plotter.XY{X: s.T, Y: float64(s.ProxyRSSKB) / 1024})
			infl = append(infl, plotter.XY{X: s.T, Y: float64(s.SenderInflight)})
			sink = append(sink, plotter.XY{X: s.T, Y: float64(s.SinkHeld)})
		}
		if len(snd) == 0 {
			continue
		}
		ms := []series{{"sender RSS, " + r.Mode, snd}}
		hs := []series{{"sender in flight, " + r.Mode, infl}, {"sinks hold, " + r.Mode, sink}}
		if r.PeakProxyRSSKB > 0 {
			ms = append(ms, series{"peer RSS, " + r.Mode, px})
		}
		if err := addSeries(mem, ms, i, func(string) int { return 0 }); err != nil {
			return err
		}
		if err := addSeries(held, hs, i+len(ms), func(string) int { return 0 }); err != nil {
			return err
		}
		i += len(ms) + len(hs)
	}
	mem.Y.Min, held.Y.Min = 0, 0
	return saveStacked(path, mem, held)
}

// saveStacked writes plots one above the other into one PNG.
func saveStacked(path string, ps ...*plot.Plot) error {
	const w, h = 9 * vg.Inch, 4.5 * vg.Inch
	img := newImage(w, h*vg.Length(len(ps)))
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: len(ps), Cols: 1}
	for i, p := range ps {
		p.Draw(tiles.At(dc, 0, i))
	}
	return saveImage(img, path)
}

// Plots writes every plot into dir.
func Plots(res *result.Results, dir string) error {
	for name, f := range map[string]func(*result.Results, string) error{
		PlotMemory: memoryPlot, PlotLatency: latencyPlot, PlotCPU: cpuPlot, PlotSeed: seedPlot,
	} {
		if err := f(res, filepath.Join(dir, name)); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
	}
	return nil
}
