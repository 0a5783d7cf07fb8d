package plots

import (
	"fmt"
	"math"

	"gonum.org/v1/plot"
)

// NiceTicks marks a range at steps of 1, 2 or 5 times a power of ten,
// about five of them, labelled with as many decimals as the step needs
// (0, 0.5, 1.0, ...); with Integer set the step is at least 1 (epochs).
type NiceTicks struct{ Integer bool }

// Ticks implements plot.Ticker.
func (n NiceTicks) Ticks(lo, hi float64) []plot.Tick {
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
	if n.Integer {
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

// ValueTicks marks exactly the given values (the steps a heat map has a
// column for, so that each tick sits at the centre of its cell): at most
// about MaxLabels of them labelled, evenly spaced among the values and the
// last always, the others with a minor tick.
type ValueTicks struct {
	Values    []float64
	MaxLabels int
}

// Ticks implements plot.Ticker.
func (v ValueTicks) Ticks(lo, hi float64) []plot.Tick {
	n := len(v.Values)
	every := 1
	if m := max(v.MaxLabels, 1); n > m {
		every = (n + m - 1) / m
	}
	var out []plot.Tick
	for i, x := range v.Values {
		if x < lo || x > hi {
			continue
		}
		t := plot.Tick{Value: x}
		// Label every every-th value counted back from the last, so that
		// the last (the step the run ended at) is always labelled.
		if (n-1-i)%every == 0 {
			t.Label = fmt.Sprint(x)
		}
		out = append(out, t)
	}
	return out
}

// GroupTicks marks rows 0..Groups·Size-1 of a heat map grouped in blocks
// of Size (the experts of each layer): one label per block at its centre,
// Label(g) for block g, and a minor tick at every row.
type GroupTicks struct {
	Groups, Size int
	Label        func(g int) string
}

// Ticks implements plot.Ticker.
func (g GroupTicks) Ticks(lo, hi float64) []plot.Tick {
	var out []plot.Tick
	for r := range g.Groups * g.Size {
		out = append(out, plot.Tick{Value: float64(r)})
	}
	for b := range g.Groups {
		out = append(out, plot.Tick{Value: float64(b*g.Size) + float64(g.Size-1)/2, Label: g.Label(b)})
	}
	return out
}
