package tensor_test

import (
	"testing"

	"github.com/gonox/gonox/tensor"
)

// ActMatMul's and ActRaggedDot's gradients and second derivatives (the
// VJP through the recomputed activation) against finite differences.
func TestActProductGrad(t *testing.T) {
	rng := newRNG(86)
	gs := tensor.FromInt32([]int32{2, 3}, 2)
	opts := autodiffOpts(1e-3, 1e-3, 1e-2)
	for _, f := range []func(xs []*tensor.Tensor) *tensor.Tensor{
		func(xs []*tensor.Tensor) *tensor.Tensor { return tensor.ActMatMul(tensor.ActGelu, xs[0], xs[1]) },
		func(xs []*tensor.Tensor) *tensor.Tensor { return tensor.ActMatMul(tensor.ActSigmoid, xs[0], xs[1]) },
	} {
		in := ts(randF32(rng, 2, 4, 3), randF32(rng, 3, 5))
		checkGrad(t, f, in, opts)
		checkGrad(t, gradOf(f, 0), in, opts)
		checkGrad(t, gradOf(f, 1), in, opts)
	}
	f := func(xs []*tensor.Tensor) *tensor.Tensor { return tensor.ActRaggedDot(tensor.ActGelu, xs[0], xs[1], gs) }
	in := ts(randF32(rng, 6, 3), randF32(rng, 2, 3, 4))
	checkGrad(t, f, in, opts)
	checkGrad(t, gradOf(f, 0), in, opts)
}
