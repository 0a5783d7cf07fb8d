package nn_test

import (
	"fmt"
	"testing"

	"github.com/gonox/gonox/autodiff"
	"github.com/gonox/gonox/nn"
	"github.com/gonox/gonox/tensor"
)

// BenchmarkRecurrent times one forward and backward pass (the gradient
// of Σ y² with respect to every parameter) of the sequence layers on
// [T=50, batch=32, in=64] with hidden 128, float32, in wall and CPU time;
// GFLOP/s counts the matrix products (3 × the forward's). The PyTorch
// figures of docs/performance.md's "PyTorch's recurrent layers" are of the
// same step.
func BenchmarkRecurrent(b *testing.B) {
	const T, B, in, hidden = 50, 32, 64, 128
	x := tensor.Normal(tensor.NewKey(1), T, B, in)
	for _, c := range []struct {
		name  string
		gates int
		f     func(key tensor.Key, opts nn.RecurrentOptions) func() any
	}{
		{"LSTM", 4, func(key tensor.Key, opts nn.RecurrentOptions) func() any {
			l := nn.NewLSTM(key, in, hidden, opts)
			g := autodiff.Grad(func(l nn.LSTM) *tensor.Tensor {
				y, _ := l.Forward(x, nn.LSTMState{})
				return tensor.Sum(tensor.Square(y))
			})
			return func() any { return g(l) }
		}},
		{"GRU", 3, func(key tensor.Key, opts nn.RecurrentOptions) func() any {
			l := nn.NewGRU(key, in, hidden, opts)
			g := autodiff.Grad(func(l nn.GRU) *tensor.Tensor { y, _ := l.Forward(x, nil); return tensor.Sum(tensor.Square(y)) })
			return func() any { return g(l) }
		}},
		{"RNN", 1, func(key tensor.Key, opts nn.RecurrentOptions) func() any {
			l := nn.NewRNN(key, in, hidden, opts)
			g := autodiff.Grad(func(l nn.RNN) *tensor.Tensor { y, _ := l.Forward(x, nil); return tensor.Sum(tensor.Square(y)) })
			return func() any { return g(l) }
		}},
	} {
		for _, opts := range []nn.RecurrentOptions{{}, {Layers: 2, Bidirectional: true}} {
			name := fmt.Sprintf("%s/layers=%d/bidirectional=%v", c.name, max(opts.Layers, 1), opts.Bidirectional)
			b.Run(name, func(b *testing.B) {
				f := c.f(tensor.NewKey(2), opts)
				layers, D := max(opts.Layers, 1), 1
				if opts.Bidirectional {
					D = 2
				}
				flops := 0.0
				for k := range layers {
					inK := in
					if k > 0 {
						inK = D * hidden
					}
					flops += 3 * float64(D*T*B*(inK+hidden)*c.gates*hidden*2)
				}
				b.ReportAllocs()
				runStep(b, func() { f() }, flops)
			})
		}
	}
}
