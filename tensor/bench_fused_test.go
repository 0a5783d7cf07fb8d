package tensor_test

import (
	"testing"

	"github.com/gonox/gonox/tensor"
)

// BenchmarkMLPStepFused is BenchmarkMLPStep written with the fused
// primitives: BiasAct for bias + GELU and MSE for the loss.
func BenchmarkMLPStepFused(b *testing.B) {
	rng := newRNG(3)
	params := mlpParams(rng, 32, 128, 256, 128, 4)
	x, y := randF32(rng, 16, 32), randF32(rng, 16, 4)
	loss := func(ps []*tensor.Tensor) *tensor.Tensor {
		h := x
		for i := 0; i+1 < len(ps); i += 2 {
			act := tensor.ActGelu
			if i+2 >= len(ps) {
				act = tensor.ActIdentity
			}
			h = tensor.BiasAct(tensor.MatMul(h, ps[i]), ps[i+1], act)
		}
		return tensor.MSE(h, y)
	}
	b.ReportAllocs()
	for b.Loop() {
		tr, l := traceLeaves(params...)
		tensor.Backward(tr, ts(loss(l)), ts(tensor.Scalar(1)), l, false)
	}
	if b.N > 0 {
		b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N), "µs/step")
	}
}
