package plotfile

import (
	"image/png"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"gonum.org/v1/plot"
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
