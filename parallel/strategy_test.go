package parallel_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/nn"
	"github.com/gonox/gonox/optim"
	"github.com/gonox/gonox/parallel"
	"github.com/gonox/gonox/pytree"
	"github.com/gonox/gonox/shard"
	"github.com/gonox/gonox/tensor"
)

// columnSplit is a strategy of a test's own, in the shape an expert-parallel
// strategy would take: every weight is split by columns over "dp" and stays
// split while the loss runs (Compute), so the device loss sees blocks and
// gathers what it needs itself.
type columnSplit struct{}

func (columnSplit) String() string { return "columns" }

func (columnSplit) Place(mesh *shard.Mesh, _ any) (parallel.Placement, error) {
	cols := shard.SpecFunc(func(_ pytree.Path, x *tensor.Tensor) shard.Spec {
		if x.Rank() == 2 {
			return shard.P(nil, "dp")
		}
		return shard.P()
	})
	return parallel.Placement{Params: cols, Compute: cols, DataAxes: []string{"dp"}, MapStep: true}, nil
}

func TestDeviceLossWithBlocks(t *testing.T) {
	m, b := guideModel([]int{16, 32, 8}, 16, 6)
	m.Activation, m.FinalActivation = nn.Gelu, nil
	base, err := parallel.New(m, parallel.Config[nn.MLP, batch]{Loss: mlpLoss, Optimizer: optim.Adam(optim.Constant(1e-2))})
	require.NoError(t, err)
	tr, err := parallel.New(m, parallel.Config[nn.MLP, batch]{
		DeviceLoss: func(c *shard.Ctx, m nn.MLP, b batch, _ tensor.Key) *tensor.Tensor {
			// The weights arrive as column blocks: gather them here.
			for i := range m.Layers {
				assert.Equal(t, m.Layers[i].B.Dim(0)/4, m.Layers[i].W.Dim(1), "a block of the columns")
				m.Layers[i].W = c.AllGather(m.Layers[i].W, shard.Axes{"dp"}, 1, true)
			}
			return mlpLoss(m, b)
		},
		Optimizer: optim.Adam(optim.Constant(1e-2)),
		Mesh:      shard.NewMesh([]int{4}, []string{"dp"}),
		Strategy:  columnSplit{},
	})
	require.NoError(t, err)
	for range 3 {
		want, err := base.Step(b)
		require.NoError(t, err)
		got, err := tr.Step(b)
		require.NoError(t, err)
		assert.InEpsilon(t, want, got, 1e-5)
	}
	assert.Less(t, maxRelDiff(t, base.Params(), tr.Params()), 1e-5)
	assert.Equal(t, "f32[16,32@dp]", tr.PlacedParams().Layers[0].W.String())
}
