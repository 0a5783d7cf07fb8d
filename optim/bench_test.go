package optim_test

import (
	"testing"

	"github.com/gonox/gonox/optim"
	"github.com/gonox/gonox/tensor"
)

// BenchmarkStep measures one optimizer step (Update and Apply) on a model
// of 1M+ parameters. GB/s counts the bytes an ideal fused kernel would move:
// params, gradients and each state tensor read once, params and state written
// once.
func BenchmarkStep(b *testing.B) {
	k1, k2 := tensor.NewKey(1).Split2()
	params := wb{W: tensor.Normal(k1, 1024, 1024), B: tensor.Zeros(tensor.Float32, 1024)}
	grads := wb{W: tensor.Normal(k2, 1024, 1024), B: tensor.Ones(tensor.Float32, 1024)}
	n := float64(1024*1024 + 1024)
	lr := optim.Constant(1e-3)
	for _, bc := range []struct {
		name   string
		tx     optim.Transform
		states int
	}{
		{"SGD", optim.SGD(lr), 0},
		{"SGDMomentum", optim.SGD(lr, optim.SGDOptions{Momentum: 0.9}), 1},
		{"Adam", optim.Adam(lr), 2},
		{"AdamW", optim.AdamW(lr, optim.AdamWOptions{WeightDecay: 0.1}), 2},
		{"Lion", optim.Lion(lr), 1},
		{"Adafactor", optim.Adafactor(lr), 0},
		{"ClipAdamW", optim.Chain(optim.ClipByGlobalNorm(1), optim.AdamW(lr)), 2},
	} {
		b.Run(bc.name, func(b *testing.B) {
			state := bc.tx.Init(params)
			p := params
			for b.Loop() {
				p, state = optim.Step(bc.tx, p, grads, state)
			}
			sec := b.Elapsed().Seconds() / float64(b.N)
			b.ReportMetric(sec*1e6, "µs/step")
			b.ReportMetric(4*n*float64(3+2*bc.states)/sec/1e9, "GB/s")
		})
	}
}
