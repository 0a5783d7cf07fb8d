package main

import (
	"fmt"
	"os"
	"path/filepath"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// history records the per-epoch figures that the plot shows.
type history struct {
	loss, train, test []float64
}

func (h *history) add(loss, train, test float64) {
	h.loss = append(h.loss, loss)
	h.train = append(h.train, train)
	h.test = append(h.test, test)
}

func points(ys []float64) plotter.XYs {
	xy := make(plotter.XYs, len(ys))
	for i, y := range ys {
		xy[i].X, xy[i].Y = float64(i+1), y
	}
	return xy
}

// plot writes the loss curve above the accuracy curves as a PNG.
func (h *history) plot(path, title string) error {
	lp := plot.New()
	lp.Title.Text = title
	lp.X.Label.Text = "epoch"
	lp.Y.Label.Text = "training loss"
	if err := plotutil.AddLinePoints(lp, "loss", points(h.loss)); err != nil {
		return err
	}
	ap := plot.New()
	ap.X.Label.Text = "epoch"
	ap.Y.Label.Text = "accuracy"
	ap.Y.Min, ap.Y.Max = 0, 1
	if err := plotutil.AddLinePoints(ap, "train", points(h.train), "test", points(h.test)); err != nil {
		return err
	}
	ap.Legend.Top = false
	ap.Legend.Left = false

	const w, ht = 6 * vg.Inch, 7 * vg.Inch
	img := vgimg.New(w, ht)
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: 2, Cols: 1, PadTop: vg.Points(4), PadBottom: vg.Points(4), PadX: vg.Points(4), PadY: vg.Points(8)}
	canvases := plot.Align([][]*plot.Plot{{lp}, {ap}}, tiles, dc)
	lp.Draw(canvases[0][0])
	ap.Draw(canvases[1][0])

	if dir := filepath.Dir(path); dir != "" {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("plot: %w", err)
		}
	}
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("plot: %w", err)
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		f.Close()
		return fmt.Errorf("plot: writing %s: %w", path, err)
	}
	return f.Close()
}
