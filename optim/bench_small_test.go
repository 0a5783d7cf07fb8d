package optim_test

import (
	"testing"

	"github.com/gonox/gonox/autodiff"
	"github.com/gonox/gonox/optim"
	"github.com/gonox/gonox/tensor"
)

// BenchmarkStepSmallMLP measures Adam's step on the parameters of the MLP
// 32-128-256-128-4 (nn.BenchmarkMLPStep's batch-16 model, 8 leaves, 70k
// floats), through optim.Step, the old parameters and state donated as a training
// loop donates them: at this size the
// step is mostly its walks of the trees and its bookkeeping, not the
// fused kernel's arithmetic.
func BenchmarkStepSmallMLP(b *testing.B) {
	keys := tensor.NewKey(3).Split(2)
	sizes := []int{32, 128, 256, 128, 4}
	var params, grads []*tensor.Tensor
	for i := 0; i+1 < len(sizes); i++ {
		params = append(params, tensor.Normal(keys[0], sizes[i], sizes[i+1]), tensor.Normal(keys[0], sizes[i+1]))
		grads = append(grads, tensor.Normal(keys[1], sizes[i], sizes[i+1]), tensor.Normal(keys[1], sizes[i+1]))
	}
	tx := optim.Adam(optim.Constant(1e-3))
	state := tx.Init(params)
	for b.Loop() {
		p2, s2 := optim.Step(tx, params, grads, state)
		// As a training loop: the old parameters and state are dead.
		autodiff.DonateTree(params)
		autodiff.DonateTree(state)
		params, state = p2, s2
	}
	b.ReportMetric(b.Elapsed().Seconds()/float64(b.N)*1e6, "µs/step")
}
