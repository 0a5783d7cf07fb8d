package tensor_test

import (
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
