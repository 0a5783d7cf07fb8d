package parallel_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/nn"
	"github.com/gonox/gonox/optim"
	"github.com/gonox/gonox/parallel"
	"github.com/gonox/gonox/pytree"
	"github.com/gonox/gonox/shard"
	"github.com/gonox/gonox/tensor"
)

// TestFoldedUpdate: the sharded update that consumes each folded weight
// gradient block by block as the fold computes it (Adam's, SGD's step on
// each block while it is in cache: optim.StepIntoOverStateLater with
// shard.FoldedGradient.WaitThen) trains to the bits of the update that
// waits for every gradient first (parallel.UpdateAfterFolds): losses,
// parameters and optimizer state after 3 steps, for Adam, AdamW (weight
// decay reads the parameter), NAdam, SGD with momentum, and Lion, which
// cannot take its gradients later (not one pass per element in optim),
// with and without global-norm clipping (the norm needs every gradient
// before any update: no block is consumed), on 1, 2 and 8 devices and
// two data axes. It fails if the consuming path never runs where it
// should, or runs where it must not.
func TestFoldedUpdate(t *testing.T) {
	defer parallel.FoldSmall()()
	mlp, _ := guideModel(guideSizes, 16, 3)
	var batches []batch
	for i := range 3 {
		_, b := guideModel(guideSizes, 16, uint64(70+i))
		batches = append(batches, b)
	}
	meshes := []*shard.Mesh{
		shard.NewMesh([]int{1}, []string{"dp"}),
		shard.NewMesh([]int{2}, []string{"dp"}),
		shard.NewMesh([]int{8}, []string{"dp"}),
		shard.NewMesh([]int{2, 4}, []string{"dp", "tp"}),
	}
	for _, mesh := range meshes {
		for _, o := range laterOptimizers() {
			for _, clip := range []float64{0, 0.5} {
				t.Run(fmt.Sprintf("%v/%s/clip=%v", mesh.Shape(), o.name, clip), func(t *testing.T) {
					run := func(after bool) ([]float64, []*tensor.Tensor, int64) {
						if after {
							defer parallel.UpdateAfterFolds()()
						}
						tr, err := parallel.New(mlp, parallel.Config[nn.MLP, batch]{Loss: mlpLoss, Mesh: mesh, Optimizer: o.opt, ClipGlobalNorm: clip})
						require.NoError(t, err)
						n0 := parallel.LaterUpdates()
						l := stepAll(t, tr, batches)
						n := parallel.LaterUpdates() - n0
						return l, append(pytree.Leaves(tr.Params()), floatState(tr.State())...), n
					}
					wl, wp, wn := run(true)
					l, p, n := run(false)
					require.Zero(t, wn, "consumed with UpdateAfterFolds")
					if mesh.Size() > 1 && o.later && clip == 0 {
						// The guide's 4 weight matrices, on every device each step.
						require.Equal(t, int64(4*len(batches)*mesh.Size()), n, "folded gradients consumed block by block")
					} else {
						require.Zero(t, n, "folded gradients consumed block by block")
					}
					requireSameTraining(t, wl, wp, l, p)
				})
			}
		}
	}
}

// TestFoldedUpdateStateHandedOut: a step whose old optimizer state was
// handed out (Trainer.State) does not consume its folded gradients block
// by block (that writes the new moments over the old ones): the state
// handed out keeps its values, the step after it consumes them again,
// and the training has the bits of a trainer whose state was never
// handed out.
func TestFoldedUpdateStateHandedOut(t *testing.T) {
	defer parallel.FoldSmall()()
	var n0 int64
	stateHandedOut(t, 80, 2, func(i int) {
		switch i {
		case 0:
			n0 = parallel.LaterUpdates()
		case 1:
			require.Equal(t, n0, parallel.LaterUpdates(), "a step over a state handed out")
		case 2:
			require.Equal(t, n0+4*2, parallel.LaterUpdates(), "the step after it: 4 weights on 2 devices")
		}
	})
}

// laterOptimizer is an optimizer the update-later tests train with, and
// whether it can take its gradients later (one pass per element).
type laterOptimizer struct {
	name  string
	opt   optim.Transform
	later bool
}

// laterOptimizers are Adam, AdamW (weight decay reads the parameter),
// NAdam and SGD with momentum, which can take their gradients later, and
// Lion, which cannot (not one pass per element in optim).
func laterOptimizers() []laterOptimizer {
	return []laterOptimizer{
		{"adam", optim.Adam(optim.Constant(1e-3)), true},
		{"adamw", optim.AdamW(optim.Constant(1e-3), optim.AdamWOptions{WeightDecay: 0.1}), true},
		{"nadam", optim.NAdam(optim.Constant(1e-3)), true},
		{"sgd", optim.SGD(optim.Constant(0.05), optim.SGDOptions{Momentum: 0.9}), true},
		{"lion", optim.Lion(optim.Constant(1e-3)), false},
	}
}

// requireSameTraining requires a run's losses l and parameters and state
// p to be the bits of the reference run's wl and wp.
func requireSameTraining(t *testing.T, wl []float64, wp []*tensor.Tensor, l []float64, p []*tensor.Tensor) {
	t.Helper()
	require.Equal(t, wl, l)
	require.Len(t, p, len(wp))
	for i := range p {
		require.Equal(t, bitsOf(wp[i].Float32s()), bitsOf(p[i].Float32s()), "leaf %d", i)
	}
}

// floatLeaves returns the float32 leaves of tree, as placed.
func floatLeaves(tree any) []*tensor.Tensor {
	var out []*tensor.Tensor
	for _, x := range pytree.Leaves(tree) {
		if x.DType() == tensor.Float32 {
			out = append(out, x)
		}
	}
	return out
}
