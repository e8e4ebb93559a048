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
	"os"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// seedPlot draws, one above the other, the adapter's RSS and its
// in-flight sends over time in each mode, with the proxy's RSS and held
// calls (dashed) in proxy mode.
func seedPlot(runs []*seedRun, path string) error {
	mem := newSeedPlot("mt-ping adapter memory, direct vs through the proxy", "RSS (MB)")
	infl := newSeedPlot("Calls in flight", "calls")
	for i, r := range runs {
		var rss, sends, prss, held plotter.XYs
		for _, x := range r.Samples {
			rss = append(rss, plotter.XY{X: x.T, Y: x.AdapterRSSMB})
			sends = append(sends, plotter.XY{X: x.T, Y: x.AdapterInflight})
			prss = append(prss, plotter.XY{X: x.T, Y: x.ProxyRSSMB})
			held = append(held, plotter.XY{X: x.T, Y: x.ProxyHeld})
		}
		if len(rss) == 0 {
			continue
		}
		if err := addSeedLine(mem, "adapter RSS, "+r.Mode, rss, i, 0); err != nil {
			return err
		}
		if err := addSeedLine(infl, "adapter in-flight sends, "+r.Mode, sends, i, 0); err != nil {
			return err
		}
		if r.Mode == modeProxy {
			if err := addSeedLine(mem, "proxy RSS, proxy", prss, len(runs), 1); err != nil {
				return err
			}
			if err := addSeedLine(infl, "proxy held calls, proxy", held, len(runs), 1); err != nil {
				return err
			}
		}
	}
	mem.Y.Min, infl.Y.Min = 0, 0

	const w, h = 9 * vg.Inch, 4 * vg.Inch
	img := vgimg.NewWith(vgimg.UseWH(w, 2*h), vgimg.UseDPI(96))
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: 2, Cols: 1}
	mem.Draw(tiles.At(dc, 0, 0))
	infl.Draw(tiles.At(dc, 0, 1))
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}

func newSeedPlot(title, y string) *plot.Plot {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = "seconds since the adapter started"
	p.Y.Label.Text = y
	p.Legend.Top, p.Legend.Left = true, true
	p.Add(plotter.NewGrid())
	return p
}

func addSeedLine(p *plot.Plot, name string, xys plotter.XYs, colour, dashes int) error {
	l, err := plotter.NewLine(xys)
	if err != nil {
		return err
	}
	l.Color = plotutil.Color(colour)
	l.Dashes = plotutil.Dashes(dashes)
	l.Width = vg.Points(1.5)
	p.Add(l)
	p.Legend.Add(name, l)
	return nil
}
