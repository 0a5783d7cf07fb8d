package nn_test

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/autodiff"
	"github.com/gonox/gonox/nn"
	"github.com/gonox/gonox/pytree"
	"github.com/gonox/gonox/tensor"
)

func TestSequentialForward(t *testing.T) {
	k := tensor.NewKey(0)
	ks := k.Split(4)
	lin1 := nn.NewLinear(ks[0], 3, 8, nn.LinearOptions{})
	drop := nn.NewDropout(0.5)
	norm := nn.NewLayerNorm(8, nn.LayerNormOptions{})
	lin2 := nn.NewLinear(ks[1], 8, 2, nn.LinearOptions{})
	seq := nn.NewSequential(lin1, nn.Gelu, drop, norm, lin2)
	x := randn(1, 4, 3)
	key := tensor.NewKey(99)
	// Equinox semantics: the key is split into one key per layer.
	keys := key.Split(5)
	want := lin2.Forward(norm.Forward(drop.Forward(tensor.Gelu(lin1.Forward(x)), keys[2])))
	assert.Equal(t, want.Float32s(), seq.Forward(x, key).Float32s())
	assert.Equal(t, want.Float32s(), seq.Call(x, key).Float32s())
	// Nested Sequentials are Modules too; the empty one is the identity.
	outer := nn.NewSequential(seq, nn.Sequential{})
	assert.Equal(t, seq.Forward(x, key.Split(2)[0]).Float32s(), outer.Forward(x, key).Float32s())
	assert.Same(t, x, nn.Sequential{}.Forward(x, key))
	requirePanicContains(t, func() { nn.NewSequential(lin1, nil) }, "nn.NewSequential: layer 1 is nil")
}

func TestSequentialIsAPytree(t *testing.T) {
	k := tensor.NewKey(0).Split(2)
	seq := nn.NewSequential(nn.NewLinear(k[0], 3, 4, nn.LinearOptions{}), nn.Relu, nn.NewRMSNorm(4, nn.RMSNormOptions{}), nn.NewLinear(k[1], 4, 1, nn.LinearOptions{NoBias: true}))
	paths := pytree.Paths(seq)
	var names []string
	for _, p := range paths {
		names = append(names, p.String())
	}
	assert.Equal(t, []string{"Layers[0].W", "Layers[0].B", "Layers[2].Weight", "Layers[3].W"}, names)
	x := randn(2, 5, 3)
	y := randn(3, 5, 1)
	loss, g := autodiff.ValueAndGradWith(func(s nn.Sequential, x *tensor.Tensor) *tensor.Tensor {
		return tensor.MSE(s.Forward(x, tensor.NewKey(0)), y)
	})(seq, x)
	assert.Equal(t, 0, loss.Rank())
	require.IsType(t, nn.Linear{}, g.Layers[0])
	assert.Equal(t, []int{3, 4}, g.Layers[0].(nn.Linear).W.Shape())
	assert.Equal(t, "Relu", g.Layers[1].(nn.Activation).String(), "static layers come back as they were")
	assert.Nil(t, g.Layers[3].(nn.Linear).B)
	// The gradient matches one computed by hand with CheckGrad's help.
	checkGrad(t, func(xs []*tensor.Tensor) *tensor.Tensor {
		s := nn.NewSequential(nn.Linear{W: xs[0], B: xs[1]}, nn.Relu, nn.RMSNorm{Weight: xs[2], Eps: 1e-5}, nn.Linear{W: xs[3]})
		return tensor.MSE(s.Forward(x, tensor.NewKey(0)), y)
	}, pytree.Leaves(seq)...)
}

func TestActivations(t *testing.T) {
	x := tensor.FromFloat32([]float32{-2, -0.5, 0, 0.5, 2})
	sigmoid := func(v float64) float64 { return 1 / (1 + math.Exp(-v)) }
	cases := []struct {
		name string
		f    nn.Activation
		tf   func(*tensor.Tensor) *tensor.Tensor // the tensor function it wraps
		ref  func(float64) float64               // jax.nn's formula, in float64
	}{
		{"Relu", nn.Relu, tensor.Relu, func(v float64) float64 { return math.Max(v, 0) }},
		{"Gelu", nn.Gelu, tensor.Gelu, func(v float64) float64 {
			return 0.5 * v * (1 + math.Tanh(math.Sqrt(2/math.Pi)*(v+0.044715*v*v*v)))
		}},
		{"GeluExact", nn.GeluExact, tensor.GeluExact, func(v float64) float64 { return 0.5 * v * (1 + math.Erf(v/math.Sqrt2)) }},
		{"Silu", nn.Silu, tensor.Silu, func(v float64) float64 { return v * sigmoid(v) }},
		{"Tanh", nn.Tanh, tensor.Tanh, math.Tanh},
		{"Sigmoid", nn.Sigmoid, tensor.Sigmoid, sigmoid},
		{"Softplus", nn.Softplus, tensor.Softplus, func(v float64) float64 { return math.Log1p(math.Exp(v)) }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			want := make([]float64, x.Size())
			for i, v := range x.Float64s() {
				want[i] = c.ref(v)
			}
			assert.InDeltaSlice(t, want, c.f(x).Float64s(), 1e-6)
			assert.InDeltaSlice(t, want, c.f.Call(x, tensor.NewKey(0)).Float64s(), 1e-6)
			assert.Equal(t, c.name, c.f.String())
			// Whatever variable holds it, an activation keeps its name.
			assert.Equal(t, c.name, nn.Activation(c.tf).String())
		})
	}
	// The two GELUs differ: a swapped pair would fail above, and here.
	assert.NotEqual(t, nn.Gelu(x).Float32s(), nn.GeluExact(x).Float32s())
	assert.Same(t, x, nn.Identity(x))
	assert.Equal(t, "Identity", nn.Identity.String())
	assert.Equal(t, "nn_test.myActivation", nn.Activation(myActivation).String())
	assert.Equal(t, "func", nn.Activation(func(x *tensor.Tensor) *tensor.Tensor { return x }).String())
	assert.Equal(t, "nil", nn.Activation(nil).String())
	// Hand values for the piecewise one.
	assert.Equal(t, []float32{0, 0, 0, 0.5, 2}, nn.Relu(x).Float32s())
}

func myActivation(x *tensor.Tensor) *tensor.Tensor { return tensor.Mul(x, x) }
