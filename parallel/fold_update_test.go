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
	requireLaterPath(t, laterPath{
		seed: 70,
		meshes: []*shard.Mesh{
			shard.NewMesh([]int{1}, []string{"dp"}),
			shard.NewMesh([]int{2}, []string{"dp"}),
			shard.NewMesh([]int{8}, []string{"dp"}),
			shard.NewMesh([]int{2, 4}, []string{"dp", "tp"}),
		},
		off:   parallel.UpdateAfterFolds,
		count: parallel.LaterUpdates,
		what:  "folded gradients consumed block by block",
	})
}

// laterPath is an update path that must train to the bits of the update
// it replaces, run by requireLaterPath.
type laterPath struct {
	seed   uint64                      // the first training batch's seed
	meshes []*shard.Mesh               // meshes to train on
	skip   func(optimizer string) bool // optimizers not to train with (nil: none)
	off    func() (restore func())     // switches the path off
	count  func() int64                // runs of the path so far
	still  func() int64                // a count the path must not move (nil: none)
	what   string                      // the path, for messages
}

// requireLaterPath trains the guide model for 3 steps on each of p's
// meshes, with each of laterOptimizers (but those p skips), with and
// without global-norm clipping, once with p's path off and once on, and
// requires the same bits (losses, parameters, optimizer state). It
// requires the path to run on every device for the guide's 4 weight
// matrices each step where the mesh has more than one device, the
// optimizer can take its gradients later and nothing is clipped, and
// never elsewhere.
func requireLaterPath(t *testing.T, p laterPath) {
	t.Helper()
	mlp, _ := guideModel(guideSizes, 16, 3)
	var batches []batch
	for i := range 3 {
		_, b := guideModel(guideSizes, 16, p.seed+uint64(i))
		batches = append(batches, b)
	}
	for _, mesh := range p.meshes {
		for _, o := range laterOptimizers() {
			if p.skip != nil && p.skip(o.name) {
				continue
			}
			for _, clip := range []float64{0, 0.5} {
				t.Run(fmt.Sprintf("%v/%s/clip=%v", mesh.Shape(), o.name, clip), func(t *testing.T) {
					run := func(off bool) ([]float64, []*tensor.Tensor, int64) {
						if off {
							defer p.off()()
						}
						tr, err := parallel.New(mlp, parallel.Config[nn.MLP, batch]{Loss: mlpLoss, Mesh: mesh, Optimizer: o.opt, ClipGlobalNorm: clip})
						require.NoError(t, err)
						n0 := p.count()
						var s0 int64
						if p.still != nil {
							s0 = p.still()
						}
						l := stepAll(t, tr, batches)
						if p.still != nil {
							require.Equal(t, s0, p.still(), "a count %s must not move", p.what)
						}
						return l, append(pytree.Leaves(tr.Params()), floatState(tr.State())...), p.count() - n0
					}
					wl, wp, wn := run(true)
					l, ps, n := run(false)
					require.Zero(t, wn, "%s with the path off", p.what)
					if mesh.Size() > 1 && o.later && clip == 0 {
						// The guide's 4 weight matrices, on every device each step.
						require.Equal(t, int64(4*len(batches)*mesh.Size()), n, p.what)
					} else {
						require.Zero(t, n, p.what)
					}
					requireSameTraining(t, wl, wp, l, ps)
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
