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
	// The guide prints "Baseline Loss: 4.0431547"; gonox's float32 gives one
	// ulp less on every kernel set, as docs/parallel.md states.
	assert.Equal(t, float32(4.0431542), float32(loss))
	assert.Equal(t, math.Nextafter32(4.0431542, 5), float32(4.0431547), "one ulp apart")
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

// stepAll runs one training step of tr on each batch and returns the
// losses.
func stepAll[M any](t *testing.T, tr *parallel.Trainer[M, batch], batches []batch) []float64 {
	t.Helper()
	losses := make([]float64, 0, len(batches))
	for _, b := range batches {
		l, err := tr.Step(b)
		require.NoError(t, err)
		losses = append(losses, l)
	}
	return losses
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
	losses := stepAll(t, tr, batches)
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

func TestConfigErrors(t *testing.T) {
	m, _ := guideModel(guideSizes, 16, 1)
	plain := nn.NewMLP(tensor.NewKey(1), []int{8, 16, 4}, nn.MLPOptions{}) // no logical axes
	typo := m
	typo.Layers = append([]nn.Linear(nil), m.Layers...)
	typo.Layers[1].W = tensor.WithLogicalAxes(m.Layers[1].W, "mpl", nn.AxisEmbed)
	adam := optim.Adam(optim.Constant(1e-3))
	dp8 := shard.NewMesh([]int{8}, []string{"dp"})
	dp4tp2 := shard.NewMesh([]int{4, 2}, []string{"dp", "tp"})
	for _, tc := range []struct {
		name  string
		model nn.MLP
		cfg   parallel.Config[nn.MLP, batch]
		want  string
	}{
		{"no loss", m, parallel.Config[nn.MLP, batch]{Optimizer: adam}, "set exactly one of Config.Loss"},
		{"two losses", m, parallel.Config[nn.MLP, batch]{Optimizer: adam, Loss: mlpLoss,
			LossWithKey: func(m nn.MLP, b batch, _ tensor.Key) *tensor.Tensor { return mlpLoss(m, b) }}, "set exactly one of Config.Loss"},
		{"no optimizer", m, parallel.Config[nn.MLP, batch]{Loss: mlpLoss}, "Config.Optimizer is nil"},
		{"zero-value model", nn.MLP{}, parallel.Config[nn.MLP, batch]{Loss: mlpLoss, Optimizer: adam},
			"parallel.New: the model nn.MLP has no float tensor to train (a zero value? build it with its constructor)"},
		{"zero-value model on a mesh", nn.MLP{}, parallel.Config[nn.MLP, batch]{Loss: mlpLoss, Optimizer: adam, Mesh: dp8},
			"parallel.New: the model nn.MLP has no float tensor to train"},
		{"negative micro-batches", m, parallel.Config[nn.MLP, batch]{Loss: mlpLoss, Optimizer: adam, MicroBatches: -2}, "MicroBatches is -2"},
		{"single with a mesh", m, parallel.Config[nn.MLP, batch]{Loss: mlpLoss, Optimizer: adam, Strategy: parallel.Single, Mesh: dp8},
			"strategy single trains on the host and takes no mesh"},
		{"dp without a mesh", m, parallel.Config[nn.MLP, batch]{Loss: mlpLoss, Optimizer: adam, Strategy: parallel.DP}, "strategy dp needs a mesh"},
		{"tp without tp axis", m, parallel.Config[nn.MLP, batch]{Loss: mlpLoss, Optimizer: adam, Strategy: parallel.TP, Mesh: dp8},
			`strategy tp needs a mesh axis "tp"; mesh is Mesh('dp': 8)`},
		{"fsdp_tp without tp axis", m, parallel.Config[nn.MLP, batch]{Loss: mlpLoss, Optimizer: adam, Strategy: parallel.FSDPTP, Mesh: dp8},
			`strategy fsdp_tp needs a mesh axis "tp"`},
		{"tp on a model without names", plain, parallel.Config[nn.MLP, batch]{Loss: mlpLoss, Optimizer: adam, Strategy: parallel.TP, Mesh: dp4tp2},
			"no parameter has a logical axis"},
		{"unknown logical axis", typo, parallel.Config[nn.MLP, batch]{Loss: mlpLoss, Optimizer: adam, Strategy: parallel.TP, Mesh: dp4tp2},
			`no rule for logical axes "mpl" (on Layers[1].W)`},
		{"rules naming a missing mesh axis", m, parallel.Config[nn.MLP, batch]{Loss: mlpLoss, Optimizer: adam, Mesh: dp8,
			Strategy: parallel.Rules(shard.Rules{{Logical: nn.AxisMLP, Mesh: shard.Axes{"tp"}}, {Logical: nn.AxisEmbed}})},
			`rule "mlp" names mesh axis "tp"`},
		{"batch size", m, parallel.Config[nn.MLP, batch]{Loss: mlpLoss, Optimizer: adam, Mesh: dp4tp2, Strategy: parallel.TP, BatchSize: 6},
			"batch size 6 does not split evenly over the 4 devices of data axes [dp] of Mesh('dp': 4, 'tp': 2) times 1 micro-batches"},
		{"batch size on the host", m, parallel.Config[nn.MLP, batch]{Loss: mlpLoss, Optimizer: adam, BatchSize: 6, MicroBatches: 4},
			"batch size 6 does not split evenly over 4 micro-batches"},
		{"indivisible dimension", m, parallel.Config[nn.MLP, batch]{Loss: mlpLoss, Optimizer: adam, Mesh: shard.NewMesh([]int{1, 3}, []string{"dp", "tp"}),
			Strategy: parallel.Rules(shard.Rules{{Logical: nn.AxisMLP, Mesh: shard.Axes{"tp"}}, {Logical: nn.AxisEmbed}})},
			"parameter Layers[0].W f32[32,128]: dimension 1 (128) does not split over the 3 devices of mesh axes [tp]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parallel.New(tc.model, tc.cfg)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

func TestBatchErrors(t *testing.T) {
	m, b := guideModel(guideSizes, 12, 1)
	tr, err := parallel.New(m, parallel.Config[nn.MLP, batch]{Loss: mlpLoss, Optimizer: optim.SGD(optim.Constant(0.1)),
		Strategy: parallel.FSDP, Mesh: shard.NewMesh([]int{8}, []string{"dp"})})
	require.NoError(t, err)
	before := tr.Params()
	_, err = tr.Step(b)
	require.EqualError(t, err, "parallel: batch leaf X f32[12,32]: 12 rows do not split evenly over the 8 devices of data axes [dp] times 1 micro-batches")
	assert.True(t, pytree.Equal(before, tr.Params(), 0, 0), "a rejected batch changes nothing")
	_, _, err = tr.LossAndGrad(b)
	require.Error(t, err)
	_, err = tr.Eval(b)
	require.Error(t, err)

	host, err := parallel.New(m, parallel.Config[nn.MLP, batch]{Loss: mlpLoss, Optimizer: optim.SGD(optim.Constant(0.1)), MicroBatches: 5})
	require.NoError(t, err)
	_, err = host.Step(b)
	require.EqualError(t, err, "parallel: batch leaf X f32[12,32]: 12 rows do not split evenly over 5 micro-batches")
}

// Gradient accumulation over micro-batches gives the gradient of the whole
// batch, on the host and on a mesh.
func TestMicroBatches(t *testing.T) {
	m, b := guideModel(guideSizes, 32, 4)
	m.Activation, m.FinalActivation = nn.Gelu, nil
	one, err := parallel.New(m, parallel.Config[nn.MLP, batch]{Loss: mlpLoss, Optimizer: optim.SGD(optim.Constant(0))})
	require.NoError(t, err)
	wantLoss, wantGrad, err := one.LossAndGrad(b)
	require.NoError(t, err)
	for _, tc := range []struct {
		s     parallel.Strategy
		mesh  *shard.Mesh
		micro int
	}{
		{parallel.Single, nil, 4},
		{parallel.DP, shard.NewMesh([]int{4}, []string{"dp"}), 2},
		{parallel.FSDP, shard.NewMesh([]int{2, 2}, []string{"dp", "tp"}), 4},
		{parallel.FSDPTP, shard.NewMesh([]int{2, 2}, []string{"dp", "tp"}), 2},
	} {
		t.Run(fmt.Sprintf("%v/%d", tc.s, tc.micro), func(t *testing.T) {
			tr, err := parallel.New(m, parallel.Config[nn.MLP, batch]{Loss: mlpLoss, Optimizer: optim.SGD(optim.Constant(0)),
				Strategy: tc.s, Mesh: tc.mesh, MicroBatches: tc.micro})
			require.NoError(t, err)
			l, g, err := tr.LossAndGrad(b)
			require.NoError(t, err)
			assert.InEpsilon(t, wantLoss, l, 1e-5)
			assert.Less(t, maxRelDiff(t, wantGrad, g), 1e-5)
		})
	}
}

// On the Map step (DP), micro-batches send what one batch sends: the
// gradients are summed over the devices once per step.
func TestMicroBatchesCommunicateOnce(t *testing.T) {
	m, b := guideModel(guideSizes, 32, 4)
	mesh := shard.NewMesh([]int{4}, []string{"dp"})
	sent := func(micro int) int64 {
		tr, err := parallel.New(m, parallel.Config[nn.MLP, batch]{Loss: mlpLoss, Optimizer: optim.SGD(optim.Constant(0.1)),
			Strategy: parallel.DP, Mesh: mesh, MicroBatches: micro})
		require.NoError(t, err)
		_, err = tr.Step(b)
		require.NoError(t, err)
		var n int64
		for _, k := range tr.Comm().Kinds() {
			n += tr.Comm().Bytes(mesh.Devices()[0], k)
		}
		return n
	}
	w, bias := leafBytes(m)
	one := sent(1)
	// guideSizes' leaves all have a dimension 4 divides: a reduce-scatter
	// of the gradients and an all-gather of the parameters, the bytes of
	// one all-reduce, plus the loss's all-reduce.
	assert.Equal(t, 2*3*(w+bias)/4+2*3*4/4, one, "one all-reduce of the gradients and the loss")
	// The loss is reduced per micro-batch (4 bytes each); the gradients once.
	assert.Equal(t, one+3*(2*3*4/4), sent(4))
}

// Eval is the loss without an update.
func TestEval(t *testing.T) {
	m, b := guideModel(guideSizes, 16, 0)
	tr, err := parallel.New(m, parallel.Config[nn.MLP, batch]{Loss: mlpLoss, Optimizer: optim.SGD(optim.Constant(0.1)),
		Strategy: parallel.FSDPTP, Mesh: shard.NewMesh([]int{4, 2}, []string{"dp", "tp"})})
	require.NoError(t, err)
	l, err := tr.Eval(b)
	require.NoError(t, err)
	assert.InDelta(t, 4.0431547, l, 2e-6)
	l2, err := tr.Eval(b)
	require.NoError(t, err)
	assert.Equal(t, l, l2, "Eval does not train")
}

// dropoutMLP applies dropout to the hidden activations.
type dropoutMLP struct {
	In, Out nn.Linear
	Drop    nn.Dropout
}

func (d dropoutMLP) loss(b batch, key tensor.Key) *tensor.Tensor {
	h := d.Drop.Forward(tensor.Gelu(d.In.Forward(b.X)), key)
	return mse(d.Out.Forward(h), b.Y)
}

// LossWithKey gives every step and device its own key: dropout masks
// differ between steps and the run is reproducible.
func TestLossWithKey(t *testing.T) {
	ks := tensor.NewKey(2).Split(2)
	model := dropoutMLP{
		In:   nn.NewLinear(ks[0], 32, 64, nn.LinearOptions{}),
		Out:  nn.NewLinear(ks[1], 64, 4, nn.LinearOptions{}),
		Drop: nn.NewDropout(0.5),
	}
	_, b := guideModel(guideSizes, 16, 3)
	run := func(mesh *shard.Mesh, s parallel.Strategy) []float64 {
		tr, err := parallel.New(model, parallel.Config[dropoutMLP, batch]{
			LossWithKey: func(m dropoutMLP, b batch, k tensor.Key) *tensor.Tensor { return m.loss(b, k) },
			Key:         tensor.NewKey(5), Strategy: s, Mesh: mesh, Optimizer: optim.SGD(optim.Constant(0)),
		})
		require.NoError(t, err)
		var out []float64
		for range 3 {
			l, err := tr.Step(b)
			require.NoError(t, err)
			out = append(out, l)
		}
		return out
	}
	mesh := shard.NewMesh([]int{4}, []string{"dp"})
	for _, r := range [][]float64{run(nil, parallel.Single), run(mesh, parallel.DP)} {
		// SGD with rate 0: only the masks change the loss.
		assert.NotEqual(t, r[0], r[1])
		assert.NotEqual(t, r[1], r[2])
	}
	assert.Equal(t, run(mesh, parallel.DP), run(mesh, parallel.DP))
	single := run(nil, parallel.Single)
	assert.Equal(t, single, run(nil, parallel.Single))
	// By propagation the loss sees the whole batch and the key of the
	// single-device run: the same masks.
	fsdp := run(mesh, parallel.FSDP)
	for i := range single {
		assert.InEpsilon(t, single[i], fsdp[i], 1e-5, "step %d", i)
	}
}

// leafBytes returns the bytes of the W and B leaves of an MLP.
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
	m, b := guideModel(guideSizes, 16, 2)
	mesh := shard.NewMesh([]int{8}, []string{"dp"})
	const n = 8
	stats := func(s parallel.Strategy, remat func(tensor.NodeInfo) bool) parallel.Stats {
		tr, err := parallel.New(m, parallel.Config[nn.MLP, batch]{Loss: mlpLoss, Strategy: s, Mesh: mesh,
			Optimizer: optim.Adam(optim.Constant(1e-3)), Remat: remat})
		require.NoError(t, err)
		_, err = tr.Step(b)
		require.NoError(t, err)
		st, err := tr.Stats(b)
		require.NoError(t, err)
		return st
	}
	dps, fs := stats(parallel.DP, nil), stats(parallel.FSDP, nil)
	fsMap := stats(path{parallel.FSDP, true}, nil)

	wBytes, bBytes := leafBytes(m)
	// Every leaf with a dimension divisible by 8 is sharded: all weights
	// and the biases but the last (4 elements).
	replB := int64(m.Layers[3].B.Bytes())
	shardedB := bBytes - replB
	sharded := wBytes + shardedB
	for _, st := range []parallel.Stats{fs, fsMap} {
		assert.Equal(t, sharded/n+replB, st.ParamBytes, "FSDP holds 1/n of what it shards")
		// Adam keeps two moments per parameter (and a step count).
		assert.Equal(t, 2*st.ParamBytes+4, st.StateBytes)
		// Only the shards are kept for backward, which gathers again: no
		// all-gathered weight is kept.
		assert.Zero(t, st.Residuals.ByLabel["all_gather"].Count)
		assert.Zero(t, st.Residuals.ByLabel["pvary"].Count)
		assert.Less(t, int64(st.Residuals.Bytes), wBytes/n+16<<10)
	}
	assert.Equal(t, wBytes+bBytes, dps.ParamBytes, "DP holds a full replica")
	// DP's sharded update leaves the vectors whole (their update is cheaper
	// than the meetings of a reduce-scatter and an all-gather).
	assert.Equal(t, 2*(wBytes/n+bBytes)+4, dps.StateBytes, "DP's Adam moments of the weights are split like FSDP's parameters (ZeRO-1/2)")
	// DP keeps the full weights for backward (as the outputs of the
	// implicit broadcasts of the replicated weights, "pvary").
	assert.Equal(t, wBytes, int64(dps.Residuals.ByLabel["pvary"].Bytes))
	keep := stats(path{parallel.FSDP, true}, func(tensor.NodeInfo) bool { return true })
	assert.Equal(t, len(m.Layers), keep.Residuals.ByLabel["all_gather"].Count,
		"without the remat policy the Map step would keep the gathered weights")

	// Communication per step, per device, as the textbook has it. DP: a
	// reduce-scatter of the weights' gradients and an all-gather of the
	// updated weights ((n-1)/n of their bytes each: one all-reduce), an
	// all-reduce of the biases' gradients, plus the loss.
	lossBytes := int64(2 * (n - 1) * 4 / n)
	assert.Equal(t, map[string]int64{"psum_scatter": (n - 1) * wBytes / n, "all_gather": (n - 1) * wBytes / n,
		"psum": 2*(n-1)*bBytes/n + lossBytes}, dps.CommBytes)
	// FSDP, Map step: all-gather of every sharded leaf in forward and of
	// the weights again in backward (the bias add's VJP needs no bias),
	// a reduce-scatter of their gradients, and an all-reduce of the
	// replicated bias's gradient.
	assert.Equal(t, 2*(n-1)*wBytes/n+(n-1)*shardedB/n, fsMap.CommBytes["all_gather"])
	assert.Equal(t, (n-1)*sharded/n, fsMap.CommBytes["psum_scatter"])
	assert.Equal(t, 2*(n-1)*replB/n+lossBytes, fsMap.CommBytes["psum"])
	// FSDP by propagation gathers in backward only the weights whose
	// input gradient is needed: not the first layer's.
	w0 := int64(m.Layers[0].W.Bytes())
	assert.Equal(t, 2*(n-1)*wBytes/n-(n-1)*w0/n+(n-1)*shardedB/n, fs.CommBytes["all_gather"])
	assert.Equal(t, (n-1)*sharded/n, fs.CommBytes["psum_scatter"])
}

// The Map step of TP gathers each weight over "tp" into a value
// invariant over "dp" too, which the matmul broadcasts over "dp" with an
// implicit pvary: the checkpoint around the loss recomputes that pvary
// with the gather instead of saving it (a saved pvary would keep the
// gathered weight alive through the backward pass).
func TestTPMapStepKeepsNoGatheredWeights(t *testing.T) {
	m, b := guideModel(guideSizes, 16, 2)
	mesh := shard.NewMesh([]int{4, 2}, []string{"dp", "tp"})
	tr, err := parallel.New(m, parallel.Config[nn.MLP, batch]{Loss: mlpLoss, Strategy: path{parallel.TP, true}, Mesh: mesh,
		Optimizer: optim.Adam(optim.Constant(1e-3))})
	require.NoError(t, err)
	_, err = tr.Step(b)
	require.NoError(t, err)
	st, err := tr.Stats(b)
	require.NoError(t, err)
	assert.Zero(t, st.Residuals.ByLabel["all_gather"].Count)
	assert.Zero(t, st.Residuals.ByLabel["pvary"].Count)
	// Beyond its inputs (the weight shards, the batch) the backward pass
	// keeps activations, far less than the gathered weights.
	wBytes, _ := leafBytes(m)
	assert.Less(t, int64(st.Residuals.Activations().Bytes), wBytes/8, "%v", st.Residuals)
}

// Every op of both models has a sharding rule under every strategy that
// runs by propagation: no operand is gathered as a fallback (shard.Strict
// would panic), so TP really computes blockwise.
func TestPropagationNeedsNoFallback(t *testing.T) {
	mlp, mb := guideModel(guideSizes, 16, 1)
	blk := newBlock(tensor.NewKey(3), 32, 4, 4)
	k1, k2 := tensor.NewKey(4).Split2()
	bb := batch{tensor.Normal(k1, 16, 6, 32), tensor.Normal(k2, 16, 4)}
	mesh := shard.NewMesh([]int{2, 4}, []string{"dp", "tp"})
	for _, s := range []parallel.Strategy{parallel.FSDP, parallel.TP, parallel.FSDPTP, userRules} {
		t.Run(s.String(), func(t *testing.T) {
			trm, err := parallel.New(mlp, parallel.Config[nn.MLP, batch]{Loss: mlpLoss, Strategy: s, Mesh: mesh, Optimizer: optim.Adam(optim.Constant(1e-3))})
			require.NoError(t, err)
			trb, err := parallel.New(blk, parallel.Config[block, batch]{Loss: blockLoss, Strategy: s, Mesh: mesh, Optimizer: optim.Adam(optim.Constant(1e-3))})
			require.NoError(t, err)
			stop := shard.Strict(mesh)
			defer stop()
			require.NotPanics(t, func() {
				_, err := trm.Step(mb)
				require.NoError(t, err)
				_, err = trb.Step(bb)
				require.NoError(t, err)
			})
		})
	}
}

// Eval and LossAndGrad see the key the next Step will use and do not count
// as steps: evaluating between steps leaves the training run (its dropout
// keys) unchanged, and a nil optimizer state is refused on every path.
func TestEvalDoesNotAdvanceKeys(t *testing.T) {
	m, b := guideModel([]int{8, 16, 4}, 16, 2)
	var keys []tensor.Key
	loss := func(m nn.MLP, b batch, k tensor.Key) *tensor.Tensor {
		keys = append(keys, k)
		return mlpLoss(m, b)
	}
	run := func(evalBetween bool) []tensor.Key {
		keys = nil
		tr, err := parallel.New(m, parallel.Config[nn.MLP, batch]{LossWithKey: loss, Optimizer: optim.SGD(optim.Constant(0.1)), Key: tensor.NewKey(9)})
		require.NoError(t, err)
		var stepKeys []tensor.Key
		for range 3 {
			if evalBetween {
				_, err := tr.Eval(b)
				require.NoError(t, err)
				_, _, err = tr.LossAndGrad(b)
				require.NoError(t, err)
			}
			_, err := tr.Step(b)
			require.NoError(t, err)
			stepKeys = append(stepKeys, keys[len(keys)-1])
		}
		require.Error(t, tr.SetState(tr.Params(), nil))
		return stepKeys
	}
	plain, withEval := run(false), run(true)
	assert.Equal(t, plain, withEval)
	assert.NotEqual(t, plain[0], plain[1])
}
