// Package curves holds the per-epoch curves of the examples that train
// image classifiers epoch by epoch (mlp, cnn): the mean training loss and
// the train and test accuracy of every epoch, their plots, and their form
// in a checkpoint, so that the plot of a resumed run shows every epoch
// with its true number.
package curves

import (
	"math"

	"github.com/gonox/gonox/examples/internal/plots"
	"github.com/gonox/gonox/tensor"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
)

// Epochs records the figures of each epoch with its true number (a
// resumed run continues the numbering). A figure that is not known is
// NaN, and left out of the plots.
type Epochs struct {
	Epoch             []int     // the number of each epoch, from 1
	Loss, Train, Test []float64 // mean training loss, train and test accuracy
}

// Add records epoch's figures.
func (h *Epochs) Add(epoch int, loss, train, test float64) {
	h.Epoch = append(h.Epoch, epoch)
	h.Loss = append(h.Loss, loss)
	h.Train = append(h.Train, train)
	h.Test = append(h.Test, test)
}

// Points returns the curve of ys (h.Loss, h.Train or h.Test) against the
// true epoch numbers, without the epochs whose figures are unknown (NaN:
// resumed from a checkpoint that did not keep them).
func (h *Epochs) Points(ys []float64) plotter.XYs {
	var xy plotter.XYs
	for i, y := range ys {
		if !math.IsNaN(y) {
			xy = append(xy, plotter.XY{X: float64(h.Epoch[i]), Y: y})
		}
	}
	return xy
}

// LossPlot returns the plot of the training loss, titled title: one
// curve, no legend (the axis says what it is), from 0.
func (h *Epochs) LossPlot(title string) (*plot.Plot, error) {
	lp := plot.New()
	lp.Title.Text = title
	lp.X.Label.Text = "epoch"
	lp.Y.Label.Text = "training loss"
	lp.X.Tick.Marker = plots.NiceTicks{Integer: true}
	lp.Y.Tick.Marker = plots.NiceTicks{}
	line, pts, err := plotter.NewLinePoints(h.Points(h.Loss))
	if err != nil {
		return nil, err
	}
	lp.Add(line, pts)
	lp.Y.Min = 0
	return lp, nil
}

// AccuracyPlot returns the plot of the train and test accuracy, its axis
// from yMin to 1, the legend in the corner the curves leave empty.
func (h *Epochs) AccuracyPlot(yMin float64) (*plot.Plot, error) {
	ap := plot.New()
	ap.X.Label.Text = "epoch"
	ap.Y.Label.Text = "accuracy"
	ap.X.Tick.Marker = plots.NiceTicks{Integer: true}
	ap.Y.Tick.Marker = plots.NiceTicks{}
	train, test := h.Points(h.Train), h.Points(h.Test)
	if err := plotutil.AddLinePoints(ap, "train", train, "test", test); err != nil {
		return nil, err
	}
	ap.Y.Min, ap.Y.Max = yMin, 1
	ap.Legend.Top, ap.Legend.Left = plots.EmptiestCorner([]plotter.XYs{train, test}, ap.X.Min, ap.X.Max, ap.Y.Min, ap.Y.Max)
	return ap, nil
}

// Saved is the curves as a checkpoint holds them: one entry per
// completed epoch, epoch i+1 at index i.
type Saved struct {
	Loss, Train, Test *tensor.Tensor // f32[epochs]
}

// Saved returns h as a checkpoint holds it. h must hold epochs 1 to n in
// order.
func (h *Epochs) Saved() Saved {
	return Saved{
		Loss:  tensor.FromFloat64(h.Loss, len(h.Loss)),
		Train: tensor.FromFloat64(h.Train, len(h.Train)),
		Test:  tensor.FromFloat64(h.Test, len(h.Test)),
	}
}

// SavedLike is a Saved of n epochs, the shape to restore a checkpoint's
// into.
func SavedLike(n int) Saved {
	return Saved{Loss: tensor.Zeros(tensor.Float32, n), Train: tensor.Zeros(tensor.Float32, n), Test: tensor.Zeros(tensor.Float32, n)}
}

// FromSaved returns the curves a checkpoint held: epochs 1 to n.
func FromSaved(s Saved) Epochs {
	var h Epochs
	loss, train, test := s.Loss.Float64s(), s.Train.Float64s(), s.Test.Float64s()
	for i := range loss {
		h.Add(i+1, loss[i], train[i], test[i])
	}
	return h
}
