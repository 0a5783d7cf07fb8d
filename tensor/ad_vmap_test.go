package tensor_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/tensor"
)

// The engine of Vmap and forward mode, composed with itself and with
// reverse mode. Package autodiff tests the user-facing transforms built on
// it; the rules of every op are tested in ad_rules_test.go.

// loopRows applies f to each row of xs (along axis 0) and stacks the
// results: the reference Vmap must equal.
func loopRows(xs *tensor.Tensor, f func(*tensor.Tensor) *tensor.Tensor) *tensor.Tensor {
	rows := tensor.Unstack(xs, 0)
	out := make([]*tensor.Tensor, len(rows))
	for i, r := range rows {
		out[i] = f(r)
	}
	return tensor.Stack(0, out...)
}

// TestBatchTraceNested: a Vmap inside a Vmap maps over two axes; the inner
// one closes over a value of the outer one.
func TestBatchTraceNested(t *testing.T) {
	rng := newRNG(1)
	xs := randF32(rng, 3, 4, 5) // 3 × 4 examples of 5
	w := randF32(rng, 5, 2)
	f := func(x *tensor.Tensor) *tensor.Tensor { return tensor.Tanh(tensor.MatMul(x, w)) }

	outer := tensor.NewBatchTrace(3)
	outer.Strict()
	xo := outer.Batched(xs, 0) // f32[4,5]
	require.Equal(t, []int{4, 5}, xo.Shape())
	bias := tensor.Sum(xo, 0) // per outer example: f32[5]
	inner := tensor.NewBatchTrace(4)
	inner.Strict()
	xi := inner.Batched(xo, 0) // f32[5]
	yi := tensor.Add(f(xi), tensor.Sum(bias))
	got := outer.Unbatched(inner.Unbatched(yi, 0), 0)

	want := loopRows(xs, func(x *tensor.Tensor) *tensor.Tensor {
		b := tensor.Sum(tensor.Sum(x, 0))
		return loopRows(x, func(r *tensor.Tensor) *tensor.Tensor { return tensor.Add(f(r), b) })
	})
	require.Equal(t, want.Float32s(), got.Float32s())
	require.Equal(t, []int{3, 4, 2}, got.Shape())
}

// TestBatchTraceGradients: a gradient taken inside the batch is the
// per-example gradient; a gradient of the batch flows through every
// example.
func TestBatchTraceGradients(t *testing.T) {
	rng := newRNG(2)
	xs := randF32(rng, 4, 3)
	w := randF32(rng, 3, 2)
	loss := func(w, x *tensor.Tensor) *tensor.Tensor {
		return tensor.Sum(tensor.Square(tensor.Tanh(tensor.MatMul(x, w))))
	}
	gradW := func(w, x *tensor.Tensor) *tensor.Tensor {
		tr := tensor.NewTrace()
		lw := tr.Leaf(w)
		return tensor.Backward(tr, []*tensor.Tensor{loss(lw, x)}, []*tensor.Tensor{tensor.Scalar(1)}, []*tensor.Tensor{lw}, false)[0]
	}

	// Vmap of grad: per-example gradients of w.
	bt := tensor.NewBatchTrace(4)
	bt.Strict()
	per := bt.Unbatched(gradW(w, bt.Batched(xs, 0)), 0)
	want := loopRows(xs, func(x *tensor.Tensor) *tensor.Tensor { return gradW(w, x) })
	require.Equal(t, []int{4, 3, 2}, per.Shape())
	require.InDeltaSlice(t, want.Float32s(), per.Float32s(), 1e-6)

	// Grad of vmap: the gradient of the summed per-example losses.
	tr := tensor.NewTrace()
	lw := tr.Leaf(w)
	bt2 := tensor.NewBatchTrace(4)
	ls := bt2.Unbatched(loss(lw, bt2.Batched(xs, 0)), 0)
	g := tensor.Backward(tr, []*tensor.Tensor{tensor.Sum(ls)}, []*tensor.Tensor{tensor.Scalar(1)}, []*tensor.Tensor{lw}, false)[0]
	require.InDeltaSlice(t, tensor.Sum(want, 0).Float32s(), g.Float32s(), 1e-5)
}

// TestJVPTraceHessianVector: forward mode over reverse mode gives
// Hessian-vector products: for f(x) = Σ x³, H = diag(6x).
func TestJVPTraceHessianVector(t *testing.T) {
	x := tensor.FromFloat32([]float32{1, -2, 0.5})
	v := tensor.FromFloat32([]float32{1, 2, 3})
	jt := tensor.NewJVPTrace()
	xd := jt.Dual(x, v)
	tr := tensor.NewTrace()
	lx := tr.Leaf(xd)
	y := tensor.Sum(tensor.Mul(tensor.Square(lx), lx))
	g := tensor.Backward(tr, []*tensor.Tensor{y}, []*tensor.Tensor{tensor.Scalar(1)}, []*tensor.Tensor{lx}, false)[0]
	require.Equal(t, []float32{3, 12, 0.75}, jt.Primal(g).Float32s()) // 3x²
	require.Equal(t, []float32{6, -24, 9}, jt.Tangent(g).Float32s())  // 6x·v
	// The primal of a value inside forward mode is readable.
	require.Equal(t, []float32{3, 12, 0.75}, g.Float32s())
}

// TestBatchTraceFallback: an op without a batching rule is computed
// example by example, counted; Strict makes it a panic naming the op.
func TestBatchTraceFallback(t *testing.T) {
	op := &tensor.Op{Name: "twice", Impl: func(in []*tensor.Tensor, _ any) *tensor.Tensor {
		return tensor.FromFloat32(tensor.MulScalar(in[0], 2).Float32s(), in[0].Shape()...)
	}}
	xs := tensor.FromFloat32([]float32{1, 2, 3, 4, 5, 6}, 3, 2)
	bt := tensor.NewBatchTrace(3)
	y := bt.Unbatched(tensor.Apply(op, nil, bt.Batched(xs, 0)), 0)
	require.Equal(t, []float32{2, 4, 6, 8, 10, 12}, y.Float32s())
	require.Equal(t, map[string]int{"twice": 1}, bt.Fallbacks())

	strict := tensor.NewBatchTrace(3)
	strict.Strict()
	requirePanic(t, `tensor: op "twice" has no batching rule (Op.Batch) and Vmap is strict: it would be computed example by example, 3 times`,
		func() { tensor.Apply(op, nil, strict.Batched(xs, 0)) })
}

// TestBatchTraceReadPanics: the data of a value inside Vmap cannot be
// read; a value of an inner transformation cannot leave it.
func TestBatchTraceReadPanics(t *testing.T) {
	xs := tensor.FromFloat32([]float32{1, 2, 3, 4}, 2, 2)
	bt := tensor.NewBatchTrace(2)
	x := bt.Batched(xs, 1)
	require.Equal(t, []int{2}, x.Shape())
	requirePanic(t, "Tensor.Float32s: f32[2] is a value inside Vmap: it stands for a batch of 2 examples and has no data of its own; return it from the vmapped function to read it",
		func() { x.Float32s() })
	requirePanic(t, "Tensor.Item: f32[] is a value inside Vmap: it stands for a batch of 2 examples and has no data of its own; return it from the vmapped function to read it",
		func() { tensor.Sum(x).Item() })
	requirePanic(t, "tensor.BatchTrace.Batched: f32[2,2] has 2 elements along axis 0, not the batch size 3",
		func() { tensor.NewBatchTrace(3).Batched(xs, 0) })
	tr := tensor.NewTrace()
	requirePanic(t, "tensor.BatchTrace.Unbatched: f32[2] belongs to a transformation started inside the vmapped function (a trace: return its primal value)",
		func() { bt.Unbatched(tr.Leaf(x), 0) })
	// Batched along axis 1: the columns.
	require.Equal(t, []float32{1, 3, 2, 4}, bt.Unbatched(x, 0).Float32s())
	require.Equal(t, []float32{1, 2, 3, 4}, bt.Unbatched(x, 1).Float32s())
}

// TestBiasActBatchedBiases: BiasAct over a batch of inputs and a batch of
// biases (an ensemble's layers), at one and two Vmap levels, is the
// composition act(x + b) bit for bit, and so is its gradient.
func TestBiasActBatchedBiases(t *testing.T) {
	rng := newRNG(2)
	xs, bs := randF32(rng, 2, 3, 5, 4), randF32(rng, 2, 3, 4) // 2 × 3 examples
	for _, act := range []tensor.Activation{tensor.ActRelu, tensor.ActTanh, tensor.ActIdentity, tensor.ActGelu} {
		want := compose(act, tensor.Add(xs, tensor.Reshape(bs, 2, 3, 1, 4)))
		// One level: the 6 examples flattened.
		one := tensor.NewBatchTrace(6)
		one.Strict()
		got := one.Unbatched(tensor.BiasAct(one.Batched(tensor.Reshape(xs, 6, 5, 4), 0), one.Batched(tensor.Reshape(bs, 6, 4), 0), act), 0)
		require.Equal(t, tensor.Reshape(want, 6, 5, 4).Float32s(), got.Float32s(), "%v, one level", act)
		// Two levels.
		outer, inner := tensor.NewBatchTrace(2), tensor.NewBatchTrace(3)
		xo, bo := outer.Batched(xs, 0), outer.Batched(bs, 0)
		y := inner.Unbatched(tensor.BiasAct(inner.Batched(xo, 0), inner.Batched(bo, 0), act), 0)
		require.Equal(t, want.Float32s(), outer.Unbatched(y, 0).Float32s(), "%v, two levels", act)
		// The bias gradient: each example's rows summed.
		tr := tensor.NewTrace()
		bt := tensor.NewBatchTrace(6)
		bl := tr.Leaf(tensor.Reshape(bs, 6, 4))
		loss := tensor.Sum(bt.Unbatched(tensor.BiasAct(bt.Batched(tensor.Reshape(xs, 6, 5, 4), 0), bt.Batched(bl, 0), act), 0))
		g := tensor.Backward(tr, []*tensor.Tensor{loss}, []*tensor.Tensor{tensor.Scalar(1)}, []*tensor.Tensor{bl}, false)[0]
		tr2 := tensor.NewTrace()
		bl2 := tr2.Leaf(tensor.Reshape(bs, 6, 1, 4))
		loss2 := tensor.Sum(compose(act, tensor.Add(tensor.Reshape(xs, 6, 5, 4), bl2)))
		g2 := tensor.Backward(tr2, []*tensor.Tensor{loss2}, []*tensor.Tensor{tensor.Scalar(1)}, []*tensor.Tensor{bl2}, false)[0]
		require.Equal(t, g2.Float32s(), g.Float32s(), "%v, bias gradient", act)
	}
}

// compose returns act(z) by the unfused ops.
func compose(act tensor.Activation, z *tensor.Tensor) *tensor.Tensor {
	switch act {
	case tensor.ActRelu:
		return tensor.Relu(z)
	case tensor.ActTanh:
		return tensor.Tanh(z)
	case tensor.ActGelu:
		return tensor.Gelu(z)
	}
	return z
}
