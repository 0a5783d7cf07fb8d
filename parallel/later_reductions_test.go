package parallel_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/expert"
	"github.com/gonox/gonox/nn"
	"github.com/gonox/gonox/optim"
	"github.com/gonox/gonox/parallel"
	"github.com/gonox/gonox/pytree"
	"github.com/gonox/gonox/shard"
	"github.com/gonox/gonox/tensor"
)

// TestLaterReductions: with no weight gradient folded (the guide model's
// parts are below the fold's minimum), the sharded update takes each
// reduction as it arrives and updates its leaf at once, last leaf first,
// writing the new state over the old; it trains to the bits of the update
// that waits for every reduction first and writes fresh state
// (parallel.UpdateAfterReductions, parallel.FreshState): losses,
// parameters and optimizer state after 3 steps, for Adam, SGD with
// momentum and Lion (which cannot take its gradients later), with and
// without global-norm clipping, on 1 and 2 devices and two data axes. It fails if the path never runs where it should (the guide's
// 4 weight matrices on every device each step), or runs where it must not.
func TestLaterReductions(t *testing.T) {
	mlp, _ := guideModel(guideSizes, 16, 3)
	var batches []batch
	for i := range 3 {
		_, b := guideModel(guideSizes, 16, uint64(90+i))
		batches = append(batches, b)
	}
	meshes := []*shard.Mesh{
		shard.NewMesh([]int{1}, []string{"dp"}),
		shard.NewMesh([]int{2}, []string{"dp"}),
		shard.NewMesh([]int{2, 4}, []string{"dp", "tp"}),
	}
	for _, mesh := range meshes {
		for _, o := range laterOptimizers() {
			if o.name == "adamw" || o.name == "nadam" { // Adam's path (TestFoldedUpdate runs them)
				continue
			}
			for _, clip := range []float64{0, 0.5} {
				t.Run(fmt.Sprintf("%v/%s/clip=%v", mesh.Shape(), o.name, clip), func(t *testing.T) {
					run := func(after bool) ([]float64, []*tensor.Tensor, int64) {
						if after {
							defer parallel.UpdateAfterReductions()()
							defer parallel.FreshState()()
						}
						tr, err := parallel.New(mlp, parallel.Config[nn.MLP, batch]{Loss: mlpLoss, Mesh: mesh, Optimizer: o.opt, ClipGlobalNorm: clip})
						require.NoError(t, err)
						n0, f0 := parallel.LaterReductions(), parallel.LaterUpdates()
						l := stepAll(t, tr, batches)
						require.Equal(t, f0, parallel.LaterUpdates(), "no gradient folded")
						return l, append(pytree.Leaves(tr.Params()), floatState(tr.State())...), parallel.LaterReductions() - n0
					}
					wl, wp, wn := run(true)
					l, p, n := run(false)
					require.Zero(t, wn, "taken as they arrived with UpdateAfterReductions")
					if mesh.Size() > 1 && o.later && clip == 0 {
						require.Equal(t, int64(4*len(batches)*mesh.Size()), n, "reductions taken as they arrived")
					} else {
						require.Zero(t, n, "reductions taken as they arrived")
					}
					requireSameTraining(t, wl, wp, l, p)
				})
			}
		}
	}
}

// TestLaterReductionsEP: under expert parallelism on dp×ep meshes the
// experts' state is split over both axes, so each device's lies on it
// alone: the update writes it over the old state and takes the
// reductions as they arrive, to the bits of the update that waits for
// them all and writes fresh state.
func TestLaterReductionsEP(t *testing.T) {
	model, b := newMoENet(), moeBatch()
	for _, c := range []struct{ dp, ep int }{{2, 4}, {4, 2}} {
		t.Run(fmt.Sprintf("%dx%d", c.dp, c.ep), func(t *testing.T) {
			mesh := shard.NewMesh([]int{c.dp, c.ep}, []string{"dp", "ep"})
			cfg := expert.Config{Experts: shard.Axes{"ep"}, Tokens: shard.Axes{"dp", "ep"}}
			run := func(after bool) ([]float64, []*tensor.Tensor, int64) {
				if after {
					defer parallel.UpdateAfterReductions()()
					defer parallel.FreshState()()
				}
				tr, err := parallel.New(model, parallel.Config[moeNet, batch]{
					DeviceLoss: func(ctx *shard.Ctx, m moeNet, b batch, _ tensor.Key) *tensor.Tensor {
						return m.loss(b, func(l nn.MoE, h *tensor.Tensor) nn.MoEOutput { return expert.Forward(ctx, l, h, cfg) })
					},
					Optimizer: optim.Adam(optim.Constant(1e-2)), Mesh: mesh, Strategy: parallel.EP,
				})
				require.NoError(t, err)
				n0 := parallel.LaterReductions()
				l := stepAll(t, tr, []batch{b, b, b})
				return l, append(pytree.Leaves(tr.Params()), floatState(tr.State())...), parallel.LaterReductions() - n0
			}
			wl, wp, wn := run(true)
			l, p, n := run(false)
			require.Zero(t, wn)
			// The experts' two matrices and the router, In's and Out's
			// weights: 5 split leaves on every device each step.
			require.Equal(t, int64(5*3*mesh.Size()), n, "reductions taken as they arrived")
			requireSameTraining(t, wl, wp, l, p)
		})
	}
}
