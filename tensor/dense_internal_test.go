package tensor

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

// dense equals MatMul then BiasAct bit for bit, values and gradients, for
// every activation it fuses and one it composes (GELU), and keeps no more
// than x, w and its output where it fuses.
func TestDenseMatchesComposition(t *testing.T) {
	rng := rand.New(rand.NewPCG(86, 1))
	in := []*Tensor{randTensor(rng, 16, 40), randTensor(rng, 40, 24), randTensor(rng, 24)}
	for _, act := range []Activation{ActRelu, ActTanh, ActSigmoid, ActIdentity, ActGelu} {
		denseMatchesComposition(t, rng, in, act)
	}
	// One row, one output (outer products in the VJP: the general path),
	// one input column.
	for _, mkn := range [][3]int{{1, 7, 5}, {6, 7, 1}, {5, 1, 3}} {
		m, k, n := mkn[0], mkn[1], mkn[2]
		denseMatchesComposition(t, rng, []*Tensor{randTensor(rng, m, k), randTensor(rng, k, n), randTensor(rng, n)}, ActRelu)
	}
	// Gradients of some operands only: the others are constants.
	for _, wrt := range [][]bool{{false, true, true}, {true, false, false}, {false, false, true}, {false, true, false}} {
		ref := func(x []*Tensor) *Tensor { return BiasAct(MatMul(x[0], x[1]), x[2], ActRelu) }
		fused := func(x []*Tensor) *Tensor { return MatMulBiasAct(x[0], x[1], x[2], ActRelu) }
		g := randTensor(rng, 16, 24)
		grads := func(f func([]*Tensor) *Tensor) []*Tensor {
			tr := NewTrace()
			args, leaves := slices.Clone(in), []*Tensor{}
			for i, w := range wrt {
				if w {
					args[i] = tr.Leaf(in[i])
					leaves = append(leaves, args[i])
				}
			}
			return Backward(tr, []*Tensor{f(args)}, []*Tensor{g}, leaves, false)
		}
		gw, gg := grads(ref), grads(fused)
		for i := range gw {
			require.Equal(t, gw[i].f32(), gg[i].f32(), "wrt %v: gradient %d", wrt, i)
		}
	}
}

// denseMatchesComposition checks MatMulBiasAct's value, gradients and
// residuals against the composition's for the operands in and act.
func denseMatchesComposition(t *testing.T, rng *rand.Rand, in []*Tensor, act Activation) {
	t.Helper()
	fused := func(x []*Tensor) *Tensor { return MatMulBiasAct(x[0], x[1], x[2], act) }
	ref := func(x []*Tensor) *Tensor { return BiasAct(MatMul(x[0], x[1]), x[2], act) }
	want, got := ref(in), fused(in)
	require.Equal(t, want.f32(), got.f32(), "%v: value", act)
	g := randTensor(rng, want.shape...)
	gw, gg := vjpAll(ref, g, in...), vjpAll(fused, g, in...)
	for i := range gw {
		require.Equal(t, gw[i].f32(), gg[i].f32(), "%v: gradient %d", act, i)
	}
	if act.fromInput() {
		return // composed: bias_act keeps its input
	}
	tr := NewTrace()
	y := fused([]*Tensor{tr.Leaf(in[0]), tr.Leaf(in[1]), tr.Leaf(in[2])})
	rep := Residuals(y)
	require.LessOrEqual(t, rep.Bytes, in[0].Bytes()+in[1].Bytes()+y.Bytes(), "%v: residuals %+v", act, rep.ResidualStat)
}

// The bias gradient summed in the VJP (biasGrad) is Sum's over the
// leading axes, bit for bit, and the sum of a float64 reference within
// float32 rounding.
func TestBiasGradMatchesSum(t *testing.T) {
	rng := rand.New(rand.NewPCG(87, 1))
	for _, shape := range [][]int{{16, 128}, {3, 5, 7}, {1, 4}, {0, 3}} {
		gz := randTensor(rng, shape...)
		n := shape[len(shape)-1]
		b := randTensor(rng, n)
		got := biasGrad(gz, b)
		require.Equal(t, []int{n}, got.shape)
		require.Equal(t, unbroadcast(gz, b.shape).f32(), got.f32(), "%v", shape)
		for j := range n {
			ref := 0.0
			for i := j; i < len(gz.f32()); i += n {
				ref += float64(gz.f32()[i])
			}
			require.InDelta(t, ref, float64(got.f32()[j]), 1e-6*(1+math.Abs(ref)), "%v column %d", shape, j)
		}
	}
}
