// Package plots draws the examples' figures with gonum/plot: plots
// stacked with their axes aligned, written to PNG files; axis ticks at
// round numbers; a legend placed where the curves leave room; and heat
// maps in a perceptual colour map (viridis) with a colour bar beside them.
package plots

import (
	"fmt"
	"os"
	"path/filepath"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// WriteStacked draws plots top to bottom, their axes aligned, on a page
// 6 inches wide and 3.5 inches per plot, and writes it to path as a PNG,
// creating path's directory if needed.
func WriteStacked(path string, plots ...*plot.Plot) error {
	if len(plots) == 0 {
		return fmt.Errorf("plot: %s: no plots", path)
	}
	rows := make([]Row, len(plots))
	for i, p := range plots {
		rows[i] = Row{Plot: p}
	}
	return write(path, 6*vg.Inch, rows)
}

// Row is one row of a figure: a plot and, in a narrow column to its
// right, what explains it: a Side plot (a colour bar, see ColorBar) or a
// Legend, drawn outside the data.
type Row struct {
	Plot   *plot.Plot
	Side   *plot.Plot
	Legend *plot.Legend
}

// SideWidth is the width of the column on the right of WriteRows' pages.
const SideWidth = 1.3 * vg.Inch

// WriteRows draws rows top to bottom, the plots' axes aligned in a left
// column 6 inches wide and what each row has on the side in a column of
// SideWidth to the right, 3.5 inches per row, and writes the page to path
// as a PNG, creating path's directory if needed.
func WriteRows(path string, rows ...Row) error {
	if len(rows) == 0 {
		return fmt.Errorf("plot: %s: no plots", path)
	}
	return write(path, 6*vg.Inch+SideWidth, rows)
}

func write(path string, width vg.Length, rows []Row) error {
	side := vg.Length(0)
	grid := make([][]*plot.Plot, len(rows))
	for i, r := range rows {
		grid[i] = []*plot.Plot{r.Plot}
		if r.Side != nil || r.Legend != nil {
			side = SideWidth
		}
	}
	height := vg.Length(len(rows)) * 3.5 * vg.Inch
	img := vgimg.New(width, height)
	dc := draw.New(img)
	main := dc
	main.Max.X -= side
	tiles := draw.Tiles{Rows: len(rows), Cols: 1, PadTop: vg.Points(4), PadBottom: vg.Points(4), PadX: vg.Points(4), PadY: vg.Points(8)}
	canvases := plot.Align(grid, tiles, main)
	for i, r := range rows {
		r.Plot.Draw(canvases[i][0])
		sc := canvases[i][0]
		sc.Min.X, sc.Max.X = main.Max.X+vg.Points(10), dc.Max.X
		switch {
		case r.Side != nil:
			// The side plot spans the height of the row's data area, so
			// that a colour bar lines up with its heat map.
			data := r.Plot.DataCanvas(canvases[i][0])
			sc.Min.Y, sc.Max.Y = data.Min.Y, data.Max.Y
			own := r.Side.DataCanvas(sc)
			sc.Min.Y -= own.Min.Y - sc.Min.Y
			sc.Max.Y += sc.Max.Y - own.Max.Y
			r.Side.Draw(sc)
		case r.Legend != nil:
			data := r.Plot.DataCanvas(canvases[i][0])
			sc.Min.Y, sc.Max.Y = data.Min.Y, data.Max.Y
			r.Legend.Top, r.Legend.Left = true, true
			r.Legend.Draw(sc)
		}
	}
	return WritePNG(path, img)
}

// WritePNG writes a drawn page to path as a PNG, creating path's
// directory if needed.
func WritePNG(path string, img *vgimg.Canvas) error {
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
