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

// rows returns the slices of x along axis 0.
func rows(x *tensor.Tensor) []*tensor.Tensor { return tensor.Unstack(x, 0) }

// loopStack applies f to each row of xs and stacks the results.
func loopStack(xs *tensor.Tensor, f func(*tensor.Tensor) *tensor.Tensor) *tensor.Tensor {
	var out []*tensor.Tensor
	for _, x := range rows(xs) {
		out = append(out, f(x))
	}
	return tensor.Stack(0, out...)
}

// requireTreesEqual compares two trees leaf by leaf within rtol (0: bit
// for bit).
func requireTreesEqual(t *testing.T, want, got any, rtol float64, msg string) {
	t.Helper()
	wl, gl := pytree.Leaves(want), pytree.Leaves(got)
	require.Len(t, gl, len(wl), msg)
	for i := range wl {
		require.Equal(t, wl[i].Shape(), gl[i].Shape(), "%s: leaf %d", msg, i)
		if rtol == 0 {
			require.Equal(t, wl[i].Float64s(), gl[i].Float64s(), "%s: leaf %d", msg, i)
			continue
		}
		w, g := wl[i].Float64s(), gl[i].Float64s()
		for k := range w {
			require.InDelta(t, w[k], g[k], rtol*(1+abs(w[k])), "%s: leaf %d element %d", msg, i, k)
		}
	}
}

func abs(x float64) float64 {
	if x < 0 {
		return -x
	}
	return x
}

// TestVmapAxes: in_axes and out_axes per argument and per leaf, against a
// loop over the examples.
func TestVmapAxes(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 1))
	xs := randT(r, 4, 3) // 4 examples of 3
	w := randT(r, 3, 2)
	f := func(x, w *tensor.Tensor) *tensor.Tensor { return tensor.Tanh(tensor.MatMul(x, w)) }
	want := loopStack(xs, func(x *tensor.Tensor) *tensor.Tensor { return f(x, w) })

	got := autodiff.Vmap2(f, autodiff.InAxes(autodiff.Axis(0), autodiff.None))(xs, w)
	require.Equal(t, want.Float32s(), got.Float32s())

	// The examples along axis 1 of the input, the batch last in the result.
	got = autodiff.Vmap2(f, autodiff.InAxes(autodiff.Axis(-1), autodiff.None), autodiff.OutAxes(autodiff.Axis(-1)))(tensor.T(xs), w)
	require.Equal(t, tensor.T(want).Float32s(), got.Float32s())

	// Per leaf: a struct whose X is mapped and whose W is broadcast.
	type args struct{ X, W *tensor.Tensor }
	spec := autodiff.AxesFunc(func(p pytree.Path, _ *tensor.Tensor) autodiff.Axis {
		if p.String() == "W" {
			return autodiff.None
		}
		return 0
	})
	got = autodiff.Vmap(func(a args) *tensor.Tensor { return f(a.X, a.W) }, autodiff.InAxes(spec))(args{xs, w})
	require.Equal(t, want.Float32s(), got.Float32s())

	// A result that does not depend on the batch, out axis None; another
	// that does, broadcast ones made explicit.
	type res struct{ Y, C *tensor.Tensor }
	both := autodiff.Vmap2(func(x, w *tensor.Tensor) res { return res{f(x, w), tensor.Sum(w)} },
		autodiff.InAxes(autodiff.Axis(0), autodiff.None),
		autodiff.OutAxes(autodiff.AxesFunc(func(p pytree.Path, _ *tensor.Tensor) autodiff.Axis {
			if p.String() == "C" {
				return autodiff.None
			}
			return 0
		})))(xs, w)
	require.Equal(t, want.Float32s(), both.Y.Float32s())
	require.Equal(t, []int{}, both.C.Shape())
	bc := autodiff.Vmap2(func(x, w *tensor.Tensor) *tensor.Tensor { return tensor.Sum(w) },
		autodiff.InAxes(autodiff.Axis(0), autodiff.None))(xs, w)
	require.Equal(t, []int{4}, bc.Shape())

	// AxisSize with nothing mapped: every example the same.
	got = autodiff.Vmap(func(w *tensor.Tensor) *tensor.Tensor { return tensor.Sum(w) },
		autodiff.InAxes(autodiff.None), autodiff.AxisSize(3))(w)
	require.Equal(t, []int{3}, got.Shape())
}

// TestVmapPanics: the mistakes Vmap refuses, named.
func TestVmapPanics(t *testing.T) {
	x4, x5 := tensor.Ones(tensor.Float32, 4, 2), tensor.Ones(tensor.Float32, 5)
	id2 := func(a, b *tensor.Tensor) *tensor.Tensor { return tensor.Add(tensor.Sum(a), tensor.Sum(b)) }
	require.PanicsWithValue(t, "autodiff.Vmap2: argument 1 f32[5] has 5 examples along its mapped axis but argument 0 f32[4,2] has 4",
		func() { autodiff.Vmap2(id2)(x4, x5) })
	require.PanicsWithValue(t, "autodiff.Vmap: no argument leaf is mapped: give the number of examples with AxisSize",
		func() { autodiff.Vmap(tensor.Neg, autodiff.InAxes(autodiff.None))(x5) })
	require.PanicsWithValue(t, "autodiff.Vmap: argument 0 f32[5]: axis 1 out of range for rank 1",
		func() { autodiff.Vmap(tensor.Neg, autodiff.InAxes(autodiff.Axis(1)))(x5) })
	require.PanicsWithValue(t, "autodiff.Vmap: result f32[]: axis 2 out of range for rank 1",
		func() { autodiff.Vmap(sumAll, autodiff.OutAxes(autodiff.Axis(2)))(x4) })
	require.PanicsWithValue(t, "autodiff.Vmap: result f32[2] depends on the batch but its out axis is None",
		func() { autodiff.Vmap(tensor.Neg, autodiff.OutAxes(autodiff.None))(x4) })
	require.PanicsWithValue(t, "autodiff.Vmap: AxisSize(3) but argument 0 f32[4,2] has 4 examples",
		func() { autodiff.Vmap(tensor.Neg, autodiff.AxisSize(3))(x4) })
	require.PanicsWithValue(t, "autodiff.Vmap: InAxes gives 2 axis specs for a function of 1 arguments",
		func() { autodiff.Vmap(tensor.Neg, autodiff.InAxes(autodiff.Axis(0), autodiff.None)) })
	// Leaves inside trees are named by their paths.
	type pair struct{ A, B *tensor.Tensor }
	require.PanicsWithValue(t, "autodiff.Vmap: argument 0 B f32[5]: axis 1 out of range for rank 1",
		func() {
			autodiff.Vmap(func(p pair) *tensor.Tensor { return p.A }, autodiff.InAxes(autodiff.Axis(1)))(pair{x4, x5})
		})
	require.PanicsWithValue(t, "autodiff.Vmap: argument 0 B f32[5] has 5 examples along its mapped axis but argument 0 A f32[4,2] has 4",
		func() { autodiff.Vmap(func(p pair) *tensor.Tensor { return p.A })(pair{x4, x5}) })
	require.PanicsWithValue(t, "autodiff.Vmap: result B f32[2] depends on the batch but its out axis is None",
		func() {
			autodiff.Vmap(func(x *tensor.Tensor) pair { return pair{tensor.Sum(x4), tensor.Neg(x)} }, autodiff.OutAxes(autodiff.None))(x4)
		})
	require.PanicsWithValue(t, "Tensor.Item: f32[] is a value inside Vmap: it stands for a batch of 4 examples and has no data of its own; return it from the vmapped function to read it",
		func() {
			autodiff.Vmap(func(x *tensor.Tensor) *tensor.Tensor { tensor.Sum(x).Item(); return x })(x4)
		})
}

func sumAll(x *tensor.Tensor) *tensor.Tensor { return tensor.Sum(x) }

// TestVmapLinear: an nn.Linear written for one example, vmapped over a
// batch, equals the batched call bit for bit; so does an MLP.
func TestVmapLinear(t *testing.T) {
	r := rand.New(rand.NewPCG(2, 2))
	key := tensor.NewKey(3)
	lin := nn.NewLinear(key, 6, 5, nn.LinearOptions{})
	mlp := nn.NewMLP(key, []int{6, 8, 3}, nn.MLPOptions{})
	xs := randT(r, 7, 6)
	for name, f := range map[string]func(*tensor.Tensor) *tensor.Tensor{
		"linear": lin.Forward,
		"mlp":    mlp.Forward,
	} {
		got := autodiff.Vmap(f, autodiff.Strict())(xs)
		require.Equal(t, f(xs).Float32s(), got.Float32s(), name)
	}
}

// mlpLoss is the loss of one example (x, label) for an MLP.
func mlpLoss(m nn.MLP, ex example) *tensor.Tensor {
	return tensor.SoftmaxCrossEntropy(m.Forward(ex.X), ex.Y)
}

type example struct{ X, Y *tensor.Tensor }

// TestVmapOfGrad: per-example gradients of an MLP by Vmap of Grad equal a
// loop of Grad over the examples; Grad of Vmap equals the sum of them.
func TestVmapOfGrad(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 3))
	m := nn.NewMLP(tensor.NewKey(4), []int{5, 8, 3}, nn.MLPOptions{})
	batch := example{randT(r, 6, 5), tensor.FromInt32([]int32{0, 2, 1, 1, 0, 2}, 6)}
	grad := autodiff.GradWith(mlpLoss)
	per := autodiff.Vmap2(grad, autodiff.InAxes(autodiff.None, autodiff.Axis(0)), autodiff.Strict())(m, batch)

	xs, ys := rows(batch.X), batch.Y.Ints()
	var loop []nn.MLP
	for i := range xs {
		loop = append(loop, grad(m, example{xs[i], tensor.ScalarInt(int32(ys[i]))}))
	}
	stacked := pytree.MapN(func(ls []*tensor.Tensor) *tensor.Tensor { return tensor.Stack(0, ls...) }, loop...)
	requireTreesEqual(t, stacked, per, 1e-6, "vmap of grad")

	// Grad of Vmap: the gradient of the summed per-example losses.
	total := func(m nn.MLP) *tensor.Tensor {
		return tensor.Sum(autodiff.Vmap2(mlpLoss, autodiff.InAxes(autodiff.None, autodiff.Axis(0)))(m, batch))
	}
	g := autodiff.Grad(total)(m)
	sum := pytree.Map(stacked, func(x *tensor.Tensor) *tensor.Tensor { return tensor.Sum(x, 0) })
	requireTreesEqual(t, sum, g, 1e-5, "grad of vmap")
}

// TestVmapNested: Vmap of Vmap maps over two axes.
func TestVmapNested(t *testing.T) {
	r := rand.New(rand.NewPCG(4, 4))
	xs := randT(r, 3, 4, 5)
	w := randT(r, 5)
	f := func(x *tensor.Tensor) *tensor.Tensor { return tensor.Sum(tensor.Mul(tensor.Exp(x), w)) }
	got := autodiff.Vmap(autodiff.Vmap(f))(xs)
	want := loopStack(xs, func(x *tensor.Tensor) *tensor.Tensor { return loopStack(x, f) })
	require.Equal(t, want.Float32s(), got.Float32s())
	// The outer Vmap over axis 1, the inner over the outer example's
	// axis 0, the inner's results last.
	got = autodiff.Vmap(autodiff.Vmap(f, autodiff.OutAxes(autodiff.Axis(-1))), autodiff.InAxes(autodiff.Axis(1)))(xs)
	want = loopStack(tensor.Transpose(xs, 1, 0, 2), func(x *tensor.Tensor) *tensor.Tensor { return loopStack(x, f) })
	require.Equal(t, want.Float32s(), got.Float32s())
}

// TestVmapCheckpoint: a checkpoint inside the vmapped function, with
// per-example gradients through it and a gradient of the batch.
func TestVmapCheckpoint(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 5))
	w := randT(r, 4, 4)
	xs := randT(r, 3, 4)
	block := autodiff.Checkpoint(func(x *tensor.Tensor) *tensor.Tensor { return tensor.Tanh(tensor.MatMul(x, w)) }, autodiff.NothingSaveable)
	loss := func(w, x *tensor.Tensor) *tensor.Tensor {
		f := autodiff.Checkpoint(func(x *tensor.Tensor) *tensor.Tensor { return tensor.Tanh(tensor.MatMul(x, w)) }, autodiff.NothingSaveable)
		return tensor.Sum(tensor.Square(f(f(x))))
	}
	require.Equal(t, loopStack(xs, block).Float32s(), autodiff.Vmap(block)(xs).Float32s())

	per := autodiff.Vmap2(autodiff.GradWith(loss), autodiff.InAxes(autodiff.None, autodiff.Axis(0)))(w, xs)
	want := loopStack(xs, func(x *tensor.Tensor) *tensor.Tensor { return autodiff.GradWith(loss)(w, x) })
	requireTreesEqual(t, want, per, 1e-6, "vmap of grad of checkpoint")

	g := autodiff.Grad(func(w *tensor.Tensor) *tensor.Tensor {
		return tensor.Sum(autodiff.Vmap2(loss, autodiff.InAxes(autodiff.None, autodiff.Axis(0)))(w, xs))
	})(w)
	requireTreesEqual(t, tensor.Sum(want, 0), g, 1e-5, "grad of vmap of checkpoint")
}

// TestVmapKeys: an ensemble initialised by Vmap over a stack of keys
// equals the models made one by one; a key split inside the function
// splits each example's key.
func TestVmapKeys(t *testing.T) {
	keys := tensor.NewKey(7).Split(4)
	newMLP := func(k tensor.Key) nn.MLP { return nn.NewMLP(k, []int{3, 5, 2}, nn.MLPOptions{}) }
	ens := autodiff.Vmap(newMLP, autodiff.Strict())(tensor.StackKeys(keys))
	var loop []nn.MLP
	for _, k := range keys {
		loop = append(loop, newMLP(k))
	}
	stacked := pytree.MapN(func(ls []*tensor.Tensor) *tensor.Tensor { return tensor.Stack(0, ls...) }, loop...)
	requireTreesEqual(t, stacked, ens, 0, "ensemble")
	require.Equal(t, []int{4, 3, 5}, ens.Layers[0].W.Shape())

	// Split inside: each example's key split; the keys come back stacked.
	split := autodiff.Vmap(func(k tensor.Key) tensor.Key { _, b := k.Split2(); return b })(tensor.StackKeys(keys))
	for i, k := range split.Unstack() {
		_, b := keys[i].Split2()
		require.Equal(t, b.Data(), k.Data())
	}
	// One key broadcast to every example: the same draws.
	same := autodiff.Vmap(func(x *tensor.Tensor) *tensor.Tensor {
		return tensor.Add(x, tensor.Normal(keys[0], 2))
	})(tensor.Zeros(tensor.Float32, 3, 2))
	require.Equal(t, same.Float32s()[:2], same.Float32s()[4:])
}

// TestVmapFallbacks: an op of another package without a batching rule is
// computed example by example and counted; Strict refuses it.
func TestVmapFallbacks(t *testing.T) {
	op := &tensor.Op{Name: "host_double", Impl: func(in []*tensor.Tensor, _ any) *tensor.Tensor {
		d := in[0].Float32s()
		for i := range d {
			d[i] *= 2
		}
		return tensor.FromFloat32(d, in[0].Shape()...)
	}}
	f := func(x *tensor.Tensor) *tensor.Tensor { return tensor.Apply(op, nil, x) }
	counts := map[string]int{}
	xs := tensor.FromFloat32([]float32{1, 2, 3, 4}, 2, 2)
	got := autodiff.Vmap(f, autodiff.Fallbacks(counts))(xs)
	require.Equal(t, []float32{2, 4, 6, 8}, got.Float32s())
	require.Equal(t, map[string]int{"host_double": 1}, counts)
	require.PanicsWithValue(t, `tensor: op "host_double" has no batching rule (Op.Batch) and Vmap is strict: it would be computed example by example, 2 times`,
		func() { autodiff.Vmap(f, autodiff.Strict())(xs) })
	// Strict in an inner Vmap, the fallback in the outer one's batch.
	require.Panics(t, func() { autodiff.Vmap(autodiff.Vmap(f, autodiff.Strict()))(tensor.Reshape(xs, 2, 2, 1)) })
}
