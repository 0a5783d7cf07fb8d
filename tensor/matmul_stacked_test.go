package tensor_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/tensor"
)

// stackedCase is a batch of matrices x times one matrix w (wᵀ if tb): a
// Linear layer on [B,T,in].
type stackedCase struct {
	name string
	x    []int
	w    []int
	tb   bool
}

// requireStackedRows draws x, w and a cotangent for tc and requires that
// product on x computes, forward and backward, the bits of product on
// x's rows stacked (the reshapes nn.Linear made before), and that each
// result element is the float64 sum of round(x[r,i])·round(w[i,j]) within
// tol of the sum of their magnitudes. It returns x and w.
func requireStackedRows(t *testing.T, tc stackedCase, seed uint64, product func(x, w *tensor.Tensor) *tensor.Tensor,
	round func(float32) float64, tol func(mag float64) float64) (x, w *tensor.Tensor) {
	t.Helper()
	rng := newRNG(seed)
	x, w = randF32(rng, tc.x...), randF32(rng, tc.w...)
	k := tc.x[len(tc.x)-1]
	n := tc.w[1]
	if tc.tb {
		n = tc.w[0]
	}
	out := append(append([]int{}, tc.x[:len(tc.x)-1]...), n)
	g := randF32(rng, out...)
	rows := func(x, w *tensor.Tensor) *tensor.Tensor {
		return tensor.Reshape(product(tensor.Reshape(x, -1, k), w), out...)
	}
	grads := func(f func(x, w *tensor.Tensor) *tensor.Tensor) (*tensor.Tensor, []*tensor.Tensor) {
		tr := tensor.NewTrace()
		lx, lw := tr.Leaf(x), tr.Leaf(w)
		y := f(lx, lw)
		return tensor.StopGradient(y), tensor.Backward(tr, ts(y), ts(g), ts(lx, lw), false)
	}
	y0, g0 := grads(rows)
	y1, g1 := grads(product)
	require.Equal(t, out, y1.Shape())
	require.Equal(t, y0.Float32s(), y1.Float32s(), "forward")
	require.Equal(t, tc.x, g1[0].Shape())
	require.Equal(t, g0[0].Float32s(), g1[0].Float32s(), "x's cotangent")
	require.Equal(t, g0[1].Float32s(), g1[1].Float32s(), "w's cotangent")
	xs, ws, ys := x.Float32s(), w.Float32s(), y1.Float32s()
	for r := range len(xs) / k {
		for j := range n {
			var s, mag float64
			for i := range k {
				wij := ws[i*n+j]
				if tc.tb {
					wij = ws[j*k+i]
				}
				p := round(xs[r*k+i]) * round(wij)
				s += p
				mag += max(p, -p)
			}
			require.InDelta(t, s, float64(ys[r*n+j]), tol(mag))
		}
	}
	return x, w
}

// TestMatMulStackedRows checks that a batch of matrices times one matrix
// (a Linear layer on [B,T,in]) computes, forward and backward, the bits
// of the product of the batch's rows stacked, its values against float64
// sums, and that its second-order gradients are right.
func TestMatMulStackedRows(t *testing.T) {
	for _, tc := range []stackedCase{
		{"rank3", []int{3, 5, 7}, []int{7, 4}, false},
		{"rank4", []int{2, 3, 4, 6}, []int{6, 9}, false},
		{"transposed w", []int{4, 5, 7}, []int{4, 7}, true},
		{"inner 1", []int{2, 3, 1}, []int{1, 5}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stacked := func(x, w *tensor.Tensor) *tensor.Tensor { return tensor.MatMulT(x, w, false, tc.tb) }
			exact := func(v float32) float64 { return float64(v) }
			x, w := requireStackedRows(t, tc, 91, stacked, exact, func(float64) float64 { return 1e-4 })
			f := func(xs []*tensor.Tensor) *tensor.Tensor { return tensor.Tanh(stacked(xs[0], xs[1])) }
			opts := autodiffOpts(1e-3, 1e-3, 1e-2)
			checkGrad(t, f, ts(x, w), opts)
			checkGrad(t, gradOf(f, 0), ts(x, w), opts)
			checkGrad(t, gradOf(f, 1), ts(x, w), opts)
		})
	}
}
