// Package plotfile writes gonum/plot plots stacked one above the other
// into a PNG file, as the examples' curves are drawn.
package plotfile

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
	img := vgimg.New(6*vg.Inch, vg.Length(len(plots))*3.5*vg.Inch)
	tiles := draw.Tiles{Rows: len(plots), Cols: 1, PadTop: vg.Points(4), PadBottom: vg.Points(4), PadX: vg.Points(4), PadY: vg.Points(8)}
	grid := make([][]*plot.Plot, len(plots))
	for i, p := range plots {
		grid[i] = []*plot.Plot{p}
	}
	canvases := plot.Align(grid, tiles, draw.New(img))
	for i, p := range plots {
		p.Draw(canvases[i][0])
	}
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
