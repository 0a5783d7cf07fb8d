package tensor_test

import (
	"testing"

	"github.com/gonox/gonox/tensor"
)

// Run with, for example:
//
//	go test ./tensor -run '^$' -bench 'Kernels|MLPStep' -count 6
//
// GB/s counts bytes read plus bytes written per call.
func BenchmarkKernels(b *testing.B) {
	for _, n := range []int{1 << 20, 1 << 24} {
		name := "1M"
		if n == 1<<24 {
			name = "16M"
		}
		rng := newRNG(2)
		x := randF32(rng, n/1024, 1024)
		y := randF32(rng, n/1024, 1024)
		bias := randF32(rng, 1024)
		const f = 4
		fn := float64(n)
		cases := []struct {
			op    string
			f     func() *tensor.Tensor
			bytes float64
		}{
			{"Exp", func() *tensor.Tensor { return tensor.Exp(x) }, 2 * f * fn},
			{"Tanh", func() *tensor.Tensor { return tensor.Tanh(x) }, 2 * f * fn},
			{"Sigmoid", func() *tensor.Tensor { return tensor.Sigmoid(x) }, 2 * f * fn},
			{"Gelu", func() *tensor.Tensor { return tensor.Gelu(x) }, 2 * f * fn},
			{"Add", func() *tensor.Tensor { return tensor.Add(x, y) }, 3 * f * fn},
			{"Mul", func() *tensor.Tensor { return tensor.Mul(x, y) }, 3 * f * fn},
			{"AddBias", func() *tensor.Tensor { return tensor.Add(x, bias) }, 2*f*fn + f*1024},
			{"SumRows", func() *tensor.Tensor { return tensor.Sum(x, 1) }, f*fn + f*fn/1024},
			{"SumCols", func() *tensor.Tensor { return tensor.Sum(x, 0) }, f*fn + f*1024},
		}
		for _, c := range cases {
			b.Run(c.op+"/"+name, func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					c.f()
				}
				reportGBs(b, c.bytes)
			})
		}
	}
	rng := newRNG(5)
	logits := randF32(rng, 1024, 1000)
	b.Run("Softmax/1024x1000", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			tensor.Softmax(logits, -1)
		}
		reportGBs(b, 2*4*1024*1000)
	})
	// The small shapes of a training step: per-op overhead dominates.
	small, sb := randF32(rng, 16, 256), randF32(rng, 256)
	b.Run("Gelu/16x256", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			tensor.Gelu(small)
		}
	})
	b.Run("AddBias/16x256", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			tensor.Add(small, sb)
		}
	})
}
