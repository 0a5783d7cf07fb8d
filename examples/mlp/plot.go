package main

import (
	"fmt"
	"math"

	"github.com/gonox/gonox/examples/internal/plotfile"

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

// niceTicks marks a range at steps of 1, 2 or 5 times a power of ten,
// about five of them, labelled with as many decimals as the step needs
// (0, 0.5, 1.0, ...); with integer set the step is at least 1 (epochs).
type niceTicks struct{ integer bool }

// Ticks implements plot.Ticker.
func (n niceTicks) Ticks(lo, hi float64) []plot.Tick {
	if !(hi > lo) {
		return []plot.Tick{{Value: lo, Label: fmt.Sprint(lo)}}
	}
	raw := (hi - lo) / 5
	p := math.Pow(10, math.Floor(math.Log10(raw)))
	step := 10 * p
	for _, m := range []float64{1, 2, 5} {
		if m*p >= raw {
			step = m * p
			break
		}
	}
	if n.integer {
		step = math.Max(1, math.Round(step))
	}
	decimals := max(0, int(-math.Floor(math.Log10(step)+1e-9)))
	var out []plot.Tick
	for i := math.Ceil(lo/step - 1e-9); i*step <= hi+1e-9*step; i++ {
		v := i * step
		if v == 0 {
			v = 0 // not -0
		}
		out = append(out, plot.Tick{Value: v, Label: fmt.Sprintf("%.*f", decimals, v)})
	}
	return out
}

// emptiestCorner returns the corner of the box [x0,x1]×[y0,y1] whose
// quarter holds the fewest points of the series: where a legend covers
// the least of the curves.
func emptiestCorner(series []plotter.XYs, x0, x1, y0, y1 float64) (top, left bool) {
	best := math.MaxInt
	for _, c := range []struct{ top, left bool }{{true, false}, {false, false}, {true, true}, {false, true}} {
		n := 0
		for _, s := range series {
			for _, p := range s {
				inX := p.X >= (x0+x1)/2
				if c.left {
					inX = p.X <= (x0+x1)/2
				}
				inY := p.Y <= (y0+y1)/2
				if c.top {
					inY = p.Y >= (y0+y1)/2
				}
				if inX && inY {
					n++
				}
			}
		}
		if n < best {
			best, top, left = n, c.top, c.left
		}
	}
	return top, left
}

// plots returns the loss plot (one curve, no legend: the axis says what it
// is) and the accuracy plot (train and test, the legend in the corner the
// curves leave empty).
func (h *history) plots(title string) (*plot.Plot, *plot.Plot, error) {
	lp := plot.New()
	lp.Title.Text = title
	lp.X.Label.Text = "epoch"
	lp.Y.Label.Text = "training loss"
	lp.X.Tick.Marker = niceTicks{integer: true}
	lp.Y.Tick.Marker = niceTicks{}
	line, pts, err := plotter.NewLinePoints(h.points(h.loss))
	if err != nil {
		return nil, nil, err
	}
	lp.Add(line, pts)
	lp.Y.Min = 0

	ap := plot.New()
	ap.X.Label.Text = "epoch"
	ap.Y.Label.Text = "accuracy"
	ap.X.Tick.Marker = niceTicks{integer: true}
	ap.Y.Tick.Marker = niceTicks{}
	train, test := h.points(h.train), h.points(h.test)
	if err := plotutil.AddLinePoints(ap, "train", train, "test", test); err != nil {
		return nil, nil, err
	}
	ap.Y.Min, ap.Y.Max = 0, 1
	ap.Legend.Top, ap.Legend.Left = emptiestCorner([]plotter.XYs{train, test}, ap.X.Min, ap.X.Max, 0, 1)
	return lp, ap, nil
}

// plot writes the loss curve above the accuracy curves as a PNG.
func (h *history) plot(path, title string) error {
	lp, ap, err := h.plots(title)
	if err != nil {
		return err
	}
	return plotfile.WriteStacked(path, lp, ap)
}
