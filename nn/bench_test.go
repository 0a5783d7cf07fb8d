package nn_test

import (
	"fmt"
	"testing"

	"github.com/gonox/gonox/autodiff"
	"github.com/gonox/gonox/nn"
	"github.com/gonox/gonox/tensor"
)

// BenchmarkMLPStep measures one forward and backward pass of an MLP with
// ReLU and an MSE loss (the gradient of every parameter), reporting µs/step
// and the GFLOP/s of its matrix products (2·batch·in·out per product, three
// products per layer: forward, input gradient, weight gradient).
func BenchmarkMLPStep(b *testing.B) {
	cases := []struct {
		sizes []int
		batch int
	}{
		{[]int{32, 128, 256, 128, 4}, 16},
		{[]int{32, 128, 256, 128, 4}, 1024},
		{[]int{784, 1024, 1024, 10}, 256},
	}
	for _, c := range cases {
		b.Run(fmt.Sprintf("sizes=%v/batch=%d", c.sizes, c.batch), func(b *testing.B) {
			k1, k2 := tensor.NewKey(0).Split2()
			m := nn.NewMLP(k1, c.sizes, nn.MLPOptions{})
			x := tensor.Normal(k2, c.batch, c.sizes[0])
			y := tensor.Zeros(tensor.Float32, c.batch, c.sizes[len(c.sizes)-1])
			step := autodiff.ValueAndGradWith(func(m nn.MLP, x *tensor.Tensor) *tensor.Tensor {
				return tensor.MSE(m.Forward(x), y)
			})
			flops := 0.0
			for i := 0; i+1 < len(c.sizes); i++ {
				flops += 3 * 2 * float64(c.batch*c.sizes[i]*c.sizes[i+1])
			}
			step(m, x) // warm up
			b.ResetTimer()
			for b.Loop() {
				step(m, x)
			}
			sec := b.Elapsed().Seconds() / float64(b.N)
			b.ReportMetric(sec*1e6, "µs/step")
			b.ReportMetric(flops/sec/1e9, "GFLOP/s")
		})
	}
}
