package optim_test

import (
	"testing"

	"github.com/gonox/gonox/optim"
)

// TestTorchParity3: SGD with dampening and the Cyclic schedule follow
// torch.optim (testdata/torch_parity3.py wrote testdata/torch_parity3.json
// from torch_optim.py's parameters and gradients), and so do the
// OneCycleLR variants that map onto PiecewiseInterpolate.
func TestTorchParity3(t *testing.T) {
	ref := loadTorchRef(t, "torch_parity3.json")

	c := optim.Constant
	cases := map[string]optim.Transform{
		"SGD dampening":   optim.SGD(c(0.05), optim.SGDOptions{Momentum: 0.9, Dampening: 0.3}),
		"SGD dampening 1": optim.SGD(c(0.05), optim.SGDOptions{Momentum: 0.5, Dampening: 1}),
		"SGD dampening weight decay": optim.Chain(optim.AddDecayedWeights(0.1, nil),
			optim.SGD(c(0.05), optim.SGDOptions{Momentum: 0.8, Dampening: 0.5})),
		"SGD momentum CyclicLR": optim.SGD(optim.Cyclic(0.01, 0.1, 3), optim.SGDOptions{Momentum: 0.9}),
	}
	ref.checkTrajectories(t, cases, "torch_parity3.py")

	// OneCycleLR(total_steps=T, pct_start=p, three_phase=True) with
	// cosine annealing: PiecewiseInterpolate's cosine pieces, at the
	// boundaries of LinearOneCycle's doc (p·T-1, 2·p·T-2, T-1).
	const total, pct, div, final = 20, 0.3, 25.0, 1e4
	schedules := map[string]optim.Schedule{
		"CyclicLR triangular":             optim.Cyclic(0.01, 0.1, 4),
		"CyclicLR triangular up 3 down 5": optim.Cyclic(0.02, 0.2, 3, optim.CyclicOptions{StepsDown: 5}),
		"CyclicLR triangular2":            optim.Cyclic(0.01, 0.1, 3, optim.CyclicOptions{Mode: optim.CyclicTriangular2}),
		"CyclicLR exp_range": optim.Cyclic(0.01, 0.1, 2,
			optim.CyclicOptions{StepsDown: 4, Mode: optim.CyclicExpRange, Gamma: 0.9}),
		"OneCycleLR cos three_phase": optim.PiecewiseInterpolate(optim.InterpolateCosine, 1/div,
			map[int]float64{pct*total - 1: div, 2*pct*total - 2: 1 / div, total - 1: 1 / final}),
	}
	ref.checkSchedules(t, schedules, 1e-12, "torch_parity3.py")
}
