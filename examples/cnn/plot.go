package main

import (
	"fmt"
	"image"
	"image/color"
	"math"

	"github.com/gonox/gonox/examples/internal/curves"
	"github.com/gonox/gonox/examples/internal/plots"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// curvePlots returns the loss plot and the accuracy plot (train and test, the
// legend in the corner the curves leave empty; the axis spans the
// accuracies reached, so that the last epochs' differences show).
func curvePlots(h *curves.Epochs, title string) (*plot.Plot, *plot.Plot, error) {
	lp, err := h.LossPlot(title)
	if err != nil {
		return nil, nil, err
	}
	lo := 1.0
	for _, c := range []plotter.XYs{h.Points(h.Train), h.Points(h.Test)} {
		for _, p := range c {
			lo = min(lo, p.Y)
		}
	}
	ap, err := h.AccuracyPlot(math.Max(0, math.Floor(lo*10-0.5)/10))
	if err != nil {
		return nil, nil, err
	}
	ap.Title.Text = "accuracy"
	return lp, ap, nil
}

// confusion counts the test examples of each true class (row) by
// predicted class (column).
func confusion(labels, pred []int32, classes int) [][]int {
	m := make([][]int, classes)
	for i := range m {
		m[i] = make([]int, classes)
	}
	for i, y := range labels {
		m[y][pred[i]]++
	}
	return m
}

// confusionGrid is a confusion matrix as a heat map: the colour of a cell
// is its share of the true class, true class 0 in the top row.
type confusionGrid [][]int

func (g confusionGrid) Dims() (c, r int) { return len(g), len(g) }
func (g confusionGrid) X(c int) float64  { return float64(c) }
func (g confusionGrid) Y(r int) float64  { return float64(r) }
func (g confusionGrid) Z(c, r int) float64 {
	row := g[len(g)-1-r]
	n := 0
	for _, v := range row {
		n += v
	}
	return float64(row[c]) / float64(max(n, 1))
}

// namedTicks labels 0..len(names)-1 with names, in reverse order when
// reversed (the rows of a confusion matrix, class 0 on top).
type namedTicks struct {
	names    []string
	reversed bool
}

func (t namedTicks) Ticks(lo, hi float64) []plot.Tick {
	out := make([]plot.Tick, len(t.names))
	for i, n := range t.names {
		v := i
		if t.reversed {
			v = len(t.names) - 1 - i
		}
		out[i] = plot.Tick{Value: float64(v), Label: n}
	}
	return out
}

// confusionPlot draws the confusion matrix m with the count in each
// non-empty cell.
func confusionPlot(m [][]int, classes []string) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = "test confusion matrix (colour: share of the true class)"
	p.X.Label.Text = "predicted"
	p.Y.Label.Text = "true"
	cm := plots.NewViridis(0, 1)
	hm := plotter.NewHeatMap(confusionGrid(m), cm.Palette(256))
	hm.Min, hm.Max = 0, 1
	p.Add(hm)
	var xys plotter.XYs
	var labels []string
	var dark []bool
	n := len(m)
	for t := range n {
		for c := range n {
			if m[t][c] == 0 {
				continue
			}
			xys = append(xys, plotter.XY{X: float64(c), Y: float64(n - 1 - t)})
			labels = append(labels, fmt.Sprint(m[t][c]))
			dark = append(dark, confusionGrid(m).Z(c, n-1-t) < 0.6)
		}
	}
	l, err := plotter.NewLabels(plotter.XYLabels{XYs: xys, Labels: labels})
	if err != nil {
		return nil, err
	}
	for i := range l.TextStyle {
		l.TextStyle[i].XAlign, l.TextStyle[i].YAlign = draw.XCenter, draw.YCenter
		l.TextStyle[i].Font.Size = vg.Points(8)
		if dark[i] {
			l.TextStyle[i].Color = color.White
		}
	}
	p.Add(l)
	p.X.Tick.Marker = namedTicks{names: classes}
	p.Y.Tick.Marker = namedTicks{names: classes, reversed: true}
	p.X.Tick.Label.Rotation = math.Pi / 6
	p.X.Tick.Label.XAlign, p.X.Tick.Label.YAlign = draw.XRight, draw.YTop
	p.X.Padding, p.Y.Padding = 0, 0
	return p, nil
}

// Grid of misclassified images: gridCols columns of cells, each an image
// above two lines of caption, as many rows as the plot's height holds.
const (
	gridCols   = 6
	cellHeight = 1.35 // in units of a cell's width
)

// mistakesPlot draws the first misclassified test images, each with its
// true class (black) and the predicted one (red), in a plot whose data
// area is aspect times as high as it is wide.
func mistakesPlot(ds dataset, pred []int32, aspect float64) (*plot.Plot, error) {
	p := plot.New()
	gridRows := max(int(gridCols*aspect/cellHeight), 1)
	labels := ds.test.Y.Int32s()
	var wrong []int
	for i, y := range labels {
		if pred[i] != y {
			wrong = append(wrong, i)
		}
	}
	p.Title.Text = fmt.Sprintf("misclassified test images (first %d of %d)", min(len(wrong), gridCols*gridRows), len(wrong))
	p.HideAxes()
	p.X.Min, p.X.Max = 0, gridCols
	p.Y.Max = float64(gridRows) * cellHeight
	p.Y.Min = p.Y.Max - gridCols*aspect
	h, w := ds.test.X.Dim(1), ds.test.X.Dim(2)
	pix := ds.test.X.Float32s()
	var xys plotter.XYs
	var captions []string
	var red []bool
	for k, i := range wrong[:min(len(wrong), gridCols*gridRows)] {
		col, row := k%gridCols, k/gridCols
		img := image.NewGray(image.Rect(0, 0, w, h))
		for j := range h * w {
			img.Pix[j] = uint8(math.Round(255 * float64(min(max(pix[i*h*w+j], 0), 1))))
		}
		x0, top := float64(col)+0.08, float64(gridRows-row)*cellHeight-0.04
		p.Add(plotter.NewImage(img, x0, top-0.84, x0+0.84, top))
		xys = append(xys, plotter.XY{X: float64(col) + 0.5, Y: top - 0.9}, plotter.XY{X: float64(col) + 0.5, Y: top - 1.1})
		captions = append(captions, ds.classes[labels[i]], "→ "+ds.classes[pred[i]])
		red = append(red, false, true)
	}
	if len(xys) > 0 {
		l, err := plotter.NewLabels(plotter.XYLabels{XYs: xys, Labels: captions})
		if err != nil {
			return nil, err
		}
		for i := range l.TextStyle {
			l.TextStyle[i].XAlign, l.TextStyle[i].YAlign = draw.XCenter, draw.YTop
			l.TextStyle[i].Font.Size = vg.Points(7.5)
			if red[i] {
				l.TextStyle[i].Color = color.RGBA{R: 200, A: 255}
			}
		}
		p.Add(l)
	}
	return p, nil
}

// writeFigure writes the figure of a run as a PNG: the loss and accuracy
// curves on top, the test set's confusion matrix and a grid of
// misclassified test images below. pred holds the predicted class of
// every test example.
func writeFigure(path, title string, h *curves.Epochs, ds dataset, pred []int32) error {
	lp, ap, err := curvePlots(h, title)
	if err != nil {
		return err
	}
	cp, err := confusionPlot(confusion(ds.test.Y.Int32s(), pred, len(ds.classes)), ds.classes)
	if err != nil {
		return err
	}
	const width, topH, bottomH = 13 * vg.Inch, 3.6 * vg.Inch, 6.6 * vg.Inch
	img := vgimg.New(width, topH+bottomH)
	dc := draw.New(img)
	top, bottom := dc, dc
	top.Min.Y = dc.Max.Y - topH
	bottom.Max.Y = dc.Min.Y + bottomH
	tiles := draw.Tiles{Rows: 1, Cols: 2, PadTop: vg.Points(6), PadBottom: vg.Points(6), PadX: vg.Points(24), PadLeft: vg.Points(6), PadRight: vg.Points(10)}
	cs := plot.Align([][]*plot.Plot{{lp, ap}}, tiles, top)
	lp.Draw(cs[0][0])
	ap.Draw(cs[0][1])
	// The grid of images is laid out for the room its tile leaves, so
	// that its cells are square: a stand-in with its title and no axes
	// takes the place for the alignment.
	stand := plot.New()
	stand.HideAxes()
	stand.Title.Text = "misclassified"
	cs = plot.Align([][]*plot.Plot{{cp, stand}}, tiles, bottom)
	d := stand.DataCanvas(cs[0][1])
	mp, err := mistakesPlot(ds, pred, float64((d.Max.Y-d.Min.Y)/(d.Max.X-d.Min.X)))
	if err != nil {
		return err
	}
	cp.Draw(cs[0][0])
	mp.Draw(cs[0][1])
	return plots.WritePNG(path, img)
}
