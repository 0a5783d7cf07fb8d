package optim_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/optim"
	"github.com/gonox/gonox/pytree"
	"github.com/gonox/gonox/tensor"
)

// StepDonating gives the bits of Step, for the transforms with a donating
// step (Adam, AdamW) and the others, and leaves every tensor of the
// params, grads and state it was given donated unless the results hold it
// (a parameter without a gradient), also with tied weights (one tensor at
// two positions of params and of grads).
func TestStepDonating(t *testing.T) {
	sizes := []int{200_000, 10, 5, 1<<19 + 3, 0, 130}
	model := func(scale float64) map[string]*tensor.Tensor { return cosParams(sizes, scale) }
	for name, tx := range map[string]optim.Transform{
		"Adam":    optim.Adam(optim.Constant(0.01)),
		"AdamW":   optim.AdamW(optim.Constant(0.01), optim.AdamWOptions{WeightDecay: 0.1, Mask: pytree.PathGlob("p[0-2]")}),
		"SGD":     optim.SGD(optim.Constant(0.1), optim.SGDOptions{Momentum: 0.9}),
		"Chain":   optim.Chain(optim.ClipByGlobalNorm(1), optim.Adam(optim.Constant(0.01))),
		"Adagrad": optim.Adagrad(optim.Constant(0.1)),
	} {
		t.Run(name, func(t *testing.T) {
			donated, plain := model(1), model(1)
			if name != "Chain" {
				// Tied weights: one tensor at two positions.
				donated["tied"], plain["tied"] = donated["p0"], plain["p0"]
			}
			ds, ps := tx.Init(donated), tx.Init(plain)
			for step := range 3 {
				grads, grads2 := model(float64(step+2)), model(float64(step+2))
				if name != "Chain" {
					grads["tied"], grads2["tied"] = grads["p0"], grads2["p0"]
				}
				grads["p1"], grads2["p1"] = nil, nil // no gradient: kept
				oldP, oldS := donated, ds
				donated, ds = optim.StepDonating(tx, donated, grads, ds)
				plain, ps = optim.Step(tx, plain, grads2, ps)
				live := map[*tensor.Tensor]bool{}
				for _, x := range pytree.Leaves([]any{donated, ds}) {
					live[x] = true
				}
				for i, x := range pytree.Leaves([]any{oldP, grads, oldS}) {
					assert.Equal(t, !live[x], x.IsDonated(), "step %d: leaf %d", step, i)
				}
				assert.False(t, donated["p1"].IsDonated(), "a parameter without a gradient is kept")
				for k := range plain {
					require.Equal(t, plain[k].Float32s(), donated[k].Float32s(), "step %d: %s", step, k)
				}
			}
		})
	}
}
