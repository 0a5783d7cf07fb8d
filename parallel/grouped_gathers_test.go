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

// TestGroupedGathers: the sharded update gathers the float32 blocks that
// lie contiguous in their parameters in one group per set of axes
// (shard.GatherTargets) and trains to the bits of the update that gathers
// each leaf on its own (parallel.GatherEachLeaf): losses, parameters and
// state after 3 steps, with Adam, SGD with momentum, Lion and a masked
// Adam (the host's update: nothing gathered), with the gradients folded
// or not, on 2, 8 and 2×4 devices, and with a 12×24 weight split along
// its columns (strided in the result: its own target) beside two split
// along their rows. It fails if the group does not gather the expected
// blocks.
func TestGroupedGathers(t *testing.T) {
	guide, _ := guideModel(guideSizes, 16, 3)
	odd, _ := guideModel([]int{12, 24, 40, 5}, 16, 7)
	matrices := func(_ pytree.Path, x *tensor.Tensor) bool { return x.Rank() >= 2 }
	opts := []struct {
		name    string
		opt     optim.Transform
		sharded bool
	}{
		{"adam", optim.Adam(optim.Constant(1e-3)), true},
		{"sgd", optim.SGD(optim.Constant(0.05), optim.SGDOptions{Momentum: 0.9}), true},
		{"lion", optim.Lion(optim.Constant(1e-3)), true},
		{"masked adam", optim.Masked(optim.Adam(optim.Constant(1e-3)), matrices), false},
	}
	for _, m := range []struct {
		name    string
		model   nn.MLP
		sizes   []int
		grouped map[int]int // blocks grouped a device a step, by mesh size
		fold    bool
	}{
		{"guide", guide, guideSizes, map[int]int{2: 4, 8: 4}, false},
		{"guide folded", guide, guideSizes, map[int]int{2: 4, 8: 4}, true},
		{"odd", odd, []int{12, 24, 40, 5}, map[int]int{2: 3, 8: 2}, false},
	} {
		var batches []batch
		for i := range 3 {
			_, b := guideModel(m.sizes, 16, 30+uint64(i))
			batches = append(batches, b)
		}
		for _, o := range opts {
			for _, shape := range [][]int{{2}, {8}, {2, 4}} {
				mesh := shard.NewMesh(shape, []string{"dp", "tp"}[:len(shape)])
				t.Run(fmt.Sprintf("%s/%v/%s", m.name, shape, o.name), func(t *testing.T) {
					if m.fold {
						defer parallel.FoldSmall()()
					}
					run := func(each bool) ([]float64, []*tensor.Tensor, int64) {
						if each {
							defer parallel.GatherEachLeaf()()
						}
						tr, err := parallel.New(m.model, parallel.Config[nn.MLP, batch]{Loss: mlpLoss, Mesh: mesh, Optimizer: o.opt})
						require.NoError(t, err)
						n0 := parallel.GatheredGrouped()
						l := stepAll(t, tr, batches)
						return l, append(pytree.Leaves(tr.Params()), floatState(tr.State())...), parallel.GatheredGrouped() - n0
					}
					wl, wp, wn := run(true)
					l, p, n := run(false)
					require.Zero(t, wn)
					want := 0
					if o.sharded {
						want = m.grouped[mesh.Size()] * len(batches) * mesh.Size()
					}
					require.Equal(t, int64(want), n, "blocks gathered in groups")
					requireSameTraining(t, wl, wp, l, p)
				})
			}
		}
	}
}

// TestGroupedGathersEP: under expert parallelism the experts' blocks and
// the replicated weights' are gathered in groups, to the bits of the
// update that gathers each leaf on its own.
func TestGroupedGathersEP(t *testing.T) {
	mesh := shard.NewMesh([]int{2, 4}, []string{"dp", "ep"})
	n := trainEPBothWays(t, mesh, optim.Adam(optim.Constant(1e-2)), parallel.GatherEachLeaf, parallel.GatheredGrouped)
	// The experts' two matrices, the router and Out's weight; In's 6×8
	// weight is split along its columns (strided: its own target).
	require.Equal(t, int64(4*3*mesh.Size()), n, "blocks gathered in groups")
}
