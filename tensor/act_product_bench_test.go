package tensor

import (
	"math/rand/v2"
	"testing"
)

// BenchmarkActRaggedDotGrad is the MoE experts' second product with its
// activation, forward and backward: GELU of [4096,256] hidden values into
// 8 experts' [256,128] weights, 512 rows each (examples/moe's default
// layer), float32 and with bfloat16 products.
func BenchmarkActRaggedDotGrad(b *testing.B) {
	rng := rand.New(rand.NewPCG(3, 4))
	x, w := randTensor(rng, 4096, 256), randTensor(rng, 8, 256, 128)
	gs := FromInt32([]int32{512, 512, 512, 512, 512, 512, 512, 512}, 8)
	g := randTensor(rng, 4096, 128)
	for _, c := range []struct {
		name string
		f    func([]*Tensor) *Tensor
	}{
		{"float32", func(in []*Tensor) *Tensor { return ActRaggedDot(ActGelu, in[0], in[1], gs) }},
		{"bf16", func(in []*Tensor) *Tensor { return ActRaggedDotAs(ActGelu, in[0], in[1], gs, BFloat16) }},
	} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				Donate(vjpAll(c.f, g, x, w)...)
			}
		})
	}
}
