package main

import (
	"fmt"
	"image/color"
	"math"

	"github.com/gonox/gonox/examples/internal/plots"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
)

// history records the per-evaluation figures that the plot shows, with
// each evaluation's true step (a resumed run continues the series saved
// in its checkpoint).
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

// loadGrid is the expert-load heat map: a column per evaluation, centred
// on its step, and a row per (layer, expert), layer-major. Z is the
// expert's load over its fair share (1: balanced).
type loadGrid struct{ h *history }

func (g loadGrid) Dims() (c, r int) { return len(g.h.step), len(g.h.load[0]) }
func (g loadGrid) Z(c, r int) float64 {
	return g.h.load[c][r] * float64(g.h.experts)
}
func (g loadGrid) X(c int) float64 { return float64(g.h.step[c]) }
func (g loadGrid) Y(r int) float64 { return float64(r) }

// loadMax is the top of the colour scale: at least twice the fair share,
// so that balanced runs keep the same colours, and the largest load seen.
func (h *history) loadMax() float64 {
	hi := 2.0
	g := loadGrid{h}
	cols, rows := g.Dims()
	for c := range cols {
		for r := range rows {
			if z := g.Z(c, r); !math.IsNaN(z) {
				hi = max(hi, z)
			}
		}
	}
	return math.Ceil(hi*2) / 2
}

// plots returns the figure's rows: the loss curves with their legend on
// the side, and the expert-load heat map with its colour bar.
func (h *history) plots(title string) ([]plots.Row, error) {
	lp := plot.New()
	lp.Title.Text = title
	lp.X.Label.Text = "step"
	lp.Y.Label.Text = "loss (nats/char)"
	steps := plots.ValueTicks{Values: floats(h.step), MaxLabels: 8} // the heat map's columns
	lp.X.Tick.Marker = steps
	lp.Y.Tick.Marker = plots.NiceTicks{}
	if err := plotutil.AddLinePoints(lp, "train", h.points(h.train), "validation", h.points(h.val)); err != nil {
		return nil, err
	}
	legend := lp.Legend
	lp.Legend = plot.NewLegend() // drawn on the side instead

	hp := plot.New()
	hp.Title.Text = "expert load: share of the layer's token choices ÷ fair share"
	hp.X.Label.Text = "step (one column per evaluation)"
	hp.Y.Label.Text = fmt.Sprintf("layer (rows: its %d experts)", h.experts)
	hp.X.Tick.Marker = steps
	layers := len(h.load[0]) / h.experts
	hp.Y.Tick.Marker = plots.GroupTicks{Groups: layers, Size: h.experts, Label: func(g int) string { return fmt.Sprint(g + 1) }}
	cm := plots.NewViridis(0, h.loadMax())
	hm := plotter.NewHeatMap(loadGrid{h}, cm.Palette(256))
	hm.Min, hm.Max = cm.Min(), cm.Max()
	hm.NaN = color.Gray{Y: 128}
	hp.Add(hm)
	// The loss curves' steps line up with the heat map's columns.
	lp.X.Min, lp.X.Max, _, _ = hm.DataRange()
	// Thin white lines between the layers' blocks of rows.
	for l := 1; l < layers; l++ {
		y := float64(l*h.experts) - 0.5
		xmin, xmax, _, _ := hm.DataRange()
		line, err := plotter.NewLine(plotter.XYs{{X: xmin, Y: y}, {X: xmax, Y: y}})
		if err != nil {
			return nil, err
		}
		line.Color, line.Width = color.White, 1.5
		hp.Add(line)
	}
	bar := plots.ColorBar(cm, "load ÷ fair share (1 = balanced)")
	return []plots.Row{{Plot: lp, Legend: &legend}, {Plot: hp, Side: bar}}, nil
}

// plot writes the loss curves above the expert-load heat map as a PNG.
func (h *history) plot(path, title string) error {
	rows, err := h.plots(title)
	if err != nil {
		return err
	}
	return plots.WriteRows(path, rows...)
}

func floats(xs []int) []float64 {
	out := make([]float64, len(xs))
	for i, x := range xs {
		out[i] = float64(x)
	}
	return out
}
