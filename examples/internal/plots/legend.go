package plots

import (
	"math"

	"gonum.org/v1/plot/plotter"
)

// EmptiestCorner returns the corner of the box [x0,x1]×[y0,y1] whose
// quarter holds the fewest points of the series: where a legend covers
// the least of the curves.
func EmptiestCorner(series []plotter.XYs, x0, x1, y0, y1 float64) (top, left bool) {
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
