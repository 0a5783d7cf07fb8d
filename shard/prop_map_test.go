package shard_test

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/autodiff"
	"github.com/gonox/gonox/nn"
	"github.com/gonox/gonox/shard"
	"github.com/gonox/gonox/tensor"
)

// TestPropagationAndMap: propagated ops feed a shard.Map and its result
// feeds propagated ops again (a partial sum entering the Map is reduced
// first); values and gradients equal the host computation, and Check reads
// the types of propagated results.
func TestPropagationAndMap(t *testing.T) {
	m := guideMesh()
	r := rand.New(rand.NewPCG(3, 4))
	xh, wh, vh := randT(r, 8, 6), randT(r, 6, 4), randT(r, 6, 4)
	type XW struct{ X, W *tensor.Tensor }
	matmul := shard.Map(m, shard.Specs{"X": shard.P("dp", nil), "W": shard.P(nil, "tp")}, shard.P("dp", "tp"),
		func(c *shard.Ctx, in XW) *tensor.Tensor { return tensor.MatMul(in.X, in.W) })
	f := func(p [3]*tensor.Tensor) *tensor.Tensor {
		x := tensor.Tanh(p[0])
		// a partial sum (contracting dim sharded on both sides) into the Map
		wp := tensor.MatMul(tensor.Transpose(x, 1, 0), tensor.MatMul(x, p[2]))
		y := matmul(XW{X: x, W: tensor.Add(p[1], tensor.MulScalar(wp, 1e-2))})
		return tensor.Sum(tensor.Square(tensor.Relu(y)))
	}
	want, wantG := autodiff.ValueAndGrad(f)([3]*tensor.Tensor{xh, wh, vh})
	placed := [3]*tensor.Tensor{
		shard.Put(xh, shard.NewSharding(m, shard.P("dp", "tp"))),
		shard.Put(wh, shard.NewSharding(m, shard.P(nil, "tp"))),
		shard.Put(vh, shard.NewSharding(m, shard.P())),
	}
	got, gotG := autodiff.ValueAndGrad(f)(placed)
	requireClose(t, want, got, 1e-5, "value")
	for i := range wantG {
		requireClose(t, wantG[i], gotG[i], 1e-5, "grad")
		s0, _ := shard.ShardingOf(placed[i])
		s1, _ := shard.ShardingOf(gotG[i])
		require.True(t, s0.Equal(s1), "grad %d is %v, want %v", i, s1, s0)
	}
	y := tensor.MatMul(placed[0], placed[1])
	var sc shard.Scope
	require.NoError(t, sc.Check(y, "batch@dp out@tp"))
	require.Error(t, sc.Check(y, "batch out@tp"))
	require.NoError(t, sc.Check(tensor.Relu(y), "batch@dp out@tp"))
}

// TestPlaceholdersHoldNoBlocks: an input a VJP does not save reaches it as
// a shape-only placeholder that keeps no blocks alive; reading it panics
// as reading any placeholder does.
func TestPlaceholdersHoldNoBlocks(t *testing.T) {
	m := guideMesh()
	x := shard.Put(tensor.Ones(tensor.Float32, 8, 4), shard.NewSharding(m, shard.P("dp", nil)))
	var seen *tensor.Tensor
	op := &tensor.Op{
		Name:     "neg",
		Sharding: tensor.ShardingRule{Family: tensor.ShardElementwise},
		Impl:     func(in []*tensor.Tensor, _ any) *tensor.Tensor { return tensor.Neg(in[0]) },
		VJP: func(g *tensor.Tensor, in []*tensor.Tensor, _ *tensor.Tensor, _ any) []*tensor.Tensor {
			seen = in[0]
			return []*tensor.Tensor{tensor.Neg(g)}
		},
	}
	_, g := autodiff.ValueAndGrad(func(x *tensor.Tensor) *tensor.Tensor { return tensor.Sum(tensor.Apply(op, nil, x)) })(x)
	require.Equal(t, "float32[8@dp,4]", seen.Type())
	require.Equal(t, []float32{-1, -1, -1, -1}, g.Float32s()[:4])
	require.PanicsWithValue(t, "Tensor.Float32s: f32[8@dp,4] is a shape-only placeholder with no data (an op's VJP may only read the inputs and outputs its Save mask keeps)",
		func() { seen.Float32s() })
}

// TestDropoutOnPlacedActivations documents the dropout mode of
// propagation: the mask is the single-device one (drawn for the global
// shape from the key, then sliced to each device's block for free), so a
// placed model drops exactly the elements one device would, and gradients
// agree.
func TestDropoutOnPlacedActivations(t *testing.T) {
	m := guideMesh()
	r := rand.New(rand.NewPCG(6, 6))
	xh := randT(r, 8, 6)
	d := nn.NewDropout(0.3)
	key := tensor.NewKey(42)
	f := func(x *tensor.Tensor) *tensor.Tensor { return tensor.Sum(tensor.Square(d.Forward(x, key))) }
	want, wantG := autodiff.ValueAndGrad(f)(xh)
	x := shard.Put(xh, shard.NewSharding(m, shard.P("dp", "tp")))
	defer shard.Strict(m)()
	var comm shard.Comm
	stop := shard.Record(m, &comm)
	got, gotG := autodiff.ValueAndGrad(f)(x)
	stop()
	requireClose(t, want, got, 1e-6, "value")
	requireClose(t, wantG, gotG, 1e-6, "grad")
	require.Equal(t, "float32[8@dp,6@tp]", d.Forward(x, key).Type())
	require.Zero(t, comm.Bytes(m.Devices()[0], "all_gather"))
}

// TestSecondDerivativeThroughPropagation: VJPs applied to placed
// cotangents are ops like any other, so gradients of gradients work.
func TestSecondDerivativeThroughPropagation(t *testing.T) {
	m := guideMesh()
	r := rand.New(rand.NewPCG(9, 1))
	xh, wh := randT(r, 8, 6), randT(r, 6, 4)
	f := func(p [2]*tensor.Tensor) *tensor.Tensor {
		return tensor.Sum(tensor.Tanh(tensor.MatMul(p[0], p[1])))
	}
	g := func(p [2]*tensor.Tensor) *tensor.Tensor {
		gr := autodiff.Grad(f)(p)
		return tensor.Add(tensor.Sum(tensor.Square(gr[0])), tensor.Sum(tensor.Square(gr[1])))
	}
	want, wantG := autodiff.ValueAndGrad(g)([2]*tensor.Tensor{xh, wh})
	placed := [2]*tensor.Tensor{
		shard.Put(xh, shard.NewSharding(m, shard.P("dp", nil))),
		shard.Put(wh, shard.NewSharding(m, shard.P(nil, "tp"))),
	}
	got, gotG := autodiff.ValueAndGrad(g)(placed)
	requireClose(t, want, got, 1e-5, "value")
	requireGradsLike(t, wantG, gotG, placed, 1e-5, 1e-6)
}

// TestBlocksOfPartialSum: Blocks of a partial-sum result hold the value
// (each device's block of the sum), not the summands, so checkpoints and
// other readers of blocks never see pending sums.
func TestBlocksOfPartialSum(t *testing.T) {
	m := guideMesh()
	r := rand.New(rand.NewPCG(4, 4))
	ah, bh := randT(r, 4, 8), randT(r, 8, 2)
	a := shard.Put(ah, shard.NewSharding(m, shard.P(nil, "dp")))
	b := shard.Put(bh, shard.NewSharding(m, shard.P("dp", nil)))
	y := tensor.MatMul(a, b) // contracting dim sharded on both sides: partial over dp
	want := tensor.MatMul(ah, bh)
	for _, blk := range shard.Blocks(y) {
		if blk == nil {
			continue // another process's device (under mpirun)
		}
		requireClose(t, want, blk, 1e-5, "block")
	}
}
