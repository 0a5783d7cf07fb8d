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
	"github.com/gonox/gonox/tensor"
)

// batch is inputs and targets.
type batch struct{ X, Y *tensor.Tensor }

// mse is the mean over examples of the squared error summed over the last
// axis (the loss of the JAX sharding guide's examples).
func mse(pred, y *tensor.Tensor) *tensor.Tensor {
	return tensor.Mean(tensor.Sum(tensor.Square(tensor.Sub(pred, y)), -1))
}

func mlpLoss(m nn.MLP, b batch) *tensor.Tensor { return mse(m.Forward(b.X), b.Y) }

// guideModel builds the JAX sharding guide's model and batch exactly as
// its Python does, with gonox's JAX-compatible random numbers:
//
//	key_model, key_batch = jax.random.split(jax.random.key(0))
//	keys = jax.random.split(key_model, num_layers)
//	w = jax.random.normal(k1, (n_in, n_out)) / jnp.sqrt(n_in)
//	b = jax.random.normal(k2, (n_out,))
//
// with relu after every layer, the last one included. The layers carry
// the Megatron logical axes (which do not change any number).
func guideModel(sizes []int, n int, seed uint64) (nn.MLP, batch) {
	keys := tensor.NewKey(seed).Split(2)
	keyModel, keyBatch := keys[0], keys[1]
	m := nn.MLP{Activation: nn.Relu, FinalActivation: nn.Relu}
	axes := nn.MegatronAxes(len(sizes) - 1)
	for i, k := range keyModel.Split(len(sizes) - 1) {
		k1, k2 := k.Split2()
		nIn, nOut := sizes[i], sizes[i+1]
		w := tensor.MulScalar(tensor.Normal(k1, nIn, nOut), float32(1/math.Sqrt(float64(nIn))))
		m.Layers = append(m.Layers, nn.Linear{
			W: tensor.WithLogicalAxes(w, axes[i][0], axes[i][1]),
			B: tensor.WithLogicalAxes(tensor.Normal(k2, nOut), axes[i][1]),
		})
	}
	k1, k2 := keyBatch.Split2()
	return m, batch{tensor.Normal(k1, n, sizes[0]), tensor.Normal(k2, n, sizes[len(sizes)-1])}
}

var guideSizes = []int{32, 128, 256, 128, 4}

func TestGuideBaselineLoss(t *testing.T) {
	m, b := guideModel(guideSizes, 16, 0)
	tr, err := parallel.New(m, parallel.Config[nn.MLP, batch]{Loss: mlpLoss, Optimizer: optim.SGD(optim.Constant(0))})
	require.NoError(t, err)
	loss, _, err := tr.LossAndGrad(b)
	require.NoError(t, err)
	// The guide prints "Baseline Loss: 4.0431547"; float32 gives one ulp less.
	assert.InDelta(t, 4.0431547, loss, 2e-6)
}

// block is a pre-norm transformer block of the user's own with a linear
// read-out: attention, LayerNorm, an MLP and residual connections, its
// layers named for tensor parallelism.
type block struct {
	Norm1, Norm2 nn.LayerNorm
	Attn         nn.MultiHeadAttention
	MLP          nn.MLP
	Head         nn.Linear
}

func newBlock(key tensor.Key, dim, heads, out int) block {
	k := key.Split(3)
	return block{
		Norm1: nn.NewLayerNorm(dim, nn.LayerNormOptions{Axis: nn.AxisEmbed}),
		Norm2: nn.NewLayerNorm(dim, nn.LayerNormOptions{Axis: nn.AxisEmbed}),
		Attn:  nn.NewMultiHeadAttention(k[0], dim, heads, nn.AttentionOptions{Causal: true, Axes: nn.DefaultAttentionAxes()}),
		MLP:   nn.NewMLP(k[1], []int{dim, 4 * dim, dim}, nn.MLPOptions{Activation: nn.Gelu, Axes: nn.MegatronAxes(2)}),
		Head:  nn.NewLinear(k[2], dim, out, nn.LinearOptions{Axes: [2]string{nn.AxisEmbed, ""}}),
	}
}

func (b block) Forward(x *tensor.Tensor) *tensor.Tensor {
	x = tensor.Add(x, b.Attn.Forward(b.Norm1.Forward(x)))
	x = tensor.Add(x, b.MLP.Forward(b.Norm2.Forward(x)))
	return b.Head.Forward(tensor.Mean(x, 1)) // [batch, out]
}

func blockLoss(m block, b batch) *tensor.Tensor { return mse(m.Forward(b.X), b.Y) }

func meshes() map[string]*shard.Mesh {
	out := map[string]*shard.Mesh{}
	for _, s := range [][2]int{{1, 8}, {2, 4}, {4, 2}} {
		out[fmt.Sprintf("%dx%d", s[0], s[1])] = shard.NewMesh([]int{s[0], s[1]}, []string{"dp", "tp"})
	}
	return out
}

// userRules is a strategy of the user's own: FSDP-like placement of the
// hidden dimension over both axes, batches over dp.
var userRules = parallel.Rules(shard.Rules{
	{Logical: nn.AxisBatch, Mesh: shard.Axes{"dp"}},
	{Logical: nn.AxisMLP, Mesh: shard.Axes{"dp", "tp"}},
	{Logical: nn.AxisHeads, Mesh: shard.Axes{"tp"}},
	{Logical: nn.AxisEmbed, Mesh: nil},
})

func shipped() []parallel.Strategy {
	return []parallel.Strategy{parallel.DP, parallel.FSDP, parallel.TP, parallel.FSDPTP, userRules}
}

// maxRelDiff is the largest |a-b| over all leaves, relative to the largest
// |a| of that leaf.
func maxRelDiff(t *testing.T, a, b any) float64 {
	t.Helper()
	worst := 0.0
	la, lb := pytree.Leaves(a), pytree.Leaves(b)
	require.Len(t, lb, len(la))
	for i := range la {
		x, y := la[i].Float64s(), lb[i].Float64s()
		scale := 0.0
		for _, v := range x {
			scale = math.Max(scale, math.Abs(v))
		}
		for j := range x {
			worst = math.Max(worst, math.Abs(x[j]-y[j])/math.Max(scale, 1e-12))
		}
	}
	return worst
}

// trainSteps trains with Adam for len(batches) steps and returns the
// losses and the final host parameters.
func trainSteps[M any](t *testing.T, m M, loss func(M, batch) *tensor.Tensor, s parallel.Strategy, mesh *shard.Mesh, batches []batch, micro int) ([]float64, M) {
	t.Helper()
	tr, err := parallel.New(m, parallel.Config[M, batch]{
		Loss: loss, Strategy: s, Mesh: mesh, MicroBatches: micro,
		Optimizer: optim.Adam(optim.Constant(1e-3)),
	})
	require.NoError(t, err)
	var losses []float64
	for _, b := range batches {
		l, err := tr.Step(b)
		require.NoError(t, err)
		losses = append(losses, l)
	}
	return losses, tr.Params()
}

func TestStrategiesEqualSingleDevice(t *testing.T) {
	// MLP: the guide's layer sizes with a smooth activation (relu's
	// gradient jumps at 0, and a unit within rounding of 0 may flip between
	// two equally right summation orders).
	mlp, _ := guideModel(guideSizes, 16, 1)
	mlp.Activation, mlp.FinalActivation = nn.Gelu, nil
	var mlpBatches, blockBatches []batch
	for i, k := range tensor.NewKey(7).Split(3) {
		_, b := guideModel(guideSizes, 16, uint64(10+i))
		mlpBatches = append(mlpBatches, b)
		k1, k2 := k.Split2()
		blockBatches = append(blockBatches, batch{tensor.Normal(k1, 16, 6, 32), tensor.Normal(k2, 16, 4)})
	}
	blk := newBlock(tensor.NewKey(3), 32, 4, 4)

	type run struct {
		losses []float64
		params any
	}
	type model struct {
		name string
		run  func(t *testing.T, s parallel.Strategy, mesh *shard.Mesh) run
	}
	for _, md := range []model{
		{"mlp", func(t *testing.T, s parallel.Strategy, mesh *shard.Mesh) run {
			l, p := trainSteps(t, mlp, mlpLoss, s, mesh, mlpBatches, 1)
			return run{l, p}
		}},
		{"transformer block", func(t *testing.T, s parallel.Strategy, mesh *shard.Mesh) run {
			l, p := trainSteps(t, blk, blockLoss, s, mesh, blockBatches, 1)
			return run{l, p}
		}},
	} {
		base := md.run(t, parallel.Single, nil)
		for meshName, mesh := range meshes() {
			for _, s := range shipped() {
				t.Run(fmt.Sprintf("%s/%s/%v", md.name, meshName, s), func(t *testing.T) {
					got := md.run(t, s, mesh)
					for i := range base.losses {
						assert.InEpsilon(t, base.losses[i], got.losses[i], 1e-5, "step %d", i)
					}
					assert.Less(t, maxRelDiff(t, base.params, got.params), 1e-5)
				})
			}
		}
	}
}
