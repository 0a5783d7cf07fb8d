package nn_test

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/autodiff"
	"github.com/gonox/gonox/nn"
	"github.com/gonox/gonox/optim"
	"github.com/gonox/gonox/pytree"
	"github.com/gonox/gonox/tensor"
)

// A training loop that donates its gradients, loss and previous
// parameters and state each step, with the backward pass recycling the
// activations, computes bit for bit what one that donates nothing does
// (several steps of Adam on an MLP, each activation), while the allocator
// cache serves its allocations.
func TestTrainingWithDonation(t *testing.T) {
	for _, act := range []nn.Activation{nn.Relu, nn.Gelu, nn.Tanh} {
		k := tensor.NewKey(4).Split(3)
		model := nn.NewMLP(k[0], []int{8, 64, 32, 4}, nn.MLPOptions{Activation: act})
		x, y := tensor.Normal(k[1], 16, 8), tensor.Normal(k[2], 16, 4)
		loss := func(m nn.MLP, x *tensor.Tensor) *tensor.Tensor { return tensor.MSE(m.Forward(x), y) }
		train := func(donate bool) ([]float32, []float64, int64) {
			var opts []autodiff.Option
			if donate {
				opts = append(opts, autodiff.RecycleIntermediates())
			}
			step := autodiff.ValueAndGradWith(loss, opts...)
			opt := optim.Adam(optim.Constant(1e-2))
			m, st := model, opt.Init(model)
			var losses []float64
			hits := tensor.CacheHits()
			for i := range 6 {
				l, g := step(m, x)
				losses = append(losses, l.Item())
				m2, st2 := optim.Step(opt, m, g, st)
				if donate {
					tensor.Donate(l)
					autodiff.DonateTree(g)
					if i > 0 { // the first step's parameters are the caller's
						autodiff.DonateTree(m)
						autodiff.DonateTree(st)
					}
				}
				m, st = m2, st2
			}
			var out []float32
			for _, p := range pytree.Leaves(m) {
				out = append(out, p.Float32s()...)
			}
			return out, losses, tensor.CacheHits() - hits
		}
		want, wantLoss, _ := train(false)
		got, gotLoss, hits := train(true)
		assert.Equal(t, wantLoss, gotLoss)
		require.Len(t, got, len(want))
		for i := range want {
			require.Equal(t, math.Float32bits(want[i]), math.Float32bits(got[i]), "element %d", i)
		}
		assert.Greater(t, hits, int64(50), "the cache served few allocations")
		for _, p := range pytree.Leaves(model) {
			assert.False(t, p.IsDonated())
		}
	}
}
