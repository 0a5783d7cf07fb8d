package parallel_test

import (
	"fmt"
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/nn"
	"github.com/gonox/gonox/optim"
	"github.com/gonox/gonox/parallel"
	"github.com/gonox/gonox/pytree"
	"github.com/gonox/gonox/shard"
	"github.com/gonox/gonox/tensor"
)

// TestUpdateIntoGather: the sharded update that writes each updated
// block straight into the all-gather's result (optim.StepInto into
// shard.GatherTarget's blocks), and the new moments over the old ones
// (optim.StepIntoOverState), trains to the bits of the update whose
// blocks are copied there and whose state is fresh
// (parallel.CopyUpdatedBlocks), for Adam, AdamW (weight decay reads the
// parameter), SGD with momentum and Lion (which writes to fresh storage:
// the gather copies), on 1, 2 and 8 devices, with and without global-norm
// clipping (a Chain, which writes to fresh storage, and a psum issued
// between the gathers' places and their starts): parameters and
// optimizer state after 3 steps.
func TestUpdateIntoGather(t *testing.T) {
	mlp, _ := guideModel(guideSizes, 16, 3)
	var batches []batch
	for i := range 3 {
		_, b := guideModel(guideSizes, 16, uint64(60+i))
		batches = append(batches, b)
	}
	opts := map[string]optim.Transform{
		"adam":  optim.Adam(optim.Constant(1e-3)),
		"adamw": optim.AdamW(optim.Constant(1e-3), optim.AdamWOptions{WeightDecay: 0.1}),
		"sgd":   optim.SGD(optim.Constant(0.05), optim.SGDOptions{Momentum: 0.9}),
		"lion":  optim.Lion(optim.Constant(1e-3)),
	}
	for _, devices := range []int{1, 2, 8} {
		for name, opt := range opts {
			for _, clip := range []float64{0, 0.5} {
				t.Run(fmt.Sprintf("devices=%d/%s/clip=%v", devices, name, clip), func(t *testing.T) {
					run := func(copied, fresh bool) ([]float64, []*tensor.Tensor) {
						if copied {
							defer parallel.CopyUpdatedBlocks()()
						}
						if fresh {
							defer parallel.FreshState()()
						}
						mesh := shard.NewMesh([]int{devices}, []string{"data"})
						tr, err := parallel.New(mlp, parallel.Config[nn.MLP, batch]{Loss: mlpLoss, Mesh: mesh, Optimizer: opt, ClipGlobalNorm: clip})
						require.NoError(t, err)
						l := stepAll(t, tr, batches)
						return l, append(pytree.Leaves(tr.Params()), floatState(tr.State())...)
					}
					wl, wp := run(true, true)
					for _, fresh := range []bool{false, true} {
						l, p := run(false, fresh)
						require.Equal(t, wl, l, "fresh state %v", fresh)
						require.Len(t, p, len(wp))
						for i := range p {
							require.Equal(t, bitsOf(wp[i].Float32s()), bitsOf(p[i].Float32s()), "leaf %d, fresh state %v", i, fresh)
						}
					}
				})
			}
		}
	}
}

// TestStateHandedOutKept: the optimizer state Trainer.State hands out is
// not written over by the next step (optim.StepIntoOverState only writes
// over a state the trainer alone holds): its values after a step are
// those it had when handed out, and the training goes on with the bits
// of a trainer whose state was never handed out.
func TestStateHandedOutKept(t *testing.T) {
	stateHandedOut(t, 60, 1, nil)
}

// stateHandedOut trains two Adam trainers of the guide MLP on a 2-device
// mesh alike for two steps, hands the optimizer state of one ("held")
// out, and trains both for steps more, calling at(i) ahead of held's
// step i of those and at(steps) after its last, before the other's: the
// state handed out must keep its values, and held
// must end with the parameters of the other, bit for bit. The batches
// are drawn from seeds seed, seed+1, ...
func stateHandedOut(t *testing.T, seed uint64, steps int, at func(i int)) {
	t.Helper()
	mlp, _ := guideModel(guideSizes, 16, 3)
	var batches []batch
	for i := range 2 + steps {
		_, b := guideModel(guideSizes, 16, seed+uint64(i))
		batches = append(batches, b)
	}
	mesh := shard.NewMesh([]int{2}, []string{"data"})
	newTrainer := func() *parallel.Trainer[nn.MLP, batch] {
		tr, err := parallel.New(mlp, parallel.Config[nn.MLP, batch]{Loss: mlpLoss, Mesh: mesh, Optimizer: optim.Adam(optim.Constant(1e-3))})
		require.NoError(t, err)
		return tr
	}
	held, plain := newTrainer(), newTrainer()
	stepAll(t, held, batches[:2])
	stepAll(t, plain, batches[:2])
	st := floatLeaves(held.State()) // as placed
	require.NotEmpty(t, st)
	var kept [][]uint32
	for _, x := range st {
		kept = append(kept, bitsOf(shard.Gather(x).Float32s()))
	}
	for i := range steps + 1 {
		if at != nil {
			at(i)
		}
		if i < steps {
			stepAll(t, held, batches[2+i:3+i])
		}
	}
	stepAll(t, plain, batches[2:])
	for i, x := range st {
		require.Equal(t, kept[i], bitsOf(shard.Gather(x).Float32s()), "state leaf %d handed out before the step", i)
	}
	hp, pp := pytree.Leaves(held.Params()), pytree.Leaves(plain.Params())
	for i := range hp {
		require.Equal(t, bitsOf(pp[i].Float32s()), bitsOf(hp[i].Float32s()), "leaf %d", i)
	}
}

// floatState returns the float32 leaves of an optimizer state, gathered
// to the host.
func floatState(s optim.State) []*tensor.Tensor {
	var out []*tensor.Tensor
	for _, x := range pytree.Leaves(s) {
		if x.DType() == tensor.Float32 {
			out = append(out, shard.Gather(x))
		}
	}
	return out
}

// bitsOf returns the bits of xs.
func bitsOf(xs []float32) []uint32 {
	out := make([]uint32, len(xs))
	for i, x := range xs {
		out[i] = math.Float32bits(x)
	}
	return out
}
