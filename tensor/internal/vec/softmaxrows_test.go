package vec

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestExpShiftRows: on every kernel set, ExpShiftRows over a matrix of
// rows returns each row's MaxF32 and ExpShift bits (sum and
// exponentials), for rows of 1 to 17 elements mixing random logits with
// softmaxRows' masked, infinite, NaN and signed-zero rows, and more rows
// than one kernel block holds.
func TestExpShiftRows(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	all := softmaxRows(rng)
	for c := 1; c <= 17; c++ {
		var src []float32
		for _, r := range all {
			if len(r) == c {
				src = append(src, r...)
			}
		}
		for range 2*expShiftRowsBlock + 5 {
			for range c {
				src = append(src, float32(rng.NormFloat64()*4))
			}
		}
		rows := len(src) / c
		for _, ks := range kernelSets() {
			restore := ks.set()
			dst, ms, sums := make([]float32, len(src)), make([]float32, rows), make([]float64, rows)
			ExpShiftRows(dst, src, c, ms, sums)
			for r := range rows {
				row := src[r*c : (r+1)*c]
				want := make([]float32, c)
				m := MaxF32(row)
				s := ExpShift(want, row, m)
				require.Equal(t, math.Float32bits(m), math.Float32bits(ms[r]), "%s c=%d row %d %v: max", ks.name, c, r, row)
				require.Equal(t, math.Float64bits(s), math.Float64bits(sums[r]), "%s c=%d row %d %v: sum", ks.name, c, r, row)
				for j := range want {
					require.Equal(t, math.Float32bits(want[j]), math.Float32bits(dst[r*c+j]), "%s c=%d row %d %v: element %d", ks.name, c, r, row, j)
				}
			}
			restore()
		}
	}
}

// BenchmarkSoftmaxRows: the first half of a softmax (maxima,
// exponentials and their sums) over an ensemble's logits (128 rows of 10
// classes), through the row-block kernel and row by row.
func BenchmarkSoftmaxRows(b *testing.B) {
	const rows, c = 128, 10
	rng := rand.New(rand.NewPCG(9, 9))
	src, dst := make([]float32, rows*c), make([]float32, rows*c)
	for i := range src {
		src[i] = float32(rng.NormFloat64())
	}
	ms, sums := make([]float32, rows), make([]float64, rows)
	b.Run("expshift/rows", func(b *testing.B) {
		for b.Loop() {
			ExpShiftRows(dst, src, c, ms, sums)
		}
	})
	b.Run("expshift/each", func(b *testing.B) {
		for b.Loop() {
			for r := range rows {
				ms[r] = MaxF32(src[r*c : (r+1)*c])
				sums[r] = ExpShift(dst[r*c:(r+1)*c], src[r*c:(r+1)*c], ms[r])
			}
		}
	})
}
