package plots

import (
	"image/png"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/vgimg"
)

func TestWriteStacked(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sub", "curves.png")
	a, b := plot.New(), plot.New()
	a.Title.Text, b.Title.Text = "a", "b"
	require.NoError(t, WriteStacked(path, a, b))
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	img, err := png.Decode(f)
	require.NoError(t, err)
	// 6 × 7 inches at vgimg's default 96 dpi.
	require.Equal(t, 6*96, img.Bounds().Dx())
	require.Equal(t, 7*96, img.Bounds().Dy())

	require.Error(t, WriteStacked(path))
	blocker := filepath.Join(t.TempDir(), "file")
	require.NoError(t, os.WriteFile(blocker, nil, 0o644))
	require.Error(t, WriteStacked(filepath.Join(blocker, "x.png"), a), "a file where the directory should be")
}

func TestWritePNG(t *testing.T) {
	path := filepath.Join(t.TempDir(), "a", "b", "page.png")
	require.NoError(t, WritePNG(path, vgimg.New(2*vg.Inch, vg.Inch)))
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	img, err := png.Decode(f)
	require.NoError(t, err)
	assert.Equal(t, [2]int{2 * 96, 96}, [2]int{img.Bounds().Dx(), img.Bounds().Dy()})

	blocker := filepath.Join(t.TempDir(), "file")
	require.NoError(t, os.WriteFile(blocker, nil, 0o644))
	err = WritePNG(filepath.Join(blocker, "x.png"), vgimg.New(vg.Inch, vg.Inch))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "plot: ")
}

func TestNiceTicks(t *testing.T) {
	for _, tc := range []struct {
		lo, hi  float64
		integer bool
		want    []string
	}{
		{0, 2.2, false, []string{"0.0", "0.5", "1.0", "1.5", "2.0"}},
		{0, 1, false, []string{"0.0", "0.2", "0.4", "0.6", "0.8", "1.0"}},
		{0.05, 0.31, false, []string{"0.1", "0.2", "0.3"}},
		{0.05, 0.26, false, []string{"0.05", "0.10", "0.15", "0.20", "0.25"}},
		{1, 20, true, []string{"5", "10", "15", "20"}},
		{1, 3, true, []string{"1", "2", "3"}},
		{13, 20, true, []string{"14", "16", "18", "20"}},
		{1, 2, true, []string{"1", "2"}},
	} {
		var got []string
		for _, tk := range (NiceTicks{Integer: tc.integer}).Ticks(tc.lo, tc.hi) {
			got = append(got, tk.Label)
		}
		assert.Equal(t, tc.want, got, "%v..%v", tc.lo, tc.hi)
	}
}
