package parallel_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/nn"
	"github.com/gonox/gonox/parallel"
	"github.com/gonox/gonox/pytree"
	"github.com/gonox/gonox/tensor"
)

// spareMLP is an MLP with a parameter its loss does not use, whose
// gradient (zeros) the backward pass never hands over as final.
type spareMLP struct {
	MLP   nn.MLP
	Spare *tensor.Tensor
}

// TestUpdateInBackward: the host step that updates each parameter as soon
// as the backward pass has its final gradient (an elementwise optimizer's
// tensor.PieceStep per leaf, optim.StepIntoOverStateLater) trains to the
// bits of the step that updates after the backward pass
// (parallel.UpdateAfterBackward): losses, parameters and optimizer state
// after 3 steps, for Adam, AdamW (weight decay reads the parameter),
// NAdam, SGD with momentum, and Lion, which cannot take its gradients
// later, with and without global-norm clipping (the norm needs every
// gradient first) and micro-batches (the gradient is final after the
// last one only), on a model with a parameter the loss does not use
// (updated from its zero gradient after the pass). It fails if the
// update in the backward pass never runs where it should, or runs where
// it must not.
func TestUpdateInBackward(t *testing.T) {
	mlp, _ := guideModel(guideSizes, 16, 3)
	model := spareMLP{MLP: mlp, Spare: tensor.Full(tensor.Float32, 0.5, 3, 2)}
	loss := func(m spareMLP, b batch) *tensor.Tensor { return mlpLoss(m.MLP, b) }
	var batches []batch
	for i := range 3 {
		_, b := guideModel(guideSizes, 16, uint64(70+i))
		batches = append(batches, b)
	}
	for _, o := range laterOptimizers() {
		for _, clip := range []float64{0, 0.5} {
			for _, micro := range []int{1, 2} {
				t.Run(fmt.Sprintf("%s/clip=%v/micro=%d", o.name, clip, micro), func(t *testing.T) {
					run := func(after bool) ([]float64, []*tensor.Tensor, int64) {
						if after {
							defer parallel.UpdateAfterBackward()()
						}
						tr, err := parallel.New(model, parallel.Config[spareMLP, batch]{Loss: loss, Optimizer: o.opt, ClipGlobalNorm: clip, MicroBatches: micro})
						require.NoError(t, err)
						n0 := parallel.BackwardSteps()
						l := stepAll(t, tr, batches)
						n := parallel.BackwardSteps() - n0
						return l, append(pytree.Leaves(tr.Params()), floatState(tr.State())...), n
					}
					wl, wp, wn := run(true)
					l, p, n := run(false)
					require.Zero(t, wn, "updated in the backward pass with UpdateAfterBackward")
					if o.later && clip == 0 && micro == 1 {
						require.Equal(t, int64(len(batches)), n, "steps updated in the backward pass")
					} else {
						require.Zero(t, n, "steps updated in the backward pass")
					}
					requireSameTraining(t, wl, wp, l, p)
				})
			}
		}
	}
}

// TestUpdateInBackwardGroupsSmallLeaves: the host step that updates in the
// backward pass steps the leaves too small to split on their own together
// (tensor.StepGroup: once 2^16 elements wait, split over the cores, and
// the rest after the pass) and trains to the bits of the step that updates
// each leaf on its own as its gradient becomes final, and of the step that
// updates after the pass: losses, parameters and state after 3 steps of
// Adam, AdamW, NAdam and SGD with momentum, on an MLP whose six hidden weights of
// 128×128 (16 K elements each, ~86 K in all with the biases) fill a group
// during the pass, and a parameter the loss does not use.
func TestUpdateInBackwardGroupsSmallLeaves(t *testing.T) {
	sizes := []int{32, 128, 128, 128, 128, 128, 128, 128, 4}
	mlp, _ := guideModel(sizes, 16, 5)
	model := spareMLP{MLP: mlp, Spare: tensor.Full(tensor.Float32, 0.5, 3, 2)}
	loss := func(m spareMLP, b batch) *tensor.Tensor { return mlpLoss(m.MLP, b) }
	var batches []batch
	for i := range 3 {
		_, b := guideModel(sizes, 16, uint64(80+i))
		batches = append(batches, b)
	}
	for _, o := range laterOptimizers() {
		if !o.later {
			continue
		}
		run := func(t *testing.T, restore func()) ([]float64, []*tensor.Tensor) {
			defer restore()
			tr, err := parallel.New(model, parallel.Config[spareMLP, batch]{Loss: loss, Optimizer: o.opt})
			require.NoError(t, err)
			l := stepAll(t, tr, batches)
			return l, append(pytree.Leaves(tr.Params()), floatState(tr.State())...)
		}
		gl, gp := run(t, func() {})
		refs := map[string]func() (restore func()){
			"one by one": parallel.StepLeavesOneByOne, "after the pass": parallel.UpdateAfterBackward,
		}
		for name, set := range refs {
			t.Run(o.name+"/"+name, func(t *testing.T) {
				l, p := run(t, set())
				requireSameTraining(t, l, p, gl, gp)
			})
		}
	}
}
