package report

import (
	"os"

	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/vgimg"
)

func newImage(w, h vg.Length) *vgimg.Canvas {
	return vgimg.NewWith(vgimg.UseWH(w, h), vgimg.UseDPI(96))
}

func saveImage(c *vgimg.Canvas, path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := (vgimg.PngCanvas{Canvas: c}).WriteTo(f); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}
