package autodiff_test

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/autodiff"
	"github.com/gonox/gonox/nn"
	"github.com/gonox/gonox/pytree"
	"github.com/gonox/gonox/tensor"
)

// TestVmapLayers: nn layers called on one example and vmapped over a
// batch equal the batched call, under Strict (no op falls back to a loop
// over the examples). Layers whose batched call computes the same sums in
// the same order agree bit for bit; the others (a convolution or an
// attention batched through other kernel paths) within float32 rounding.
func TestVmapLayers(t *testing.T) {
	r := rand.New(rand.NewPCG(30, 30))
	keys := tensor.NewKey(31).Split(8)
	lin := nn.NewLinear(keys[0], 6, 5, nn.LinearOptions{})
	mlp := nn.NewMLP(keys[1], []int{6, 8, 3}, nn.MLPOptions{})
	conv := nn.NewConv2d(keys[2], 3, 4, 3, nn.ConvOptions{Padding: nn.Padding(1)})
	ln := nn.NewLayerNorm(6, nn.LayerNormOptions{})
	ln.Weight, ln.Bias = randT(r, 6), randT(r, 6) // not the identity's ones and zeros
	rms := nn.NewRMSNorm(6, nn.RMSNormOptions{})
	gn := nn.NewGroupNorm(2, 4, nn.GroupNormOptions{})
	mha := nn.NewMultiHeadAttention(keys[3], 8, 2, nn.AttentionOptions{})
	causal := nn.NewMultiHeadAttention(keys[4], 8, 2, nn.AttentionOptions{Causal: true, Bias: true})
	emb := nn.NewEmbedding(keys[5], 10, 4, nn.EmbeddingOptions{})

	// one lifts a layer that takes a batch only to one example: add a
	// batch of one, call, drop it (as a user writes a per-example function
	// for a batch-first layer such as GroupNorm).
	one := func(f func(*tensor.Tensor) *tensor.Tensor) func(*tensor.Tensor) *tensor.Tensor {
		return func(x *tensor.Tensor) *tensor.Tensor { return tensor.Squeeze(f(tensor.ExpandDims(x, 0)), 0) }
	}
	for _, c := range []struct {
		name    string
		f       func(*tensor.Tensor) *tensor.Tensor // on one example, or on a batch
		batch   *tensor.Tensor
		perExTo func(*tensor.Tensor) *tensor.Tensor // one example's call as f of the batch (nil: f itself)
		tol     float64
	}{
		{name: "Linear", f: lin.Forward, batch: randT(r, 7, 6)},
		{name: "MLP", f: mlp.Forward, batch: randT(r, 7, 6)},
		{name: "Conv2d", f: conv.Forward, batch: randT(r, 5, 3, 6, 6), tol: 1e-5},
		{name: "LayerNorm", f: ln.Forward, batch: randT(r, 7, 6)},
		{name: "LayerNorm of sequences", f: ln.Forward, batch: randT(r, 3, 4, 6)},
		{name: "RMSNorm", f: rms.Forward, batch: randT(r, 7, 6)},
		{name: "GroupNorm", f: one(gn.Forward), batch: randT(r, 5, 4, 3), perExTo: gn.Forward, tol: 1e-6},
		{name: "MultiHeadAttention", f: mha.Forward, batch: randT(r, 4, 5, 8), tol: 1e-5},
		{name: "MultiHeadAttention causal", f: causal.Forward, batch: randT(r, 4, 5, 8), tol: 1e-5},
		{name: "Embedding", f: emb.Forward, batch: tensor.FromInt32([]int32{1, 2, 9, 0, 3, 3}, 3, 2)},
	} {
		t.Run(c.name, func(t *testing.T) {
			batched := c.f
			if c.perExTo != nil {
				batched = c.perExTo
			}
			want := batched(c.batch)
			got := autodiff.Vmap(c.f, autodiff.Strict())(c.batch)
			requireTreesEqual(t, want, got, c.tol, c.name)
			// And against a loop over the examples.
			loop := loopStack(c.batch, c.f)
			requireTreesEqual(t, loop, got, max(c.tol, 1e-6), c.name+" loop")
		})
	}
}

// TestVmapIndexChecks: an index out of range under Vmap panics as it
// does on one example, whether the table is broadcast or batched (then
// each example's indices are offset into the batch, where an index past
// the end would otherwise read the next example's row).
func TestVmapIndexChecks(t *testing.T) {
	emb := nn.NewEmbedding(tensor.NewKey(1), 10, 4, nn.EmbeddingOptions{})
	bad := tensor.FromInt32([]int32{1, 2, 12, 0}, 2, 2)
	require.PanicsWithValue(t, "tensor.Take: f32[10,4], i32[2,2] along axis 0: index 12 at position [1 0] out of range [-10, 10)",
		func() { autodiff.Vmap(emb.Forward)(bad) })

	tables := tensor.Zeros(tensor.Float32, 2, 3, 4) // a table per example
	ok := tensor.FromInt32([]int32{2, -1, 0, 1}, 2, 2)
	take := func(x, i *tensor.Tensor) *tensor.Tensor { return tensor.Take(x, i, 0) }
	require.Equal(t, []int{2, 2, 4}, autodiff.Vmap2(take, autodiff.Strict())(tables, ok).Shape())
	require.PanicsWithValue(t, "tensor.Take under Vmap: indices i32[2,2] (batch first) into an axis of 3: index 3 at position [0 1] out of range [-3, 3)",
		func() { autodiff.Vmap2(take)(tables, tensor.FromInt32([]int32{0, 3, 0, 0}, 2, 2)) })
}

// TestVmapDropoutKeys: dropout under Vmap over a stack of keys drops
// each example with its own key, as the loop over (example, key) pairs
// does, bit for bit; a broadcast key drops every example alike.
func TestVmapDropoutKeys(t *testing.T) {
	r := rand.New(rand.NewPCG(32, 32))
	d := nn.NewDropout(0.5)
	xs := randT(r, 4, 16)
	keys := tensor.NewKey(33).Split(4)
	got := autodiff.Vmap2(d.Forward, autodiff.Strict())(xs, tensor.StackKeys(keys))
	var want []*tensor.Tensor
	for i, x := range rows(xs) {
		want = append(want, d.Forward(x, keys[i]))
	}
	require.Equal(t, tensor.Stack(0, want...).Float32s(), got.Float32s())
	// Every example its own mask: no two rows dropped alike.
	masks := rows(tensor.Equal(got, tensor.ZerosLike(got)))
	for i := 1; i < len(masks); i++ {
		require.NotEqual(t, masks[0].Bools(), masks[i].Bools(), "example %d", i)
	}

	same := autodiff.Vmap2(d.Forward, autodiff.InAxes(autodiff.Axis(0), autodiff.None))(tensor.Ones(tensor.Float32, 3, 16), keys[0])
	rs := rows(same)
	require.Equal(t, rs[0].Float32s(), rs[2].Float32s())
	require.Equal(t, d.Forward(tensor.Ones(tensor.Float32, 16), keys[0]).Float32s(), rs[1].Float32s())
}

// TestVmapNestedGrad: an ensemble's per-example gradients, Vmap over the
// models of Vmap over the examples of Grad, equal the double loop.
func TestVmapNestedGrad(t *testing.T) {
	r := rand.New(rand.NewPCG(34, 34))
	keys := tensor.NewKey(35).Split(3)
	newMLP := func(k tensor.Key) nn.MLP { return nn.NewMLP(k, []int{4, 6, 3}, nn.MLPOptions{}) }
	ens := autodiff.Vmap(newMLP)(tensor.StackKeys(keys))
	batch := example{randT(r, 5, 4), tensor.FromInt32([]int32{0, 1, 2, 2, 1}, 5)}

	grad := autodiff.GradWith(mlpLoss)
	perExample := autodiff.Vmap2(grad, autodiff.InAxes(autodiff.None, autodiff.Axis(0)), autodiff.Strict())
	got := autodiff.Vmap2(perExample, autodiff.InAxes(autodiff.Axis(0), autodiff.None), autodiff.Strict())(ens, batch)
	require.Equal(t, []int{3, 5, 4, 6}, got.Layers[0].W.Shape())

	xs, ys := rows(batch.X), rows(batch.Y)
	var perModel []nn.MLP
	for _, k := range keys {
		m := newMLP(k)
		var gs []nn.MLP
		for i := range xs {
			gs = append(gs, grad(m, example{xs[i], ys[i]}))
		}
		perModel = append(perModel, stackTrees(gs))
	}
	requireTreesEqual(t, stackTrees(perModel), got, 1e-5, "ensemble × examples")

	// Grad through the nested Vmap: the gradient of every model's summed
	// loss is the per-example gradients summed over the examples.
	total := func(ens nn.MLP) *tensor.Tensor {
		per := autodiff.Vmap2(mlpLoss, autodiff.InAxes(autodiff.None, autodiff.Axis(0)))
		return tensor.Sum(autodiff.Vmap2(per, autodiff.InAxes(autodiff.Axis(0), autodiff.None))(ens, batch))
	}
	g := autodiff.Grad(total)(ens)
	sum := pytree.Map(got, func(x *tensor.Tensor) *tensor.Tensor { return tensor.Sum(x, 1) })
	requireTreesEqual(t, sum, g, 1e-5, "grad of nested vmap")
}

// TestVmapJVP: JVP of a vmapped function equals the vmapped JVP, and the
// loop of JVPs over the examples.
func TestVmapJVP(t *testing.T) {
	r := rand.New(rand.NewPCG(36, 36))
	w := randT(r, 4, 3)
	f := func(x *tensor.Tensor) *tensor.Tensor { return tensor.Sum(tensor.Tanh(tensor.MatMul(x, w))) }
	xs, ts := randT(r, 5, 4), randT(r, 5, 4)

	y, ty := autodiff.JVP(autodiff.Vmap(f, autodiff.Strict()), xs, ts)
	jvp := func(x, t *tensor.Tensor) [2]*tensor.Tensor {
		y, ty := autodiff.JVP(f, x, t)
		return [2]*tensor.Tensor{y, ty}
	}
	v := autodiff.Vmap2(jvp, autodiff.Strict())(xs, ts)
	requireTreesEqual(t, v[0], y, 1e-6, "primal")
	requireTreesEqual(t, v[1], ty, 1e-6, "tangent")
	var ly, lt []*tensor.Tensor
	for i, x := range rows(xs) {
		p := jvp(x, rows(ts)[i])
		ly, lt = append(ly, p[0]), append(lt, p[1])
	}
	requireTreesEqual(t, tensor.Stack(0, lt...), ty, 1e-6, "loop")
	requireTreesEqual(t, tensor.Stack(0, ly...), y, 1e-6, "loop primal")
}

// stackTrees stacks trees of one type leaf by leaf along a new axis 0.
func stackTrees[T any](ts []T) T {
	return pytree.MapN(func(ls []*tensor.Tensor) *tensor.Tensor { return tensor.Stack(0, ls...) }, ts...)
}
