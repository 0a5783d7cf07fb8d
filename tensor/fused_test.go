package tensor_test

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/tensor"
)

var activations = []struct {
	act tensor.Activation
	f   func(*tensor.Tensor) *tensor.Tensor
}{
	{tensor.ActIdentity, func(x *tensor.Tensor) *tensor.Tensor { return x }},
	{tensor.ActRelu, tensor.Relu},
	{tensor.ActGelu, tensor.Gelu},
	{tensor.ActGeluExact, tensor.GeluExact},
	{tensor.ActSilu, tensor.Silu},
	{tensor.ActTanh, tensor.Tanh},
	{tensor.ActSigmoid, tensor.Sigmoid},
}

func requireSameBits(t *testing.T, want, got *tensor.Tensor, msg string) {
	t.Helper()
	require.Equal(t, want.Shape(), got.Shape(), msg)
	w, g := want.Float32s(), got.Float32s()
	for i := range w {
		if math.IsNaN(float64(w[i])) && math.IsNaN(float64(g[i])) {
			continue
		}
		require.Equal(t, math.Float32bits(w[i]), math.Float32bits(g[i]), "%s: element %d: want %v, got %v", msg, i, w[i], g[i])
	}
}

// BiasAct returns exactly the values and gradients of act(Add(x, b)).
func TestBiasActEqualsComposition(t *testing.T) {
	rng := newRNG(40)
	for _, shape := range [][]int{{5}, {3, 7}, {2, 3, 17}, {4, 0}} {
		x := randF32(rng, shape...)
		b := randF32(rng, shape[len(shape)-1])
		g := randF32(rng, shape...)
		for _, a := range activations {
			name := a.act.String() + shapeName(shape)
			fused := func(xs []*tensor.Tensor) *tensor.Tensor { return tensor.BiasAct(xs[0], xs[1], a.act) }
			plain := func(xs []*tensor.Tensor) *tensor.Tensor { return a.f(tensor.Add(xs[0], xs[1])) }
			requireSameBits(t, plain(ts(x, b)), fused(ts(x, b)), name)
			vjp := func(f func([]*tensor.Tensor) *tensor.Tensor) []*tensor.Tensor {
				tr, l := traceLeaves(x, b)
				return tensor.Backward(tr, ts(f(l)), ts(g), l, false)
			}
			gp, gf := vjp(plain), vjp(fused)
			requireSameBits(t, gp[0], gf[0], name+" dx")
			requireSameBits(t, gp[1], gf[1], name+" db")
		}
	}
}

func TestBiasActGrad(t *testing.T) {
	rng := newRNG(41)
	x, b := randF32(rng, 3, 5), randF32(rng, 5)
	for _, a := range activations {
		f := func(xs []*tensor.Tensor) *tensor.Tensor { return tensor.BiasAct(xs[0], xs[1], a.act) }
		if a.act == tensor.ActRelu {
			// Away from the kink.
			x = awayFrom(42, -2, 2, ptrF(0), 0.05, 3, 5)
			b = tensor.Zeros(tensor.Float32, 5)
		}
		checkGrad(t, f, ts(x, b), autodiffOpts(1e-3, 0, 0))
		// Second derivatives through the fused backward primitives.
		if a.act != tensor.ActRelu && a.act != tensor.ActIdentity {
			checkGrad(t, gradOf(f, 0), ts(x, b), autodiffOpts(1e-3, 0, 0))
			checkGrad(t, gradOf(f, 1), ts(x, b), autodiffOpts(1e-3, 0, 0))
		}
	}
}

func TestBiasActResiduals(t *testing.T) {
	x, b := tensor.Zeros(tensor.Float32, 4, 8), tensor.Zeros(tensor.Float32, 8)
	for _, c := range []struct {
		act   tensor.Activation
		count int
		bytes int
	}{
		{tensor.ActIdentity, 0, 0},
		{tensor.ActRelu, 1, 4 * 32},          // the output
		{tensor.ActTanh, 1, 4 * 32},          // the output
		{tensor.ActGelu, 2, 4*32 + 4*8},      // x and b
		{tensor.ActSilu, 2, 4*32 + 4*8},      // x and b
		{tensor.ActSigmoid, 1, 4 * 32},       // the output
		{tensor.ActGeluExact, 2, 4*32 + 4*8}, // x and b
	} {
		_, l := traceLeaves(x, b)
		y := tensor.BiasAct(l[0], l[1], c.act)
		rep := tensor.Residuals(y)
		st := rep.ResidualStat
		require.Equal(t, c.count, st.Count, c.act.String())
		require.Equal(t, int64(c.bytes), int64(st.Bytes), c.act.String())
	}
}

func TestBiasActPanics(t *testing.T) {
	x := tensor.Zeros(tensor.Float32, 2, 3)
	requirePanic(t, "tensor.BiasAct: f32[2,3], f32[2]: the bias must be a vector as long as the last dimension of x",
		func() { tensor.BiasAct(x, tensor.Zeros(tensor.Float32, 2), tensor.ActRelu) })
	requirePanic(t, "tensor.BiasAct: f32[2,3], i32[3]: operands must be float32",
		func() { tensor.BiasAct(x, tensor.Zeros(tensor.Int32, 3), tensor.ActRelu) })
	requirePanic(t, "tensor.BiasAct: f32[2,3], f32[3]: unknown activation Activation(99)",
		func() { tensor.BiasAct(x, tensor.Zeros(tensor.Float32, 3), 99) })
	requirePanic(t, "tensor.BiasAct: f32[], f32[1]: the bias must be a vector as long as the last dimension of x",
		func() { tensor.BiasAct(tensor.Scalar(1), tensor.Zeros(tensor.Float32, 1), tensor.ActRelu) })
	require.Equal(t, "gelu", tensor.ActGelu.String())
}

// The fused MSE returns exactly the bits of Mean(Square(Sub)) and of its
// gradients.
func TestMSEEqualsComposition(t *testing.T) {
	rng := newRNG(43)
	for _, shape := range [][]int{{}, {7}, {16, 4}, {3, 70000}, {2, 3, 1, 2, 5}} {
		p, y := randF32(rng, shape...), randF32(rng, shape...)
		fused := func(xs []*tensor.Tensor) *tensor.Tensor { return tensor.MSE(xs[0], xs[1]) }
		plain := func(xs []*tensor.Tensor) *tensor.Tensor {
			return tensor.Mean(tensor.Square(tensor.Sub(xs[0], xs[1])))
		}
		requireSameBits(t, plain(ts(p, y)), fused(ts(p, y)), "forward")
		gp, gf := grad(plain, ts(p, y)), grad(fused, ts(p, y))
		requireSameBits(t, gp[0], gf[0], "d/dpred")
		requireSameBits(t, gp[1], gf[1], "d/dtarget")
		// The prediction's gradient alone (a constant target: its
		// cotangent is not computed).
		predOnly := func(f func([]*tensor.Tensor) *tensor.Tensor) *tensor.Tensor {
			tr := tensor.NewTrace()
			lp := tr.Leaf(p)
			out := f(ts(lp, y))
			return tensor.Backward(tr, ts(out), ts(tensor.OnesLike(out)), ts(lp), false)[0]
		}
		requireSameBits(t, predOnly(plain), predOnly(fused), "d/dpred alone")
	}
	rng2 := newRNG(44)
	p, y := randF32(rng2, 3, 4), randF32(rng2, 3, 4)
	f := func(xs []*tensor.Tensor) *tensor.Tensor { return tensor.MSE(xs[0], xs[1]) }
	checkGrad(t, f, ts(p, y))
	checkGrad(t, gradOf(f, 0), ts(p, y), autodiffOpts(1e-3, 0, 0))
	checkGrad(t, gradOf(f, 1), ts(p, y), autodiffOpts(1e-3, 0, 0))
	require.True(t, math.IsNaN(tensor.MSE(tensor.Zeros(tensor.Float32, 0), tensor.Zeros(tensor.Float32, 0)).Item()))
}
