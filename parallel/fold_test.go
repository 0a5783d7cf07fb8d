package parallel_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/nn"
	"github.com/gonox/gonox/optim"
	"github.com/gonox/gonox/parallel"
	"github.com/gonox/gonox/shard"
	"github.com/gonox/gonox/tensor"
)

// tiedMLP uses its first weight twice: in its product and in a penalty
// on the weight itself, so that the weight's gradient is a folded
// product's plus the rest the backward pass returns.
type tiedMLP struct{ M nn.MLP }

func tiedLoss(m tiedMLP, b batch) *tensor.Tensor {
	w := m.M.Layers[0].W
	return tensor.Add(mlpLoss(m.M, b), tensor.MulScalar(tensor.Sum(tensor.Mul(w, w)), 1e-2))
}

// TestFoldedGradients: the DP step whose weight gradients are
// reduce-scattered inside their products (the default) trains to the
// losses and parameters of the unfolded step (Config.UnfoldedGradients)
// within float rounding, on 1, 2, 4 and 8 devices and over two data axes,
// for an MLP (dense and act_product layers; with 8 and 64 rows a device,
// gathered and not: shard.Ctx.PsumScatterProductStart), a transformer
// block (weights
// of flattened 3-D inputs, a product whose cotangent the residual stream
// shares) and a weight used outside its product too; Comm counts the
// folded reduce-scatters' bytes as "psum_scatter_product", the bytes the
// unfolded ones send (but for the tied weight, whose rest is
// reduce-scattered too). SGD keeps the update linear in the gradient, so a difference
// in the gradients shows as it is (Adam's first steps would turn a
// rounding of a near-zero gradient into a step of the other sign).
func TestFoldedGradients(t *testing.T) {
	defer parallel.FoldSmall()()
	mlp, _ := guideModel(guideSizes, 16, 3)
	mlp.Activation, mlp.FinalActivation = nn.Gelu, nil
	var mlpBatches, wideBatches, blockBatches []batch
	for i, k := range tensor.NewKey(7).Split(3) {
		_, b := guideModel(guideSizes, 16, uint64(40+i))
		mlpBatches = append(mlpBatches, b)
		_, b = guideModel(guideSizes, 128, uint64(50+i)) // 64 rows a device on 2: not gathered
		wideBatches = append(wideBatches, b)
		k1, k2 := k.Split2()
		blockBatches = append(blockBatches, batch{tensor.Normal(k1, 16, 6, 32), tensor.Normal(k2, 16, 4)})
	}
	blk := newBlock(tensor.NewKey(3), 32, 4, 4)
	opt := optim.SGD(optim.Constant(0.05))
	run := func(t *testing.T, model string, mesh *shard.Mesh, unfolded bool) ([]float64, any, map[string]int64) {
		switch model {
		case "mlp", "mlp batch 128":
			bs := mlpBatches
			if model != "mlp" {
				bs = wideBatches
			}
			tr, err := parallel.New(mlp, parallel.Config[nn.MLP, batch]{Loss: mlpLoss, Mesh: mesh, Optimizer: opt, UnfoldedGradients: unfolded})
			require.NoError(t, err)
			l := stepAll(t, tr, bs)
			st, err := tr.Stats(bs[0])
			require.NoError(t, err)
			return l, tr.Params(), st.CommBytes
		case "tied":
			tr, err := parallel.New(tiedMLP{mlp}, parallel.Config[tiedMLP, batch]{Loss: tiedLoss, Mesh: mesh, Optimizer: opt, UnfoldedGradients: unfolded})
			require.NoError(t, err)
			l := stepAll(t, tr, mlpBatches)
			st, err := tr.Stats(mlpBatches[0])
			require.NoError(t, err)
			return l, tr.Params(), st.CommBytes
		}
		tr, err := parallel.New(blk, parallel.Config[block, batch]{Loss: blockLoss, Mesh: mesh, Optimizer: opt, UnfoldedGradients: unfolded})
		require.NoError(t, err)
		l := stepAll(t, tr, blockBatches)
		st, err := tr.Stats(blockBatches[0])
		require.NoError(t, err)
		return l, tr.Params(), st.CommBytes
	}
	for _, model := range []string{"mlp", "mlp batch 128", "tied", "block"} {
		for _, mesh := range zeroMeshes() {
			if model == "mlp batch 128" && mesh.Size() > 2 {
				continue
			}
			t.Run(fmt.Sprintf("%s/%v", model, mesh.Shape()), func(t *testing.T) {
				wantLoss, want, wantBytes := run(t, model, mesh, true)
				gotLoss, got, gotBytes := run(t, model, mesh, false)
				assert.InEpsilonSlice(t, wantLoss, gotLoss, 1e-5)
				assert.Less(t, maxRelDiff(t, want, got), 1e-5)
				if mesh.Size() > 1 {
					assert.Positive(t, gotBytes["psum_scatter_product"], "folded")
				}
				if model != "tied" { // the tied weight's rest is reduce-scattered too
					assert.Equal(t, wantBytes["psum_scatter"], gotBytes["psum_scatter"]+gotBytes["psum_scatter_product"])
				}
			})
		}
	}
}
