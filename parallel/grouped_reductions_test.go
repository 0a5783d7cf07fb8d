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

// TestGroupedReductions: where the sharded update takes the reductions
// later without folds, in one process it reduce-scatters the split
// gradients in one group (shard.Ctx.PsumScatterGroupStart) and trains to
// the bits of the update that reduce-scatters each leaf on its own
// (parallel.ReduceEachLeaf): losses, parameters and state after 3 steps,
// Adam, AdamW with weight decay, NAdam, SGD with momentum and Lion, with
// and without clipping, on 1, 2 and 2×4 devices. It fails if the group
// never takes the guide's 4 weight matrices on every device each step
// where the later path runs, or takes any elsewhere.
func TestGroupedReductions(t *testing.T) {
	requireLaterPath(t, laterPath{
		seed: 91,
		meshes: []*shard.Mesh{
			shard.NewMesh([]int{1}, []string{"dp"}),
			shard.NewMesh([]int{2}, []string{"dp"}),
			shard.NewMesh([]int{2, 4}, []string{"dp", "tp"}),
		},
		off:   parallel.ReduceEachLeaf,
		count: parallel.LaterGrouped,
		still: parallel.LaterUpdates, // no gradient folded
		what:  "reductions taken from a group",
	})
}

// TestGroupedReductionsOddLeaves: leaves split along their second
// dimension (a 12×24 weight on 8 devices) beside leaves split along
// their first, each part of 3 or 5 rows or columns, with Adam and SGD
// (grouped), AdamW decaying the matrices only and a masked Adam (which
// take the update after every reduction: not grouped), each to the bits
// of the update that reduce-scatters every leaf on its own.
func TestGroupedReductionsOddLeaves(t *testing.T) {
	mlp, _ := guideModel([]int{12, 24, 40, 5}, 16, 7)
	var batches []batch
	for i := range 3 {
		_, b := guideModel([]int{12, 24, 40, 5}, 16, 70+uint64(i))
		batches = append(batches, b)
	}
	matrices := func(_ pytree.Path, x *tensor.Tensor) bool { return x.Rank() >= 2 }
	for _, o := range []struct {
		name    string
		opt     optim.Transform
		grouped bool
	}{
		{"adam", optim.Adam(optim.Constant(1e-3)), true},
		{"adamw masked decay", optim.AdamW(optim.Constant(1e-3), optim.AdamWOptions{WeightDecay: 0.1, Mask: matrices}), false},
		{"sgd", optim.SGD(optim.Constant(0.05)), true},
		{"masked adam", optim.Masked(optim.Adam(optim.Constant(1e-3)), matrices), false},
	} {
		for _, shape := range [][]int{{8}, {2, 4}} {
			mesh := shard.NewMesh(shape, []string{"dp", "tp"}[:len(shape)])
			t.Run(fmt.Sprintf("%v/%s", shape, o.name), func(t *testing.T) {
				run := func(each bool) ([]float64, []*tensor.Tensor, int64) {
					if each {
						defer parallel.ReduceEachLeaf()()
					}
					tr, err := parallel.New(mlp, parallel.Config[nn.MLP, batch]{Loss: mlpLoss, Mesh: mesh, Optimizer: o.opt})
					require.NoError(t, err)
					n0 := parallel.LaterGrouped()
					l := stepAll(t, tr, batches)
					return l, append(pytree.Leaves(tr.Params()), floatState(tr.State())...), parallel.LaterGrouped() - n0
				}
				wl, wp, wn := run(true)
				l, p, n := run(false)
				require.Zero(t, wn)
				if o.grouped {
					require.Equal(t, int64(3*len(batches)*mesh.Size()), n, "the 3 weight matrices grouped")
				} else {
					require.Zero(t, n)
				}
				requireSameTraining(t, wl, wp, l, p)
			})
		}
	}
}

// TestGroupedReductionsEP: under expert parallelism the experts (reduced
// over dp) and the replicated weights (over dp and ep) are reduce-scattered
// in two groups, to the bits of the update that reduce-scatters each leaf
// on its own.
func TestGroupedReductionsEP(t *testing.T) {
	for _, c := range []struct{ dp, ep int }{{2, 4}, {4, 2}} {
		t.Run(fmt.Sprintf("%dx%d", c.dp, c.ep), func(t *testing.T) {
			mesh := shard.NewMesh([]int{c.dp, c.ep}, []string{"dp", "ep"})
			n := trainEPBothWays(t, mesh, optim.AdamW(optim.Constant(1e-2), optim.AdamWOptions{WeightDecay: 0.1}),
				parallel.ReduceEachLeaf, parallel.LaterGrouped)
			// The experts' two matrices and the router, In's and Out's
			// weights: 5 split leaves on every device each step.
			require.Equal(t, int64(5*3*mesh.Size()), n, "reductions taken from a group")
		})
	}
}
