package tensor

import (
	"math"
	"math/rand/v2"
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
			continue // composed: bias_act keeps its input
		}
		tr := NewTrace()
		y := fused([]*Tensor{tr.Leaf(in[0]), tr.Leaf(in[1]), tr.Leaf(in[2])})
		rep := Residuals(y)
		require.LessOrEqual(t, rep.Bytes, in[0].Bytes()+in[1].Bytes()+y.Bytes(), "%v: residuals %+v", act, rep.ResidualStat)
	}
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
