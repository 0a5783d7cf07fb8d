package main

import (
	"fmt"

	"github.com/gonox/gonox/examples/internal/plotfile"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/palette"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
)

// history records the per-evaluation figures that the plot shows.
type history struct {
	step       []int
	train, val []float64
	load       [][]float64 // per evaluation: each expert's share of its layer's choices, layer-major
	experts    int
}

func (h *history) add(step int, train, val float64, load []float64) {
	h.step = append(h.step, step)
	h.train = append(h.train, train)
	h.val = append(h.val, val)
	h.load = append(h.load, load)
}

func (h *history) points(ys []float64) plotter.XYs {
	xy := make(plotter.XYs, len(ys))
	for i, y := range ys {
		xy[i].X, xy[i].Y = float64(h.step[i]), y
	}
	return xy
}

// loadGrid is the expert-load heat map: x the evaluation, y the expert.
type loadGrid struct{ h *history }

func (g loadGrid) Dims() (c, r int) { return len(g.h.step), len(g.h.load[0]) }
func (g loadGrid) Z(c, r int) float64 {
	return g.h.load[c][r] * float64(g.h.experts) // 1 = fair share
}
func (g loadGrid) X(c int) float64 { return float64(g.h.step[c]) }
func (g loadGrid) Y(r int) float64 { return float64(r) }

// plot writes the loss curves above the expert-load heat map as a PNG.
func (h *history) plot(path, title string) error {
	lp := plot.New()
	lp.Title.Text = title
	lp.X.Label.Text = "step"
	lp.Y.Label.Text = "loss (nats/char)"
	if err := plotutil.AddLinePoints(lp, "train", h.points(h.train), "validation", h.points(h.val)); err != nil {
		return err
	}
	lp.Legend.Top = true

	hp := plot.New()
	hp.Title.Text = "expert load: share of the layer's token choices ÷ fair share"
	hp.X.Label.Text = "step"
	hp.Y.Label.Text = fmt.Sprintf("layer × %d + expert", h.experts)
	g := loadGrid{h}
	hi := 2.0
	cols, rows := g.Dims()
	for c := range cols {
		for r := range rows {
			hi = max(hi, g.Z(c, r))
		}
	}
	hm := plotter.NewHeatMap(g, palette.Heat(16, 1)) // dark red → yellow → white
	hm.Min, hm.Max = 0, hi
	hp.Add(hm)
	hp.Legend.Add(fmt.Sprintf("dark red 0, white %.1f (1 = fair share)", hi))

	return plotfile.WriteStacked(path, lp, hp)
}
