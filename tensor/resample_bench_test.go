package tensor_test

import (
	"testing"

	"github.com/gonox/gonox/autodiff"
	"github.com/gonox/gonox/tensor"
)

// BenchmarkResample: a decoder's 2× upsampling of f32[8,64,64,64] (bilinear
// forward, forward and gradient, nearest) and a 3×3 convolution's reflect
// padding of it. docs/performance.md "Upsampling and padding modes"
// compares them with PyTorch in CPU time.
func BenchmarkResample(b *testing.B) {
	x := tensor.Normal(tensor.NewKey(0), 8, 64, 64, 64)
	bilinear := tensor.InterpSpec{Mode: tensor.InterpLinear, ScaleFactor: []float64{2}}
	grad := autodiff.Grad(func(x *tensor.Tensor) *tensor.Tensor { return tensor.Sum(tensor.Interpolate(x, bilinear)) })
	for _, c := range []struct {
		name string
		f    func()
	}{
		{"bilinear", func() { tensor.Interpolate(x, bilinear) }},
		{"bilinear+grad", func() { grad(x) }},
		{"nearest", func() { tensor.Interpolate(x, tensor.InterpSpec{ScaleFactor: []float64{2}}) }},
		{"reflect", func() { tensor.PadWith(x, [][2]int{{0, 0}, {0, 0}, {1, 1}, {1, 1}}, tensor.PadReflect) }},
	} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				c.f()
			}
		})
	}
}
