package main

import (
	"github.com/gonox/gonox/examples/internal/plots"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
)

// history records the per-evaluation figures that the plot shows, with
// each evaluation's true step and the training time up to it (a resumed
// run continues the series saved in its checkpoint).
type history struct {
	step       []int
	secs       []float64 // wall-clock seconds of training up to the evaluation
	train, val []float64
}

func (h *history) add(step int, secs, train, val float64) {
	h.step = append(h.step, step)
	h.secs = append(h.secs, secs)
	h.train = append(h.train, train)
	h.val = append(h.val, val)
}

// offset is the training time of the evaluations so far: a resumed run
// counts its time from there.
func (h *history) offset() float64 {
	if len(h.secs) == 0 {
		return 0
	}
	return h.secs[len(h.secs)-1]
}

func (h *history) points(ys []float64) plotter.XYs {
	xy := make(plotter.XYs, len(ys))
	for i, y := range ys {
		xy[i].X, xy[i].Y = float64(h.step[i]), y
	}
	return xy
}

// lossPlot returns the loss curves, the training loss (the mean over the
// steps since the evaluation before) and the validation loss, with the
// legend in the corner they leave empty.
func (h *history) lossPlot(title string) (*plot.Plot, error) {
	lp := plot.New()
	lp.Title.Text = title
	lp.X.Label.Text = "step"
	lp.Y.Label.Text = "loss (nats/character)"
	lp.X.Tick.Marker = plots.NiceTicks{Integer: true}
	lp.Y.Tick.Marker = plots.NiceTicks{}
	train, val := h.points(h.train), h.points(h.val)
	if err := plotutil.AddLinePoints(lp, "train", train, "validation", val); err != nil {
		return nil, err
	}
	lp.Y.Min = 0
	lp.Legend.Top, lp.Legend.Left = plots.EmptiestCorner([]plotter.XYs{train, val}, lp.X.Min, lp.X.Max, lp.Y.Min, lp.Y.Max)
	return lp, nil
}

// plot writes the loss curves as a PNG.
func (h *history) plot(path, title string) error {
	lp, err := h.lossPlot(title)
	if err != nil {
		return err
	}
	return plots.WriteStacked(path, lp)
}
