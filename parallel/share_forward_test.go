package parallel_test

import (
	"fmt"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/nn"
	"github.com/gonox/gonox/optim"
	"github.com/gonox/gonox/parallel"
	"github.com/gonox/gonox/pytree"
	"github.com/gonox/gonox/shard"
)

// TestSharedForwardProducts: the DP step whose devices compute the
// folded weights' forward products together
// (shard.FoldedGradient.ShareForward, the default where a device has
// fewer than 64 rows) trains Adam to the losses and parameters of the
// step whose devices compute them alone (UnsharedForward) bit for bit, on
// 2, 4 and 8 devices and over two data axes, with the relu and gelu
// MLPs (dense and act_product layers); Comm counts the shared products
// where a weight has 32 columns a device or more (the 128×256 weight on
// 8 devices, every weight on 2), and none without. 1 device folds
// nothing.
func TestSharedForwardProducts(t *testing.T) {
	defer parallel.FoldSmall()()
	relu, _ := guideModel(guideSizes, 16, 3)
	gelu := relu
	gelu.Activation, gelu.FinalActivation = nn.Gelu, nil
	var batches []batch
	for i := range 3 {
		_, b := guideModel(guideSizes, 16, uint64(40+i))
		batches = append(batches, b)
	}
	run := func(t *testing.T, m nn.MLP, mesh *shard.Mesh, unshared bool) ([]float64, nn.MLP, int) {
		if unshared {
			defer parallel.UnsharedForward()()
		}
		tr, err := parallel.New(m, parallel.Config[nn.MLP, batch]{Loss: mlpLoss, Mesh: mesh, Optimizer: optim.Adam(optim.Constant(1e-2))})
		require.NoError(t, err)
		l := stepAll(t, tr, batches)
		return l, tr.Params(), tr.Comm().Calls("shared_product") // the last step's
	}
	for _, mesh := range []*shard.Mesh{
		shard.NewMesh([]int{1}, []string{"dp"}), shard.NewMesh([]int{2}, []string{"dp"}), shard.NewMesh([]int{4}, []string{"dp"}),
		shard.NewMesh([]int{8}, []string{"dp"}), shard.NewMesh([]int{4, 2}, []string{"dp", "tp"}),
	} {
		for name, m := range map[string]nn.MLP{"relu": relu, "gelu": gelu} {
			t.Run(fmt.Sprintf("%s/%v", name, mesh.Shape()), func(t *testing.T) {
				wantLoss, want, none := run(t, m, mesh, true)
				gotLoss, got, shared := run(t, m, mesh, false)
				assert.Zero(t, none, "unshared")
				if mesh.Size() > 1 {
					assert.Positive(t, shared, "shared products")
				}
				require.Equal(t, len(wantLoss), len(gotLoss))
				for i := range wantLoss {
					require.Equal(t, math.Float64bits(wantLoss[i]), math.Float64bits(gotLoss[i]), "loss %d", i)
				}
				wl, gl := pytree.Leaves(want), pytree.Leaves(got)
				require.Equal(t, len(wl), len(gl))
				for j := range wl {
					w, g := shard.Gather(wl[j]).Float32s(), shard.Gather(gl[j]).Float32s()
					for i := range w {
						require.Equal(t, math.Float32bits(w[i]), math.Float32bits(g[i]), "leaf %d, element %d", j, i)
					}
				}
			})
		}
	}
}
