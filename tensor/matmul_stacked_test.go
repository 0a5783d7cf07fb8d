package tensor_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/tensor"
)

// TestMatMulStackedRows checks that a batch of matrices times one matrix
// (a Linear layer on [B,T,in]) computes, forward and backward, the bits
// of the product of the batch's rows stacked (the reshapes nn.Linear made
// before), and that its second-order gradients are right.
func TestMatMulStackedRows(t *testing.T) {
	for _, tc := range []struct {
		name string
		x    []int
		w    []int
		tb   bool
	}{
		{"rank3", []int{3, 5, 7}, []int{7, 4}, false},
		{"rank4", []int{2, 3, 4, 6}, []int{6, 9}, false},
		{"transposed w", []int{4, 5, 7}, []int{4, 7}, true},
		{"inner 1", []int{2, 3, 1}, []int{1, 5}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rng := newRNG(91)
			x, w := randF32(rng, tc.x...), randF32(rng, tc.w...)
			k := tc.x[len(tc.x)-1]
			n := tc.w[1]
			if tc.tb {
				n = tc.w[0]
			}
			out := append(append([]int{}, tc.x[:len(tc.x)-1]...), n)
			g := randF32(rng, out...)
			stacked := func(x, w *tensor.Tensor) *tensor.Tensor { return tensor.MatMulT(x, w, false, tc.tb) }
			rows := func(x, w *tensor.Tensor) *tensor.Tensor {
				return tensor.Reshape(tensor.MatMulT(tensor.Reshape(x, -1, k), w, false, tc.tb), out...)
			}
			grads := func(f func(x, w *tensor.Tensor) *tensor.Tensor) (*tensor.Tensor, []*tensor.Tensor) {
				tr := tensor.NewTrace()
				lx, lw := tr.Leaf(x), tr.Leaf(w)
				y := f(lx, lw)
				return tensor.StopGradient(y), tensor.Backward(tr, ts(y), ts(g), ts(lx, lw), false)
			}
			y0, g0 := grads(rows)
			y1, g1 := grads(stacked)
			require.Equal(t, y0.Shape(), y1.Shape())
			require.Equal(t, y0.Float32s(), y1.Float32s(), "forward")
			require.Equal(t, g0[0].Shape(), g1[0].Shape())
			require.Equal(t, g0[0].Float32s(), g1[0].Float32s(), "x's cotangent")
			require.Equal(t, g0[1].Float32s(), g1[1].Float32s(), "w's cotangent")
			// Against float64 sums: out[r, j] = Σ x[r, i]·w[i, j].
			xs, ws := x.Float32s(), w.Float32s()
			for r := range len(xs) / k {
				for j := range n {
					var s float64
					for i := range k {
						wij := ws[i*n+j]
						if tc.tb {
							wij = ws[j*k+i]
						}
						s += float64(xs[r*k+i]) * float64(wij)
					}
					require.InDelta(t, s, float64(y1.Float32s()[r*n+j]), 1e-4)
				}
			}
			f := func(xs []*tensor.Tensor) *tensor.Tensor { return tensor.Tanh(stacked(xs[0], xs[1])) }
			opts := autodiffOpts(1e-3, 1e-3, 1e-2)
			checkGrad(t, f, ts(x, w), opts)
			checkGrad(t, gradOf(f, 0), ts(x, w), opts)
			checkGrad(t, gradOf(f, 1), ts(x, w), opts)
		})
	}
}
