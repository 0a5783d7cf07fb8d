package plots

import (
	"fmt"
	"image/color"
	"math"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/palette"
	"gonum.org/v1/plot/plotter"
)

// viridisAnchors are viridis (matplotlib's default colour map, by Stéfan
// van der Walt and Nathaniel Smith, CC0) at 0, 1/8, ..., 1: dark violet
// through blue and green to yellow, lightness rising evenly, readable in
// grey and by colour-blind readers. Between anchors it is interpolated
// linearly in sRGB, within a few units of the full 256-entry table.
var viridisAnchors = [9][3]uint8{
	{0x44, 0x01, 0x54}, {0x47, 0x2d, 0x7b}, {0x3b, 0x52, 0x8b}, {0x2c, 0x72, 0x8e}, {0x21, 0x91, 0x8c},
	{0x28, 0xae, 0x80}, {0x5e, 0xc9, 0x62}, {0xad, 0xdc, 0x30}, {0xfd, 0xe7, 0x25},
}

// Viridis is the viridis colour map over [Min, Max] (a palette.ColorMap).
type Viridis struct {
	min, max, alpha float64
}

// NewViridis returns viridis over [min, max], opaque.
func NewViridis(min, max float64) *Viridis { return &Viridis{min: min, max: max, alpha: 1} }

// At returns the colour of v; values outside [Min, Max] are an error.
func (m *Viridis) At(v float64) (color.Color, error) {
	if math.IsNaN(v) || v < m.min || v > m.max {
		return nil, fmt.Errorf("viridis: %v outside [%v, %v]", v, m.min, m.max)
	}
	t := 0.0
	if m.max > m.min {
		t = (v - m.min) / (m.max - m.min)
	}
	x := t * float64(len(viridisAnchors)-1)
	i := min(int(x), len(viridisAnchors)-2)
	f := x - float64(i)
	a, b := viridisAnchors[i], viridisAnchors[i+1]
	mix := func(k int) uint8 { return uint8(math.Round((float64(a[k])*(1-f) + float64(b[k])*f) * m.alpha)) }
	return color.NRGBA{R: mix(0), G: mix(1), B: mix(2), A: uint8(math.Round(255 * m.alpha))}, nil
}

// Max implements palette.ColorMap.
func (m *Viridis) Max() float64 { return m.max }

// SetMax implements palette.ColorMap.
func (m *Viridis) SetMax(v float64) { m.max = v }

// Min implements palette.ColorMap.
func (m *Viridis) Min() float64 { return m.min }

// SetMin implements palette.ColorMap.
func (m *Viridis) SetMin(v float64) { m.min = v }

// Alpha implements palette.ColorMap.
func (m *Viridis) Alpha() float64 { return m.alpha }

// SetAlpha implements palette.ColorMap; it panics unless 0 ≤ a ≤ 1.
func (m *Viridis) SetAlpha(a float64) {
	if !(a >= 0 && a <= 1) {
		panic(fmt.Sprintf("plots.Viridis.SetAlpha: %v is not in [0, 1]", a))
	}
	m.alpha = a
}

// Palette returns n colours evenly spaced over the map.
func (m *Viridis) Palette(n int) palette.Palette {
	cs := make([]color.Color, n)
	for i := range cs {
		v := m.min
		if n > 1 {
			v = m.min + (m.max-m.min)*float64(i)/float64(n-1)
		}
		cs[i], _ = m.At(v)
	}
	return colors(cs)
}

type colors []color.Color

// Colors returns the palette's colours.
func (c colors) Colors() []color.Color { return c }

// ColorBar returns a plot holding a vertical colour bar of cm, labelled
// label, for the side column of WriteRows.
func ColorBar(cm palette.ColorMap, label string) *plot.Plot {
	p := plot.New()
	p.Add(&plotter.ColorBar{ColorMap: cm, Vertical: true, Colors: 256})
	p.HideX()
	p.Y.Label.Text = label
	p.Y.Tick.Marker = NiceTicks{}
	return p
}
