package vec

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestExpShiftRows: on every kernel set, ExpShiftRows over a matrix of
// rows returns each row's MaxF32 and ExpShift bits (sum and
// exponentials), and SoftmaxRows the exponentials normalised as
// softmaxRowEnd does, for rows of 1 to 17 elements mixing random logits
// with softmaxRows' masked, infinite, NaN and signed-zero rows.
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
		for range 69 {
			for range c {
				src = append(src, float32(rng.NormFloat64()*4))
			}
		}
		rows := len(src) / c
		for _, ks := range kernelSets() {
			restore := ks.set()
			for _, norm := range []bool{false, true} {
				dst, ms, sums := make([]float32, len(src)), make([]float32, rows), make([]float64, rows)
				if norm {
					SoftmaxRows(dst, src, c, ms, sums)
				} else {
					ExpShiftRows(dst, src, c, ms, sums)
				}
				for r := range rows {
					row := src[r*c : (r+1)*c]
					want := make([]float32, c)
					m := MaxF32(row)
					s := ExpShift(want, row, m)
					if norm { // softmaxRowEnd's normalisation
						inv := 1 / s
						for j, v := range want {
							want[j] = float32(float64(v) * inv)
						}
					}
					require.Equal(t, math.Float32bits(m), math.Float32bits(ms[r]), "%s c=%d row %d %v: max", ks.name, c, r, row)
					require.Equal(t, math.Float64bits(s), math.Float64bits(sums[r]), "%s c=%d row %d %v: sum", ks.name, c, r, row)
					for j := range want {
						require.Equal(t, math.Float32bits(want[j]), math.Float32bits(dst[r*c+j]), "%s c=%d norm=%v row %d %v: element %d", ks.name, c, norm, r, row, j)
					}
				}
			}
			restore()
		}
	}
}

// TestXentGradRows: on every kernel set, XentGradRows returns the Go
// loop's bits, g·sm with g·(sm - 1) at the label, for rows of 1 to 17
// classes (signed, infinite and NaN factors among them), and stops at a
// label out of range.
func TestXentGradRows(t *testing.T) {
	rng := rand.New(rand.NewPCG(10, 10))
	for c := 1; c <= 17; c++ {
		rows := 3*c + 5
		sm, g, labels := make([]float32, rows*c), make([]float32, rows), make([]int32, rows)
		for i := range sm {
			sm[i] = rng.Float32()
		}
		for r := range g {
			g[r] = float32(rng.NormFloat64()) / 16
			labels[r] = int32(rng.IntN(c))
		}
		g[0], g[1], g[2] = float32(math.Inf(-1)), float32(math.NaN()), float32(math.Copysign(0, -1))
		for _, ks := range kernelSets() {
			restore := ks.set()
			dst := make([]float32, rows*c)
			require.True(t, XentGradRows(dst, sm, c, g, labels), "%s c=%d", ks.name, c)
			for r := range rows {
				for j := range c {
					want := g[r] * sm[r*c+j]
					if j == int(labels[r]) {
						want = g[r] * (sm[r*c+j] - 1)
					}
					require.Equal(t, math.Float32bits(want), math.Float32bits(dst[r*c+j]), "%s c=%d row %d element %d", ks.name, c, r, j)
				}
			}
			for _, bad := range []int32{-1, int32(c)} {
				l := append([]int32(nil), labels...)
				l[rows-1] = bad
				require.False(t, XentGradRows(dst, sm, c, g, l), "%s c=%d label %d", ks.name, c, bad)
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
