package tensor_test

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/internal/half"
	"github.com/gonox/gonox/tensor"
)

// TestMatMulAsStackedRows checks that MatMulAs in bfloat16 on a batch of
// matrices times one float32 matrix (nn.Linear under the bf16 policy on
// [B,T,in]) computes, forward and backward, the bits of the product of
// the batch's rows stacked (the reshapes nn.Linear made before), and
// that its result is the float64 product of the bf16-rounded operands
// within float32 accumulation.
func TestMatMulAsStackedRows(t *testing.T) {
	for _, tc := range []struct {
		name string
		x    []int
		w    []int
		tb   bool
	}{
		{"rank3", []int{3, 5, 8}, []int{8, 6}, false},
		{"rank4 odd k", []int{2, 3, 4, 7}, []int{7, 9}, false},
		{"transposed w", []int{4, 5, 16}, []int{4, 16}, true},
		{"wide", []int{2, 33, 40}, []int{40, 48}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rng := newRNG(17)
			x, w := randF32(rng, tc.x...), randF32(rng, tc.w...)
			k := tc.x[len(tc.x)-1]
			n := tc.w[1]
			if tc.tb {
				n = tc.w[0]
			}
			out := append(append([]int{}, tc.x[:len(tc.x)-1]...), n)
			g := randF32(rng, out...)
			as := func(x, w *tensor.Tensor) *tensor.Tensor {
				return tensor.MatMulAs(x, w, false, tc.tb, tensor.BFloat16, tensor.Float32)
			}
			rows := func(x, w *tensor.Tensor) *tensor.Tensor {
				return tensor.Reshape(as(tensor.Reshape(x, -1, k), w), out...)
			}
			grads := func(f func(x, w *tensor.Tensor) *tensor.Tensor) (*tensor.Tensor, []*tensor.Tensor) {
				tr := tensor.NewTrace()
				lx, lw := tr.Leaf(x), tr.Leaf(w)
				y := f(lx, lw)
				return tensor.StopGradient(y), tensor.Backward(tr, ts(y), ts(g), ts(lx, lw), false)
			}
			y0, g0 := grads(rows)
			y1, g1 := grads(as)
			require.Equal(t, out, y1.Shape())
			require.Equal(t, y0.Float32s(), y1.Float32s(), "forward")
			require.Equal(t, tc.x, g1[0].Shape())
			require.Equal(t, g0[0].Float32s(), g1[0].Float32s(), "x's cotangent")
			require.Equal(t, g0[1].Float32s(), g1[1].Float32s(), "w's cotangent")
			// Against float64 sums of the rounded operands:
			// out[r, j] = Σ bf16(x[r, i])·bf16(w[i, j]).
			bf := func(v float32) float64 { return float64(half.FromFloat32BF(v).Float32()) }
			xs, ws := x.Float32s(), w.Float32s()
			for r := range len(xs) / k {
				for j := range n {
					var s, mag float64
					for i := range k {
						wij := ws[i*n+j]
						if tc.tb {
							wij = ws[j*k+i]
						}
						s += bf(xs[r*k+i]) * bf(wij)
						mag += math.Abs(bf(xs[r*k+i]) * bf(wij))
					}
					require.InDelta(t, s, float64(y1.Float32s()[r*n+j]), 1e-6*mag+1e-7)
				}
			}
		})
	}
}
