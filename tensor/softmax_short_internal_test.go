package tensor

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestSoftmaxShortRows: Softmax and LogSumExp along the last axis of rows
// of up to 16 elements, which take a block of rows per kernel call, give
// the bits of the one-row functions (softmaxRowSum then softmaxScale, and
// logSumExpRow) on every row: a row count that is not a multiple of the
// block, rows holding NaN, ±Inf, all -Inf, a zero or negative-zero
// maximum, and large spreads; split over several workers too.
func TestSoftmaxShortRows(t *testing.T) {
	for _, par := range []bool{false, true} {
		for c := 1; c <= xentShort+1; c++ {
			t.Run(fmt.Sprintf("c=%d/parallel=%v", c, par), func(t *testing.T) {
				if par {
					withParallel(t, 64)
				}
				rng := rand.New(rand.NewPCG(uint64(c), 7))
				rows := 3*xentBlock + 5
				x := randTensor(rng, rows, c)
				xs := x.f32()
				special := []float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1)), 0, float32(math.Copysign(0, -1)), 90, -90}
				for r := 0; r < rows; r += 3 {
					xs[r*c+rng.IntN(c)] = special[(r/3)%len(special)]
				}
				for j := range c { // a row of -Inf, a row of zeros
					xs[c+j] = float32(math.Inf(-1))
					xs[4*c+j] = 0
				}
				sm, lse := Softmax(x, -1), LogSumExp(x, -1)
				want := make([]float32, c)
				for r := range rows {
					row := xs[r*c : (r+1)*c]
					_, sum := softmaxRowSum(row, want, false)
					softmaxScale(want, sum)
					require.Equal(t, bitsOf(want), bitsOf(sm.f32()[r*c:(r+1)*c]), "softmax row %d %v", r, row)
					require.Equal(t, math.Float32bits(logSumExpRow(row)), math.Float32bits(lse.f32()[r]), "logsumexp row %d %v", r, row)
				}
			})
		}
	}
}

func bitsOf(x []float32) []uint32 {
	b := make([]uint32, len(x))
	for i, v := range x {
		b[i] = math.Float32bits(v)
	}
	return b
}

// TestSoftmaxGradRows: softmax_grad along the last axis (its own loop over
// the rows) gives the bits of the strided lane kernel along the first axis
// of the transposed operands, for short and long rows, with special values,
// split over workers too.
func TestSoftmaxGradRows(t *testing.T) {
	for _, par := range []bool{false, true} {
		for _, c := range []int{1, 2, 3, 8, 17, 100} {
			t.Run(fmt.Sprintf("c=%d/parallel=%v", c, par), func(t *testing.T) {
				if par {
					withParallel(t, 64)
				}
				rng := rand.New(rand.NewPCG(uint64(c), 9))
				rows := 2*xentBlock + 3
				x, g := randTensor(rng, rows, c), randTensor(rng, rows, c)
				g.f32()[0] = float32(math.NaN())
				g.f32()[len(g.f32())-1] = float32(math.Inf(1))
				y := Softmax(x, -1)
				got := Apply(softmaxGradOp, 1, g, y)
				want := Transpose(Apply(softmaxGradOp, 0, Transpose(g, 1, 0), Transpose(y, 1, 0)), 1, 0)
				require.Equal(t, bitsOf(want.Float32s()), bitsOf(got.f32()))
			})
		}
	}
}
