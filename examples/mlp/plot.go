package main

import (
	"math"

	"github.com/gonox/gonox/examples/internal/plots"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
)

// history records the per-epoch figures that the plot shows, with each
// epoch's true number (a resumed run continues the numbering).
type history struct {
	epoch             []int
	loss, train, test []float64
}

func (h *history) add(epoch int, loss, train, test float64) {
	h.epoch = append(h.epoch, epoch)
	h.loss = append(h.loss, loss)
	h.train = append(h.train, train)
	h.test = append(h.test, test)
}

// points returns the curve of ys against the true epoch numbers, without
// the epochs whose figures are unknown (NaN: resumed from a checkpoint that
// did not keep them).
func (h *history) points(ys []float64) plotter.XYs {
	var xy plotter.XYs
	for i, y := range ys {
		if !math.IsNaN(y) {
			xy = append(xy, plotter.XY{X: float64(h.epoch[i]), Y: y})
		}
	}
	return xy
}

// plots returns the loss plot (one curve, no legend: the axis says what it
// is) and the accuracy plot (train and test, the legend in the corner the
// curves leave empty).
func (h *history) plots(title string) (*plot.Plot, *plot.Plot, error) {
	lp := plot.New()
	lp.Title.Text = title
	lp.X.Label.Text = "epoch"
	lp.Y.Label.Text = "training loss"
	lp.X.Tick.Marker = plots.NiceTicks{Integer: true}
	lp.Y.Tick.Marker = plots.NiceTicks{}
	line, pts, err := plotter.NewLinePoints(h.points(h.loss))
	if err != nil {
		return nil, nil, err
	}
	lp.Add(line, pts)
	lp.Y.Min = 0

	ap := plot.New()
	ap.X.Label.Text = "epoch"
	ap.Y.Label.Text = "accuracy"
	ap.X.Tick.Marker = plots.NiceTicks{Integer: true}
	ap.Y.Tick.Marker = plots.NiceTicks{}
	train, test := h.points(h.train), h.points(h.test)
	if err := plotutil.AddLinePoints(ap, "train", train, "test", test); err != nil {
		return nil, nil, err
	}
	ap.Y.Min, ap.Y.Max = 0, 1
	ap.Legend.Top, ap.Legend.Left = plots.EmptiestCorner([]plotter.XYs{train, test}, ap.X.Min, ap.X.Max, 0, 1)
	return lp, ap, nil
}

// plot writes the loss curve above the accuracy curves as a PNG.
func (h *history) plot(path, title string) error {
	lp, ap, err := h.plots(title)
	if err != nil {
		return err
	}
	return plots.WriteStacked(path, lp, ap)
}
