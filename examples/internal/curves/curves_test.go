package curves

import (
	"math"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/checkpoint"
	"github.com/gonox/gonox/examples/internal/plots"

	"gonum.org/v1/plot/plotter"
)

func TestPointsSkipUnknownEpochs(t *testing.T) {
	var h Epochs
	h.Add(1, math.NaN(), math.NaN(), math.NaN())
	h.Add(2, 0.5, 0.8, 0.75)
	h.Add(3, 0.25, 0.9, 0.85)
	assert.Equal(t, []int{1, 2, 3}, h.Epoch)
	assert.Equal(t, plotter.XYs{{X: 2, Y: 0.5}, {X: 3, Y: 0.25}}, h.Points(h.Loss))
	assert.Equal(t, plotter.XYs{{X: 2, Y: 0.75}, {X: 3, Y: 0.85}}, h.Points(h.Test))
	assert.Empty(t, (&Epochs{}).Points(nil))
}

func TestPlots(t *testing.T) {
	var h Epochs
	for i, a := range []float64{0.5, 0.8, 0.9} {
		h.Add(i+1, 1/float64(i+1), a, a-0.05)
	}
	lp, err := h.LossPlot("a title")
	require.NoError(t, err)
	assert.Equal(t, "a title", lp.Title.Text)
	assert.Equal(t, "training loss", lp.Y.Label.Text)
	assert.Equal(t, 0.0, lp.Y.Min)
	assert.Equal(t, 1.0, lp.Y.Max)
	assert.Equal(t, 3.0, lp.X.Max)

	ap, err := h.AccuracyPlot(0.4)
	require.NoError(t, err)
	assert.Equal(t, [2]float64{0.4, 1}, [2]float64{ap.Y.Min, ap.Y.Max})
	assert.Equal(t, [2]float64{1, 3}, [2]float64{ap.X.Min, ap.X.Max})
	// Rising accuracy leaves the bottom right corner empty.
	assert.False(t, ap.Legend.Top)
	assert.False(t, ap.Legend.Left)

	// Falling accuracy leaves the top right corner empty.
	var f Epochs
	for i, a := range []float64{0.9, 0.5, 0.2} {
		f.Add(i+1, 1, a, a)
	}
	ap, err = f.AccuracyPlot(0)
	require.NoError(t, err)
	assert.True(t, ap.Legend.Top)
	assert.False(t, ap.Legend.Left)
	require.NoError(t, plots.WriteStacked(filepath.Join(t.TempDir(), "c.png"), lp, ap))
}

// The curves go through a checkpoint unchanged (to float32 rounding).
func TestSavedRoundTrip(t *testing.T) {
	var h Epochs
	h.Add(1, 2.5, 0.5, 0.25)
	h.Add(2, 1.25, 0.75, 0.625)
	h.Add(3, 0.1, 0.9, 0.8)
	s := h.Saved()
	assert.Equal(t, []int{3}, s.Loss.Shape())
	dir := filepath.Join(t.TempDir(), "ckpt")
	require.NoError(t, checkpoint.Save(dir, 3, s))
	like := SavedLike(3)
	assert.Equal(t, []int{3}, like.Test.Shape())
	back, err := checkpoint.Restore(dir, 3, like, checkpoint.OnHost())
	require.NoError(t, err)
	g := FromSaved(back)
	assert.Equal(t, h.Epoch, g.Epoch)
	assert.InDeltaSlice(t, h.Loss, g.Loss, 1e-7)
	assert.InDeltaSlice(t, h.Train, g.Train, 1e-7)
	assert.InDeltaSlice(t, h.Test, g.Test, 1e-7)
	assert.Empty(t, FromSaved(SavedLike(0)).Epoch)
}
