package vec

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestSumColsMatchesAccF64: SumCols gives the bits of AccF64 row after
// row then RoundF64 (the float64 sum of each column in row order), for
// every column, on every shape (the last columns under a mask); on kernel
// sets without AVX-512 it sums none.
func TestSumColsMatchesAccF64(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, c := range []struct{ m, n, w int }{
		{1, 8, 8}, {16, 128, 128}, {16, 10, 10}, {3, 40, 40}, {7, 50, 37}, {5, 200, 96}, {1, 33, 33}, {4, 3, 3}, {2, 7, 5},
		{16, 256, 256}, {2, 70, 64}, {3, 300, 271}, {1, 130, 127},
	} {
		t.Run(fmt.Sprintf("%dx%d/%d", c.m, c.n, c.w), func(t *testing.T) {
			src := make([]float32, c.m*c.n)
			for i := range src {
				src[i] = float32(r.NormFloat64() * math.Pow(10, float64(r.IntN(9)-4)))
			}
			src[0] = float32(math.Inf(1)) // propagates as in the loop
			want := make([]float32, c.w)
			acc := make([]float64, c.w)
			for i := range c.m {
				for j := range acc {
					acc[j] += float64(src[i*c.n+j])
				}
			}
			RoundF64(want, acc)
			got := make([]float32, c.w)
			k := SumCols(got, src, c.m, c.n)
			if useAVX512 {
				require.Equal(t, c.w, k)
			} else {
				require.Zero(t, k)
			}
			for j := range k {
				require.Equal(t, math.Float32bits(want[j]), math.Float32bits(got[j]), "column %d", j)
			}
		})
	}
	require.Panics(t, func() { SumCols(make([]float32, 8), make([]float32, 9), 2, 8) })
}
