package autodiff_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/autodiff"
	"github.com/gonox/gonox/tensor"
)

// scaledCube returns x³ with its derivative multiplied by k, in the dtype
// of x (k = 1: the true derivative).
func scaledCube(k float64) func(*tensor.Tensor) *tensor.Tensor {
	return autodiff.CustomVJP("scaled_cube",
		func(x *tensor.Tensor) (*tensor.Tensor, *tensor.Tensor) { return tensor.Mul(tensor.Square(x), x), x },
		func(x, g *tensor.Tensor) *tensor.Tensor {
			c := tensor.Convert(tensor.ScalarFloat64(3*k), x.DType())
			return tensor.Mul(g, tensor.Mul(tensor.Square(x), c))
		})
}

// CheckGrad in float64: a network's gradient passes the tight default
// tolerances, and a derivative wrong by one part in 10⁶, which float32's
// tolerances cannot see, is reported.
func TestCheckGradFloat64(t *testing.T) {
	k := tensor.NewKey(1)
	ks := k.Split(3)
	x := tensor.NormalFloat64(ks[0], 4, 5)
	w := tensor.NormalFloat64(ks[1], 5, 3)
	b := tensor.NormalFloat64(ks[2], 3)
	mlp := func(xs []*tensor.Tensor) *tensor.Tensor {
		h := tensor.Tanh(tensor.Add(tensor.MatMul(xs[0], xs[1]), xs[2]))
		return tensor.Mean(tensor.Softmax(tensor.Mul(h, h), -1))
	}
	require.NoError(t, autodiff.CheckGrad(mlp, []*tensor.Tensor{x, w, b}, autodiff.CheckOptions{}))
	loss := func(xs []*tensor.Tensor) *tensor.Tensor {
		return tensor.SoftmaxCrossEntropy(tensor.MatMul(xs[0], xs[1]), tensor.FromInts([]int{0, 2, 1, 1}))
	}
	require.NoError(t, autodiff.CheckGrad(loss, []*tensor.Tensor{x, w}, autodiff.CheckOptions{}))

	v := tensor.FromFloat64s([]float64{0.7, -1.3, 1.1})
	cube := func(f func(*tensor.Tensor) *tensor.Tensor) func([]*tensor.Tensor) *tensor.Tensor {
		return func(xs []*tensor.Tensor) *tensor.Tensor { return tensor.Sum(f(xs[0])) }
	}
	assert.NoError(t, autodiff.CheckGrad(cube(scaledCube(1)), []*tensor.Tensor{v}, autodiff.CheckOptions{}))
	err := autodiff.CheckGrad(cube(scaledCube(1+1e-6)), []*tensor.Tensor{v}, autodiff.CheckOptions{})
	require.Error(t, err, "a derivative off by 1e-6 in float64")
	assert.Contains(t, err.Error(), "input 0 (f64[3]) element 0")
	v32 := tensor.Convert(v, tensor.Float32)
	assert.NoError(t, autodiff.CheckGrad(cube(scaledCube(1+1e-6)), []*tensor.Tensor{v32}, autodiff.CheckOptions{}),
		"float32's tolerances cannot see 1e-6")
}

// ValueAndGrad of a float64 loss gives float64 gradients, equal to the
// hand-derived ones.
func TestValueAndGradFloat64(t *testing.T) {
	type model struct{ W, B *tensor.Tensor }
	m := model{W: tensor.FromFloat64s([]float64{0.5, -1.25}, 2), B: tensor.ScalarFloat64(0.1)}
	x := tensor.FromFloat64s([]float64{1, 2, 3, 4}, 2, 2)
	loss := func(m model) *tensor.Tensor {
		return tensor.Sum(tensor.Square(tensor.Add(tensor.MatMul(x, m.W), m.B)))
	}
	v, g := autodiff.ValueAndGrad(loss)(m)
	// r = x·W + B = [-1.9, -3.4]; loss = Σr²; dW = 2·xᵀr, dB = 2·Σr.
	r := []float64{1*0.5 - 2*1.25 + 0.1, 3*0.5 - 4*1.25 + 0.1}
	assert.InDelta(t, r[0]*r[0]+r[1]*r[1], v.Item(), 1e-15)
	require.Equal(t, tensor.Float64, g.W.DType())
	assert.InDeltaSlice(t, []float64{2 * (r[0] + 3*r[1]), 2 * (2*r[0] + 4*r[1])}, g.W.Float64s(), 1e-14)
	assert.InDelta(t, 2*(r[0]+r[1]), g.B.Item(), 1e-14)
}

// Vmap of a float64 function and of its gradient (per-example gradients)
// equal loops over the examples, and JVP equals the float64 VJP's
// transpose.
func TestVmapAndJVPFloat64(t *testing.T) {
	k := tensor.NewKey(11).Split(2)
	w := tensor.NormalFloat64(k[0], 3, 2)
	xs := tensor.NormalFloat64(k[1], 4, 3)
	loss := func(w, x *tensor.Tensor) *tensor.Tensor {
		return tensor.Sum(tensor.Tanh(tensor.MatMul(x, w)))
	}
	per := autodiff.Vmap2(autodiff.GradWith(loss), autodiff.InAxes(autodiff.None, autodiff.Axis(0)))(w, xs)
	require.Equal(t, tensor.Float64, per.DType())
	require.Equal(t, []int{4, 3, 2}, per.Shape())
	for i := range 4 {
		x := tensor.Squeeze(tensor.SliceAxis(xs, 0, i, i+1), 0)
		g := autodiff.GradWith(loss)(w, x)
		assert.InDeltaSlice(t, g.Float64s(), tensor.Squeeze(tensor.SliceAxis(per, 0, i, i+1), 0).Float64s(), 1e-14, "example %d", i)
	}

	v := tensor.NormalFloat64(tensor.NewKey(12), 3, 2)
	f := func(w *tensor.Tensor) *tensor.Tensor { return loss(w, xs) }
	_, jv := autodiff.JVP(f, w, v)
	g := autodiff.Grad(f)(w)
	dot := 0.0
	for i, e := range g.Float64s() {
		dot += e * v.Float64s()[i]
	}
	require.Equal(t, tensor.Float64, jv.DType())
	assert.InDelta(t, dot, jv.Item(), 1e-13, "<∇f, v> = JVP")
}
