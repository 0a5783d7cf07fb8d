package tensor

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestBatchTraceDonation: donating a value inside Vmap that an op
// computed donates the batch it stands for (so RecycleIntermediates
// recycles a vmapped function's activations); an argument's batch, and a
// batch that another value wraps too (a rule that returned its operand),
// are left alone.
func TestBatchTraceDonation(t *testing.T) {
	ident := &Op{
		Name:  "test_ident",
		Impl:  func(in []*Tensor, _ any) *Tensor { return in[0] },
		Batch: func(in []*Tensor, _ []bool, _ any) []*Tensor { return in[:1] },
	}
	xs := FromFloat32([]float32{1, 2, 3, 4}, 2, 2)
	bt := NewBatchTrace(2)
	x := bt.Batched(xs, 0)
	h := Exp(x)
	e := Exp(x)
	require.True(t, h.xv().owned.Load())

	a := Apply(ident, nil, h) // wraps h's batch too
	require.Same(t, bt.valueOf(h), bt.valueOf(a))
	require.False(t, h.xv().owned.Load())
	require.False(t, a.xv().owned.Load())
	Donate(h)
	require.False(t, bt.valueOf(a).IsDonated())
	require.Equal(t, Exp(xs).Float32s(), bt.Unbatched(a, 0).Float32s())

	batch := bt.valueOf(e)
	Donate(e)
	require.True(t, batch.IsDonated())

	Donate(x)
	require.False(t, xs.IsDonated())
	require.Equal(t, []float32{1, 2, 3, 4}, xs.Float32s())
}

// TestBatchTraceRecycle: a gradient inside Vmap with
// RecycleIntermediates donates the batches of the activations it kept,
// and the per-example gradients are those of a run without recycling.
func TestBatchTraceRecycle(t *testing.T) {
	xs := FromFloat32([]float32{1, -2, 3, 0.5, -1, 2}, 3, 2)
	w := FromFloat32([]float32{0.5, -1, 2, 1}, 2, 2)
	grads := func(recycle bool) (*Tensor, []*Tensor) {
		bt := NewBatchTrace(3)
		x := bt.Batched(xs, 0)
		tr := NewTrace()
		if recycle {
			tr.RecycleIntermediates()
		}
		wt := tr.Leaf(w)
		h := Tanh(MatMul(ExpandDims(x, 0), wt))
		var kept []*Tensor
		kept = append(kept, bt.valueOf(tr.Primal(h)))
		y := Sum(Square(h))
		g := Backward(tr, []*Tensor{y}, []*Tensor{OnesLike(tr.Primal(y))}, []*Tensor{wt}, false)[0]
		return bt.Unbatched(g, 0), kept
	}
	want, keptPlain := grads(false)
	got, keptRecycled := grads(true)
	require.Equal(t, want.Float32s(), got.Float32s())
	require.False(t, keptPlain[0].IsDonated())
	require.True(t, keptRecycled[0].IsDonated(), "the activation's batch was recycled")

	// Steps that reuse the recycled batches, served poisoned with NaN:
	// every op overwrites what it is given, nothing reads a dead batch.
	oldOn, oldPoison := cacheEnabled, poisonRecycled
	cacheEnabled, poisonRecycled = true, true
	defer func() { cacheEnabled, poisonRecycled = oldOn, oldPoison }()
	for range 3 {
		got, _ = grads(true)
		require.Equal(t, want.Float32s(), got.Float32s())
	}
}
