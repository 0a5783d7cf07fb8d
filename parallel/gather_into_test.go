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
// shard.GatherTarget's blocks) trains to the bits of the update whose
// blocks are copied there (parallel.CopyUpdatedBlocks), for Adam, AdamW
// (weight decay reads the parameter), SGD with momentum and Lion (which
// writes to fresh storage: the gather copies), on 1, 2 and 8 devices,
// with and without global-norm clipping (a Chain, which writes to fresh
// storage, and a psum issued between the gathers' places and their
// starts).
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
					run := func(copied bool) ([]float64, []*tensor.Tensor) {
						if copied {
							defer parallel.CopyUpdatedBlocks()()
						}
						mesh := shard.NewMesh([]int{devices}, []string{"data"})
						tr, err := parallel.New(mlp, parallel.Config[nn.MLP, batch]{Loss: mlpLoss, Mesh: mesh, Optimizer: opt, ClipGlobalNorm: clip})
						require.NoError(t, err)
						l := stepAll(t, tr, batches)
						return l, pytree.Leaves(tr.Params())
					}
					wl, wp := run(true)
					l, p := run(false)
					require.Equal(t, wl, l)
					require.Len(t, p, len(wp))
					for i := range p {
						require.Equal(t, bitsOf(wp[i].Float32s()), bitsOf(p[i].Float32s()), "leaf %d", i)
					}
				})
			}
		}
	}
}

// bitsOf returns the bits of xs.
func bitsOf(xs []float32) []uint32 {
	out := make([]uint32, len(xs))
	for i, x := range xs {
		out[i] = math.Float32bits(x)
	}
	return out
}
