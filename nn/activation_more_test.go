package nn_test

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/autodiff"
	"github.com/gonox/gonox/nn"
	"github.com/gonox/gonox/tensor"
)

const (
	seluAlpha = 1.6732632423543772848170429916717
	seluScale = 1.0507009873554804934193349852946
)

func sigmoid64(x float64) float64 { return 1 / (1 + math.Exp(-x)) }
func relu6x(x float64) float64    { return math.Min(math.Max(x, 0), 6) }

// The activations against their jax.nn definitions in float64, and their
// gradients against finite differences.
func TestMoreActivations(t *testing.T) {
	cases := []struct {
		name string
		act  nn.Activation
		ref  func(float64) float64
	}{
		{"LeakyRelu", nn.LeakyRelu, func(x float64) float64 { return map[bool]float64{true: x, false: 0.01 * x}[x >= 0] }},
		{"LeakyReluWith", nn.LeakyReluWith(0.2), func(x float64) float64 { return map[bool]float64{true: x, false: 0.2 * x}[x >= 0] }},
		{"Elu", nn.Elu, func(x float64) float64 { return map[bool]float64{true: x, false: math.Expm1(x)}[x > 0] }},
		{"EluWith", nn.EluWith(0.5), func(x float64) float64 { return map[bool]float64{true: x, false: 0.5 * math.Expm1(x)}[x > 0] }},
		{"Selu", nn.Selu, func(x float64) float64 {
			return seluScale * map[bool]float64{true: x, false: seluAlpha * math.Expm1(x)}[x > 0]
		}},
		{"Celu", nn.Celu, func(x float64) float64 { return map[bool]float64{true: x, false: math.Expm1(x)}[x > 0] }},
		{"CeluWith", nn.CeluWith(2), func(x float64) float64 { return map[bool]float64{true: x, false: 2 * math.Expm1(x/2)}[x > 0] }},
		{"Mish", nn.Mish, func(x float64) float64 { return x * math.Tanh(math.Log1p(math.Exp(x))) }},
		{"Relu6", nn.Relu6, relu6x},
		{"HardTanh", nn.HardTanh, func(x float64) float64 { return math.Min(math.Max(x, -1), 1) }},
		{"HardSigmoid", nn.HardSigmoid, func(x float64) float64 { return relu6x(x+3) / 6 }},
		{"HardSwish", nn.HardSwish, func(x float64) float64 { return x * relu6x(x+3) / 6 }},
		{"Softsign", nn.Softsign, func(x float64) float64 { return x / (math.Abs(x) + 1) }},
		{"HardShrink", nn.HardShrink, func(x float64) float64 { return map[bool]float64{true: x, false: 0}[math.Abs(x) > 0.5] }},
		{"HardShrinkWith", nn.HardShrinkWith(2), func(x float64) float64 { return map[bool]float64{true: x, false: 0}[math.Abs(x) > 2] }},
		{"SoftShrink", nn.SoftShrink, func(x float64) float64 { return math.Copysign(math.Max(math.Abs(x)-0.5, 0), x) }},
		{"SoftShrinkWith", nn.SoftShrinkWith(2), func(x float64) float64 { return math.Copysign(math.Max(math.Abs(x)-2, 0), x) }},
		{"TanhShrink", nn.TanhShrink, func(x float64) float64 { return x - math.Tanh(x) }},
		{"Threshold", nn.Threshold(0.2, -1.5), func(x float64) float64 { return map[bool]float64{true: x, false: -1.5}[x > 0.2] }},
	}
	// Inputs on both sides of every kink, and in the clipped tails.
	in := []float32{-8, -3.5, -2.7, -1.3, -0.6, -0.1, 0.05, 0.4, 0.9, 1.7, 2.9, 3.3, 5.5, 6.6, 9}
	x := tensor.FromFloat32(in, 3, 5)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := c.act(x).Float64s()
			for i, v := range in {
				assert.InDelta(t, c.ref(float64(v)), got[i], 1e-6*max(1, math.Abs(float64(v))), "x=%v", v)
			}
			checkGrad(t, func(xs []*tensor.Tensor) *tensor.Tensor { return c.act(xs[0]) }, x)
			// bfloat16 in, bfloat16 out.
			assert.Equal(t, tensor.BFloat16, c.act(tensor.Convert(x, tensor.BFloat16)).DType())
		})
	}
}

// The gradients at the kinks are JAX's: leaky_relu and hard_tanh pass the
// cotangent at 0 and ±1; relu6 (a custom JVP in JAX) blocks it at 0 and
// 6; elu at 0 takes the negative side's derivative alpha·e^0.
func TestActivationKinkGradients(t *testing.T) {
	at := func(act nn.Activation, xs ...float32) []float32 {
		x := tensor.FromFloat32(xs)
		return autodiff.Grad(func(x *tensor.Tensor) *tensor.Tensor { return tensor.Sum(act(x)) })(x).Float32s()
	}
	assert.Equal(t, []float32{1, 0.01}, at(nn.LeakyRelu, 0, -1))
	assert.Equal(t, []float32{0, 1, 0, 0}, at(nn.Relu6, 0, 3, 6, 7))
	assert.Equal(t, []float32{1, 1, 0}, at(nn.HardTanh, -1, 1, 1.5))
	assert.Equal(t, []float32{0.5, 1}, at(nn.EluWith(0.5), 0, 1))
	assert.Equal(t, []float32{0, 1.0 / 6, 0}, at(nn.HardSigmoid, -3, 0, 3))
}

func TestGlu(t *testing.T) {
	x := randn(1, 2, 6)
	got := nn.Glu(x)
	require.Equal(t, []int{2, 3}, got.Shape())
	v, g := x.Float64s(), got.Float64s()
	for r := range 2 {
		for j := range 3 {
			assert.InDelta(t, v[r*6+j]*sigmoid64(v[r*6+3+j]), g[r*3+j], 1e-6)
		}
	}
	y := nn.GluAxis(0)(x)
	require.Equal(t, []int{1, 6}, y.Shape())
	for j := range 6 {
		assert.InDelta(t, v[j]*sigmoid64(v[6+j]), y.Float64s()[j], 1e-6)
	}
	checkGrad(t, func(xs []*tensor.Tensor) *tensor.Tensor { return nn.Glu(xs[0]) }, x)
	requirePanicContains(t, func() { nn.Glu(randn(2, 2, 5)) }, "nn.Glu: x f32[2,5], axis -1: the axis must exist and have an even size")
}

func TestActivationNames(t *testing.T) {
	for want, a := range map[string]nn.Activation{
		"LeakyRelu": nn.LeakyRelu, "Elu": nn.Elu, "Selu": nn.Selu, "Celu": nn.Celu, "Mish": nn.Mish,
		"Relu6": nn.Relu6, "HardTanh": nn.HardTanh, "HardSigmoid": nn.HardSigmoid, "HardSwish": nn.HardSwish,
		"Softsign": nn.Softsign, "Glu": nn.Glu,
	} {
		assert.Equal(t, want, a.String())
		_, fused := a.Fused()
		assert.False(t, fused)
	}
	assert.Equal(t, "func", nn.LeakyReluWith(0.1).String())
}

// PReLU: x where x >= 0, slope·x elsewhere, with a learnt slope (a scalar
// or one per channel) that gets its gradient Σ x over the negative inputs.
func TestPReLU(t *testing.T) {
	p := nn.NewPReLU(0.25)
	assert.Equal(t, 0, p.NegativeSlope.Rank())
	x := tensor.FromFloat32([]float32{-2, -1, 0, 3, -4, 5}, 2, 3)
	assert.Equal(t, []float32{-0.5, -0.25, 0, 3, -1, 5}, p.Forward(x).Float32s())
	g := autodiff.Grad(func(p nn.PReLU) *tensor.Tensor { return tensor.Sum(p.Forward(x)) })(p)
	assert.Equal(t, []float32{-7}, g.NegativeSlope.Float32s())

	pc := nn.NewPReLU(0.1, 3)
	pc.NegativeSlope = tensor.FromFloat32([]float32{0.1, 0.2, 0.3})
	assert.InDeltaSlice(t, []float64{-0.2, -0.2, 0, 3, -0.8, 5}, pc.Forward(x).Float64s(), 1e-7)
	gc := autodiff.Grad(func(p nn.PReLU) *tensor.Tensor { return tensor.Sum(p.Call(x, tensor.NewKey(0))) })(pc)
	assert.Equal(t, []float32{-2, -5, 0}, gc.NegativeSlope.Float32s())
	requirePanicContains(t, func() { nn.PReLU{}.Forward(x) }, "nn.PReLU: NegativeSlope is nil (use NewPReLU)")
}
