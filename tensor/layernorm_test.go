package tensor_test

import (
	"math"
	"testing"

	"github.com/gonox/gonox/tensor"
	"github.com/stretchr/testify/require"
)

// LayerNorm's gradients and the gradients of its gradients (the VJP of
// the fused op's VJP, through its mean and rstd results) against finite
// differences, with and without weight and bias.
func TestLayerNormGrad(t *testing.T) {
	rng := newRNG(83)
	x, w, b := randF32(rng, 3, 6), randRange(rng, 0.5, 2, 6), randF32(rng, 6)
	c := randF32(rng, 3, 6)
	f := func(xs []*tensor.Tensor) *tensor.Tensor {
		return tensor.Mul(tensor.LayerNorm(xs[0], xs[1], xs[2], 1e-5), c)
	}
	opts := autodiffOpts(1e-3, 1e-3, 1e-2)
	checkGrad(t, f, ts(x, w, b), opts)
	for i := range 3 {
		checkGrad(t, gradOf(f, i), ts(x, w, b), opts)
	}
	plain := func(xs []*tensor.Tensor) *tensor.Tensor {
		return tensor.Mul(tensor.LayerNorm(xs[0], nil, nil, 1e-5), c)
	}
	checkGrad(t, plain, ts(x), opts)
}

// Bad operands panic naming the op and the operands.
func TestLayerNormPanics(t *testing.T) {
	x := tensor.Zeros(tensor.Float32, 2, 3)
	requirePanic(t, "tensor.LayerNorm: f32[2,3], f32[4], f32[3]: want float x [..., D] and weight, bias [D] of its dtype", func() {
		tensor.LayerNorm(x, tensor.Zeros(tensor.Float32, 4), tensor.Zeros(tensor.Float32, 3), 1e-5)
	})
	requirePanic(t, "tensor.LayerNorm: i32[2]: want float x [..., D]", func() {
		tensor.LayerNorm(tensor.Zeros(tensor.Int32, 2), nil, nil, 1e-5)
	})
	require.NotPanics(t, func() { tensor.LayerNorm(x, nil, tensor.Zeros(tensor.Float32, 3), 1e-5) })
}

// On float64 operands eps is added in float64: with eps comparable to the
// rows' variance (1e-5, which float32 rounds by 2.5e-9 relative) the
// results match a float64 loop over the rows within 1e-12 relative, with
// and without weight and bias. (An eps rounded to float32 is off by ~1e-9.)
func TestLayerNormFloat64Eps(t *testing.T) {
	const rows, d, eps = 3, 5, 1e-5
	rng := newRNG(29)
	x, w, b := make([]float64, rows*d), make([]float64, d), make([]float64, d)
	for i := range x {
		x[i] = 0.25 + 4e-3*rng.NormFloat64() // variance ~1.6e-5
	}
	for j := range d {
		w[j], b[j] = 0.5+rng.Float64(), rng.NormFloat64()
	}
	want := func(affine bool) []float64 {
		y := make([]float64, len(x))
		for i := range rows {
			r := x[i*d : (i+1)*d]
			m := 0.0
			for _, v := range r {
				m += v
			}
			m /= d
			v := 0.0
			for _, e := range r {
				v += (e - m) * (e - m)
			}
			s := 1 / math.Sqrt(v/d+eps)
			for j, e := range r {
				y[i*d+j] = (e - m) * s
				if affine {
					y[i*d+j] = y[i*d+j]*w[j] + b[j]
				}
			}
		}
		return y
	}
	for _, tc := range []struct {
		name   string
		affine bool
	}{{"affine", true}, {"plain", false}} {
		t.Run(tc.name, func(t *testing.T) {
			var wt, bt *tensor.Tensor
			if tc.affine {
				wt, bt = tensor.FromFloat64s(w, d), tensor.FromFloat64s(b, d)
			}
			got := tensor.LayerNorm(tensor.FromFloat64s(x, rows, d), wt, bt, eps).Float64s()
			for i, v := range want(tc.affine) {
				require.InEpsilon(t, v, got[i], 1e-12, "element %d", i)
			}
		})
	}
}
