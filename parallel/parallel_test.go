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

// guideModel builds the JAX sharding guide's model and batch exactly as
// its Python does, with gonox's JAX-compatible random numbers:
//
//	key_model, key_batch = jax.random.split(jax.random.key(0))
//	keys = jax.random.split(key_model, num_layers)
//	w = jax.random.normal(k1, (n_in, n_out)) / jnp.sqrt(n_in)
//	b = jax.random.normal(k2, (n_out,))
//
// with relu after every layer, the last one included.
func guideModel(sizes []int, batch int, seed uint64) (nn.MLP, *tensor.Tensor, *tensor.Tensor) {
	keys := tensor.NewKey(seed).Split(2)
	keyModel, keyBatch := keys[0], keys[1]
	m := nn.MLP{Activation: nn.Relu, FinalActivation: nn.Relu}
	for i, k := range keyModel.Split(len(sizes) - 1) {
		k1, k2 := k.Split2()
		nIn, nOut := sizes[i], sizes[i+1]
		w := tensor.MulScalar(tensor.Normal(k1, nIn, nOut), float32(1/math.Sqrt(float64(nIn))))
		m.Layers = append(m.Layers, nn.Linear{W: w, B: tensor.Normal(k2, nOut)})
	}
	k1, k2 := keyBatch.Split2()
	return m, tensor.Normal(k1, batch, sizes[0]), tensor.Normal(k2, batch, sizes[len(sizes)-1])
}

var guideSizes = []int{32, 128, 256, 128, 4}

func TestGuideBaselineLoss(t *testing.T) {
	m, x, y := guideModel(guideSizes, 16, 0)
	tr := parallel.New(m, parallel.Config{Strategy: parallel.Single, Optimizer: optim.SGD(optim.Constant(0))})
	loss, _ := tr.LossAndGrad(x, y)
	// The guide prints "Baseline Loss: 4.0431547".
	assert.InDelta(t, 4.0431547, loss, 2e-6)
}

func meshes() map[string]*shard.Mesh {
	out := map[string]*shard.Mesh{}
	for _, s := range [][2]int{{1, 8}, {2, 4}, {4, 2}, {8, 1}} {
		out[fmt.Sprintf("%dx%d", s[0], s[1])] = shard.NewMesh([]int{s[0], s[1]}, []string{"dp", "tp"})
	}
	// No data axis: TP and FSDPTP keep the whole batch on every device.
	out["tp=8"] = shard.NewMesh([]int{8}, []string{"tp"})
	return out
}

// maxRelDiff is the largest |a-b| over all leaves, relative to the largest
// |a| of that leaf.
func maxRelDiff(t *testing.T, a, b nn.MLP) float64 {
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

func TestStrategiesEqualSingleDevice(t *testing.T) {
	for _, tc := range []struct {
		name  string
		sizes []int
		batch int
		loss  parallel.Loss
		act   nn.Activation
	}{
		{"guide model", guideSizes, 16, parallel.MSE, nn.Relu},
		// A smooth activation: relu's gradient jumps at 0, so a unit whose
		// pre-activation is within rounding of 0 can flip between two
		// summation orders that are equally right (the sharded ones split
		// the contraction differently), and a large relu network has such
		// units. The guide's model has none.
		{"larger model", []int{64, 256, 512, 256, 8}, 64, parallel.MSE, nn.Gelu},
	} {
		m, x, y := guideModel(tc.sizes, tc.batch, 1)
		m.Activation, m.FinalActivation = tc.act, tc.act
		base := parallel.New(m, parallel.Config{Strategy: parallel.Single, Optimizer: optim.SGD(optim.Constant(0))})
		baseLoss, baseGrad := base.LossAndGrad(x, y)
		for meshName, mesh := range meshes() {
			for _, s := range []parallel.Strategy{parallel.DP, parallel.FSDP, parallel.TP, parallel.FSDPTP} {
				t.Run(fmt.Sprintf("%s/%s/%v", tc.name, meshName, s), func(t *testing.T) {
					tr := parallel.New(m, parallel.Config{Strategy: s, Mesh: mesh, Optimizer: optim.SGD(optim.Constant(0))})
					loss, grad := tr.LossAndGrad(x, y)
					assert.InEpsilon(t, baseLoss, loss, 1e-5)
					assert.Less(t, maxRelDiff(t, baseGrad, grad), 1e-5)
				})
			}
		}
	}
}

// leafBytes returns the bytes of W and B leaves of an MLP.
func leafBytes(m nn.MLP) (w, b int64) {
	for _, l := range m.Layers {
		w += int64(l.W.Bytes())
		if l.B != nil {
			b += int64(l.B.Bytes())
		}
	}
	return w, b
}

func TestFSDPMemoryAndCommunication(t *testing.T) {
	m, x, y := guideModel(guideSizes, 16, 2)
	mesh := shard.NewMesh([]int{8}, []string{"dp"})
	const n = 8
	dp := parallel.New(m, parallel.Config{Strategy: parallel.DP, Mesh: mesh, Optimizer: optim.Adam(optim.Constant(1e-3))})
	fsdp := parallel.New(m, parallel.Config{Strategy: parallel.FSDP, Mesh: mesh, Optimizer: optim.Adam(optim.Constant(1e-3))})
	dp.Step(x, y)
	fsdp.Step(x, y)
	dps, fs := dp.Stats(x, y), fsdp.Stats(x, y)

	wBytes, bBytes := leafBytes(m)
	// The "mlp"-named biases (layers 0 and 2) are sharded like the
	// weights; the others ("embed", "classes") are replicated.
	shardedB := int64(m.Layers[0].B.Bytes() + m.Layers[2].B.Bytes())
	replB := bBytes - shardedB
	assert.Equal(t, wBytes+bBytes, dps.ParamBytes, "DP holds a full replica")
	assert.Equal(t, (wBytes+shardedB)/n+replB, fs.ParamBytes, "FSDP holds 1/n of what it shards")
	// Adam keeps two moments per parameter (and a step count).
	assert.Equal(t, 2*fs.ParamBytes+4, fs.StateBytes)
	assert.Equal(t, 2*dps.ParamBytes+4, dps.StateBytes)

	// Residuals: DP keeps the full weights for backward (as the outputs of
	// the implicit broadcasts of the replicated weights, "pvary"); FSDP
	// keeps only its shards (checkpoint inputs) and re-gathers, so no
	// all-gathered weight is kept.
	assert.Equal(t, wBytes, int64(dps.Residuals.ByLabel["pvary"].Bytes))
	assert.Zero(t, fs.Residuals.ByLabel["all_gather"].Count)
	assert.Zero(t, fs.Residuals.ByLabel["pvary"].Count)
	assert.Less(t, int64(fs.Residuals.Bytes), wBytes/n+8<<10)
	keep := parallel.New(m, parallel.Config{Strategy: parallel.FSDP, Mesh: mesh, Optimizer: optim.Adam(optim.Constant(1e-3)),
		Remat: func(tensor.NodeInfo) bool { return true }})
	assert.Equal(t, len(m.Layers), keep.Stats(x, y).Residuals.ByLabel["all_gather"].Count,
		"without the remat policy the gathered weights would be kept")

	// Communication per step, per device, as the textbook has it. DP: one
	// all-reduce of the gradients (2(n-1)/n of their bytes) plus the loss.
	lossBytes := int64(2 * (n - 1) * 4 / n)
	assert.Equal(t, map[string]int64{"psum": 2*(n-1)*(wBytes+bBytes)/n + lossBytes}, dps.CommBytes)
	// FSDP: all-gather of every sharded leaf in forward and of the weights
	// again in backward (the bias add's VJP needs no bias, so remat does
	// not re-gather biases), a reduce-scatter of their gradients, and an
	// all-reduce of the replicated biases' gradients.
	sharded := wBytes + shardedB
	assert.Equal(t, 2*(n-1)*wBytes/n+(n-1)*shardedB/n, fs.CommBytes["all_gather"])
	assert.Equal(t, (n-1)*sharded/n, fs.CommBytes["psum_scatter"])
	assert.Equal(t, 2*(n-1)*replB/n+lossBytes, fs.CommBytes["psum"])
}

func TestTrainingRunsAgree(t *testing.T) {
	if testing.Short() {
		t.Skip("trains five models")
	}
	// A regression task: every strategy, trained for 30 steps with Adam
	// from the same weights on the same batches, ends at the same loss.
	m, _, _ := guideModel(guideSizes, 16, 3)
	keys := tensor.NewKey(9).Split(30)
	mesh := shard.NewMesh([]int{4, 2}, []string{"dp", "tp"})
	final := map[parallel.Strategy]float64{}
	for _, s := range parallel.Strategies() {
		var msh *shard.Mesh
		if s != parallel.Single {
			msh = mesh
		}
		tr := parallel.New(m, parallel.Config{Strategy: s, Mesh: msh, Optimizer: optim.Adam(optim.Constant(3e-3))})
		// A fixed pool of 4 batches, visited in turn, so the loss falls (the
		// guide model ends in a relu, which bounds how far).
		var loss, first float64
		for i := range keys {
			k1, k2 := keys[i%4].Split2()
			x, y := tensor.Normal(k1, 16, 32), tensor.Normal(k2, 16, 4)
			loss = tr.Step(x, y)
			if i == 0 {
				first = loss
			}
		}
		assert.Less(t, loss, 0.8*first, "%v", s)
		final[s] = loss
	}
	for s, l := range final {
		assert.InEpsilon(t, final[parallel.Single], l, 1e-3, "%v", s)
	}
}
