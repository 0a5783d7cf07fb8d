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
	requireLaterPath(t, laterPath{
		seed: 90,
		meshes: []*shard.Mesh{
			shard.NewMesh([]int{1}, []string{"dp"}),
			shard.NewMesh([]int{2}, []string{"dp"}),
			shard.NewMesh([]int{2, 4}, []string{"dp", "tp"}),
		},
		// AdamW and NAdam take Adam's path (TestFoldedUpdate runs them).
		skip: func(name string) bool { return name == "adamw" || name == "nadam" },
		off: func() func() {
			restore, fresh := parallel.UpdateAfterReductions(), parallel.FreshState()
			return func() { fresh(); restore() }
		},
		count: parallel.LaterReductions,
		still: parallel.LaterUpdates, // no gradient folded
		what:  "reductions taken as they arrived",
	})
}

// TestLaterReductionsEP: under expert parallelism on dp×ep meshes the
// experts' state is split over both axes, so each device's lies on it
// alone: the update writes it over the old state and takes the
// reductions as they arrive, to the bits of the update that waits for
// them all and writes fresh state.
func TestLaterReductionsEP(t *testing.T) {
	for _, c := range []struct{ dp, ep int }{{2, 4}, {4, 2}} {
		t.Run(fmt.Sprintf("%dx%d", c.dp, c.ep), func(t *testing.T) {
			mesh := shard.NewMesh([]int{c.dp, c.ep}, []string{"dp", "ep"})
			n := trainEPBothWays(t, mesh, optim.Adam(optim.Constant(1e-2)), func() func() {
				restore, fresh := parallel.UpdateAfterReductions(), parallel.FreshState()
				return func() { fresh(); restore() }
			}, parallel.LaterReductions)
			// The experts' two matrices and the router, In's and Out's
			// weights: 5 split leaves on every device each step.
			require.Equal(t, int64(5*3*mesh.Size()), n, "reductions taken as they arrived")
		})
	}
}

// trainEPBothWays trains newMoENet under expert parallelism on mesh (the
// experts over ep, the tokens over dp and ep) with opt for 3 steps of
// moeBatch, once with the path off switches to (off returns its restore)
// and once without. It requires both to train to the same bits and count
// not to move under off, and returns how far count moved without it.
func trainEPBothWays(t *testing.T, mesh *shard.Mesh, opt optim.Transform, off func() func(), count func() int64) int64 {
	t.Helper()
	model, b := newMoENet(), moeBatch()
	cfg := expert.Config{Experts: shard.Axes{"ep"}, Tokens: shard.Axes{"dp", "ep"}}
	run := func(switched bool) ([]float64, []*tensor.Tensor, int64) {
		if switched {
			defer off()()
		}
		tr, err := parallel.New(model, parallel.Config[moeNet, batch]{
			DeviceLoss: func(ctx *shard.Ctx, m moeNet, b batch, _ tensor.Key) *tensor.Tensor {
				return m.loss(b, func(l nn.MoE, h *tensor.Tensor) nn.MoEOutput { return expert.Forward(ctx, l, h, cfg) })
			},
			Optimizer: opt, Mesh: mesh, Strategy: parallel.EP,
		})
		require.NoError(t, err)
		n0 := count()
		l := stepAll(t, tr, []batch{b, b, b})
		return l, append(pytree.Leaves(tr.Params()), floatState(tr.State())...), count() - n0
	}
	wl, wp, wn := run(true)
	l, p, n := run(false)
	require.Zero(t, wn)
	requireSameTraining(t, wl, wp, l, p)
	return n
}
