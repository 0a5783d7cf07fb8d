package tensor_test

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/tensor"
)

func sigmoid64(x float64) float64 { return 1 / (1 + math.Exp(-x)) }

// geluTanh64 is 0.5·x·(1 + tanh u), u = √(2/π)·(x + 0.044715x³), written
// as x·σ(2u) = x/(1+e^-2u), which does not cancel for negative x.
func geluTanh64(x float64) float64 {
	return x / (1 + math.Exp(-2*math.Sqrt(2/math.Pi)*(x+0.044715*x*x*x)))
}

func geluExact64(x float64) float64 { return 0.5 * x * (1 + math.Erf(x/math.Sqrt2)) }

type unaryCase struct {
	name string
	f    func(*tensor.Tensor) *tensor.Tensor
	ref  func(float64) float64
	// domain of the random inputs used for values and gradients
	lo, hi float64
	// rtol of the float32 result against the float64 reference
	rtol float64
	// int: also defined for int32, with this reference
	refInt func(int32) int32
	// kink: a point where the function is not differentiable (avoided by
	// CheckGrad inputs)
	kink *float64
	// diff: has a VJP
	diff bool
}

func ptrF(v float64) *float64 { return &v }

var unaryCases = []unaryCase{
	{name: "Neg", f: tensor.Neg, ref: func(x float64) float64 { return -x }, lo: -3, hi: 3, refInt: func(x int32) int32 { return -x }, diff: true},
	{name: "Abs", f: tensor.Abs, ref: math.Abs, lo: -3, hi: 3, refInt: func(x int32) int32 {
		if x < 0 {
			return -x
		}
		return x
	}, kink: ptrF(0), diff: true},
	{name: "Sign", f: tensor.Sign, ref: func(x float64) float64 {
		switch {
		case x > 0:
			return 1
		case x < 0:
			return -1
		}
		return x
	}, lo: -3, hi: 3, refInt: func(x int32) int32 {
		switch {
		case x > 0:
			return 1
		case x < 0:
			return -1
		}
		return 0
	}},
	{name: "Exp", f: tensor.Exp, ref: math.Exp, lo: -5, hi: 5, rtol: 1e-7, diff: true},
	{name: "Log", f: tensor.Log, ref: math.Log, lo: 0.1, hi: 10, rtol: 1e-7, diff: true},
	{name: "Sqrt", f: tensor.Sqrt, ref: math.Sqrt, lo: 0.1, hi: 10, diff: true},
	{name: "Rsqrt", f: tensor.Rsqrt, ref: func(x float64) float64 { return 1 / math.Sqrt(x) }, lo: 0.1, hi: 10, rtol: 1e-7, diff: true},
	{name: "Square", f: tensor.Square, ref: func(x float64) float64 { return x * x }, lo: -3, hi: 3, refInt: func(x int32) int32 { return x * x }, diff: true},
	{name: "Tanh", f: tensor.Tanh, ref: math.Tanh, lo: -4, hi: 4, rtol: 1e-7, diff: true},
	{name: "Sigmoid", f: tensor.Sigmoid, ref: sigmoid64, lo: -8, hi: 8, rtol: 3e-7, diff: true},
	{name: "Relu", f: tensor.Relu, ref: func(x float64) float64 { return math.Max(x, 0) }, lo: -3, hi: 3, kink: ptrF(0), diff: true},
	{name: "Silu", f: tensor.Silu, ref: func(x float64) float64 { return x * sigmoid64(x) }, lo: -6, hi: 6, rtol: 2e-7, diff: true},
	// The fast float32 GELU is within 3 ulp for x >= -1; below, the
	// float32 argument of its sigmoid carries a relative error of a few
	// 2^-24, which the tail amplifies (see package vec).
	{name: "Gelu", f: tensor.Gelu, ref: geluTanh64, lo: -5, hi: 5, rtol: 5e-6, diff: true},
	{name: "GeluExact", f: tensor.GeluExact, ref: geluExact64, lo: -5, hi: 5, rtol: 4e-7, diff: true},
	{name: "Clamp", f: func(x *tensor.Tensor) *tensor.Tensor { return tensor.Clamp(x, -1, 0.5) },
		ref: func(x float64) float64 { return math.Min(math.Max(x, -1), 0.5) }, lo: -3, hi: 3, diff: true},
}

// awayFrom returns a float tensor in [lo, hi) with no element within gap of
// the kink.
func awayFrom(seed uint64, lo, hi float64, kink *float64, gap float64, shape ...int) *tensor.Tensor {
	rng := newRNG(seed)
	d := make([]float32, numel(shape))
	for i := range d {
		for {
			v := lo + rng.Float64()*(hi-lo)
			if kink == nil || math.Abs(v-*kink) > gap {
				d[i] = float32(v)
				break
			}
		}
	}
	return tensor.FromFloat32(d, shape...)
}

func TestUnaryFloat(t *testing.T) {
	shapes := [][]int{{}, {0}, {7}, {3, 4}, {2, 0, 3}, {2, 3, 5}}
	for _, c := range unaryCases {
		for i, shape := range shapes {
			t.Run(c.name+shapeName(shape), func(t *testing.T) {
				x := randRange(newRNG(uint64(i)), c.lo, c.hi, shape...)
				before := snapshot(x)
				got := c.f(x)
				want := make([]float64, x.Size())
				for j, v := range x.Float64s() {
					want[j] = c.ref(v)
				}
				require.Equal(t, tensor.Float32, got.DType())
				require.Equal(t, x.Shape(), got.Shape())
				requireClose(t, want, got, 1e-30, max(c.rtol, 6e-8))
				requireUnchanged(t, before)
				assert.False(t, sharesStorage(got, x))
			})
		}
	}
}

func TestUnaryInt(t *testing.T) {
	x := tensor.FromInts([]int{-5, -1, 0, 1, 7, math.MaxInt32, math.MinInt32 + 1}, 7)
	for _, c := range unaryCases {
		if c.refInt == nil {
			continue
		}
		t.Run(c.name, func(t *testing.T) {
			got := c.f(x)
			want := make([]float64, x.Size())
			for j, v := range x.Int32s() {
				want[j] = float64(c.refInt(v))
			}
			requireExact(t, tensor.Int32, []int{7}, want, got)
		})
	}
}

// Special values: infinities, NaN, zeros of both signs, large |x|.
func TestUnarySpecialValues(t *testing.T) {
	nan, inf := math.NaN(), math.Inf(1)
	negZero := math.Copysign(0, -1)
	tests := []struct {
		name string
		f    func(*tensor.Tensor) *tensor.Tensor
		in   []float64
		want []float64
		rtol float64 // 0: exact
	}{
		{"Exp", tensor.Exp, []float64{-inf, inf, 0, nan, 100}, []float64{0, inf, 1, nan, inf}, 0},
		{"Log", tensor.Log, []float64{0, -1, inf, 1}, []float64{-inf, nan, inf, 0}, 0},
		{"Sqrt", tensor.Sqrt, []float64{0, -1, inf, 4}, []float64{0, nan, inf, 2}, 0},
		{"Rsqrt", tensor.Rsqrt, []float64{0, -1, inf, 4}, []float64{inf, nan, 0, 0.5}, 0},
		{"Tanh", tensor.Tanh, []float64{-inf, inf, nan, 20}, []float64{-1, 1, nan, 1}, 0},
		{"Sigmoid", tensor.Sigmoid, []float64{-inf, inf, nan, 0, 100, -100, 30, -30},
			[]float64{0, 1, nan, 0.5, 1, f32(sigmoid64(-100)), 1, f32(sigmoid64(-30))}, 0},
		{"Sign", tensor.Sign, []float64{negZero, 0, nan, -inf, 1e-30}, []float64{negZero, 0, nan, -1, 1}, 0},
		{"Abs", tensor.Abs, []float64{negZero, -inf, nan}, []float64{0, inf, nan}, 0},
		{"Relu", tensor.Relu, []float64{-inf, inf, 0, nan, -1e-30}, []float64{0, inf, 0, nan, 0}, 0},
		{"Silu", tensor.Silu, []float64{inf, 0, -100, nan}, []float64{inf, 0, f32(-100 * f32(sigmoid64(-100))), nan}, 0},
		{"Gelu", tensor.Gelu, []float64{inf, 0, 1, -1, 2, -10, nan}, []float64{inf, 0, f32(geluTanh64(1)), f32(geluTanh64(-1)), f32(geluTanh64(2)), f32(geluTanh64(-10)), nan}, 1e-5},
		{"GeluExact", tensor.GeluExact, []float64{inf, 0, 1, -1, nan}, []float64{inf, 0, f32(geluExact64(1)), f32(geluExact64(-1)), nan}, 4e-7},
		{"Clamp", func(x *tensor.Tensor) *tensor.Tensor { return tensor.Clamp(x, -1, 1) }, []float64{-inf, inf, nan, -1, 1, 0.5}, []float64{-1, 1, nan, -1, 1, 0.5}, 0},
		{"Clamp point", func(x *tensor.Tensor) *tensor.Tensor { return tensor.Clamp(x, 2, 2) }, []float64{-1, 5}, []float64{2, 2}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.f(tensor.FromFloat64(tt.in))
			require.Equal(t, tensor.Float32, got.DType())
			require.Equal(t, []int{len(tt.in)}, got.Shape())
			requireClose(t, tt.want, got, 0, tt.rtol)
			// Signs of zeros.
			for i, w := range tt.want {
				if w == 0 {
					assert.Equal(t, math.Signbit(w), math.Signbit(got.At(i)), "sign of zero at %d", i)
				}
			}
		})
	}
	// jax.nn.gelu (approximate=True) and the exact GELU at 1 and -1, as
	// printed by JAX.
	requireClose(t, []float64{0.841192, -0.158808}, tensor.Gelu(tensor.FromFloat32([]float32{1, -1})), 1e-6, 0)
	requireClose(t, []float64{0.841345, -0.158655}, tensor.GeluExact(tensor.FromFloat32([]float32{1, -1})), 1e-6, 0)
}

func TestUnaryPanics(t *testing.T) {
	i2 := tensor.Zeros(tensor.Int32, 2)
	b2 := tensor.Zeros(tensor.Bool, 2)
	tests := []struct {
		f   func()
		msg string
	}{
		{func() { tensor.Exp(i2) }, "tensor.Exp: i32[2]: not defined for int32"},
		{func() { tensor.Log(i2) }, "tensor.Log: i32[2]: not defined for int32"},
		{func() { tensor.Sqrt(i2) }, "tensor.Sqrt: i32[2]: not defined for int32"},
		{func() { tensor.Rsqrt(i2) }, "tensor.Rsqrt: i32[2]: not defined for int32"},
		{func() { tensor.Tanh(i2) }, "tensor.Tanh: i32[2]: not defined for int32"},
		{func() { tensor.Sigmoid(i2) }, "tensor.Sigmoid: i32[2]: not defined for int32"},
		{func() { tensor.Relu(i2) }, "tensor.Relu: i32[2]: not defined for int32"},
		{func() { tensor.Silu(i2) }, "tensor.Silu: i32[2]: not defined for int32"},
		{func() { tensor.Gelu(i2) }, "tensor.Gelu: i32[2]: not defined for int32"},
		{func() { tensor.GeluExact(i2) }, "tensor.GeluExact: i32[2]: not defined for int32"},
		{func() { tensor.Neg(b2) }, "tensor.Neg: bool[2]: not defined for bool"},
		{func() { tensor.Abs(b2) }, "tensor.Abs: bool[2]: not defined for bool"},
		{func() { tensor.Sign(b2) }, "tensor.Sign: bool[2]: not defined for bool"},
		{func() { tensor.Square(b2) }, "tensor.Square: bool[2]: not defined for bool"},
		{func() { tensor.Clamp(i2, 0, 1) }, "tensor.Clamp: i32[2]: not defined for int32"},
		{func() { tensor.Clamp(tensor.Zeros(tensor.Float32, 3), 1, 0) }, "tensor.Clamp: f32[3]: lo 1 > hi 0"},
	}
	for _, tt := range tests {
		requirePanic(t, tt.msg, tt.f)
	}
}

func TestUnaryVJP(t *testing.T) {
	for _, c := range unaryCases {
		if !c.diff {
			continue
		}
		t.Run(c.name, func(t *testing.T) {
			kink := c.kink
			if c.name == "Clamp" {
				kink = nil
			}
			x := awayFrom(3, c.lo, c.hi, kink, 0.05, 3, 4)
			if c.name == "Clamp" { // keep away from both boundaries
				x = tensor.Where(tensor.Less(tensor.Abs(tensor.AddScalar(x, 1)), tensor.Scalar(0.05)), tensor.Scalar(-2), x)
				x = tensor.Where(tensor.Less(tensor.Abs(tensor.AddScalar(x, -0.5)), tensor.Scalar(0.05)), tensor.Scalar(0), x)
			}
			checkGrad(t, func(xs []*tensor.Tensor) *tensor.Tensor { return c.f(xs[0]) }, ts(x))
			// Scalars and empty tensors.
			checkGrad(t, func(xs []*tensor.Tensor) *tensor.Tensor { return c.f(xs[0]) }, ts(tensor.Scalar(float32(c.lo+c.hi)/2+0.3)))
			g := grad(func(xs []*tensor.Tensor) *tensor.Tensor { return c.f(xs[0]) }, ts(tensor.Zeros(tensor.Float32, 2, 0)))
			assert.Equal(t, []int{2, 0}, g[0].Shape())
		})
	}
}

// Second derivatives: every VJP is built from differentiable ops, so the
// gradient can be differentiated again.
func TestUnarySecondOrder(t *testing.T) {
	for _, c := range unaryCases {
		if !c.diff {
			continue
		}
		t.Run(c.name, func(t *testing.T) {
			x := awayFrom(4, c.lo, c.hi, c.kink, 0.05, 2, 3)
			if c.name == "Clamp" {
				x = tensor.FromFloat32([]float32{-2, -0.5, 0, 0.3, 1, 2}, 2, 3)
			}
			f := func(xs []*tensor.Tensor) *tensor.Tensor { return c.f(xs[0]) }
			checkGrad(t, gradOf(f, 0), ts(x), autodiffOpts(1e-3, 0, 0))
		})
	}
}

// Closed forms of second derivatives of the activations.
func TestActivationSecondDerivatives(t *testing.T) {
	xs := []float32{-2.5, -1, -0.3, 0, 0.4, 1.2, 3}
	x := tensor.FromFloat32(xs)
	second := func(f func(*tensor.Tensor) *tensor.Tensor) *tensor.Tensor {
		g := gradOf(func(v []*tensor.Tensor) *tensor.Tensor { return f(v[0]) }, 0)
		return grad(g, ts(x))[0]
	}
	phi := func(v float64) float64 { return math.Exp(-v*v/2) / math.Sqrt(2*math.Pi) }
	wantExact := make([]float64, len(xs))
	wantTanh := make([]float64, len(xs))
	wantSig := make([]float64, len(xs))
	for i, v32 := range xs {
		v := float64(v32)
		wantExact[i] = phi(v) * (2 - v*v)
		c, a := math.Sqrt(2/math.Pi), 0.044715
		u := c * (v + a*v*v*v)
		th := math.Tanh(u)
		du := c * (1 + 3*a*v*v)
		d2u := 6 * a * c * v
		wantTanh[i] = (1 - th*th) * (du + 0.5*v*(d2u-2*th*du*du))
		s := sigmoid64(v)
		wantSig[i] = s * (1 - s) * (1 - 2*s)
	}
	requireClose(t, wantExact, second(tensor.GeluExact), 1e-5, 1e-4, "GeluExact''")
	requireClose(t, wantTanh, second(tensor.Gelu), 1e-5, 1e-4, "Gelu''")
	requireClose(t, wantSig, second(tensor.Sigmoid), 1e-6, 1e-4, "Sigmoid''")
}

// Relu and Abs have gradient 0 at 0 (as in JAX); Clamp passes the gradient
// on its boundary, as documented.
func TestUnaryKinks(t *testing.T) {
	x := tensor.FromFloat32([]float32{-1, 0, 1})
	f1 := func(f func(*tensor.Tensor) *tensor.Tensor) []float32 {
		return grad(func(v []*tensor.Tensor) *tensor.Tensor { return f(v[0]) }, ts(x))[0].Float32s()
	}
	assert.Equal(t, []float32{0, 0, 1}, f1(tensor.Relu))
	assert.Equal(t, []float32{-1, 0, 1}, f1(tensor.Abs))
	assert.Equal(t, []float32{1, 1, 1}, f1(func(v *tensor.Tensor) *tensor.Tensor { return tensor.Clamp(v, -1, 1) }))
	assert.Equal(t, []float32{0, 1, 1}, f1(func(v *tensor.Tensor) *tensor.Tensor { return tensor.Clamp(v, 0, 2) }))
	assert.Equal(t, []float32{1, 1, 0}, f1(func(v *tensor.Tensor) *tensor.Tensor { return tensor.Clamp(v, -2, 0.5) }))
	assert.Equal(t, []float32{0, 1, 0}, f1(func(v *tensor.Tensor) *tensor.Tensor { return tensor.Clamp(v, 0, 0) }))
	// Large |x|: gradients saturate to 0 or 1 without NaN.
	big := tensor.FromFloat32([]float32{-100, 100, -1e4, 1e4})
	sat := []struct {
		name string
		f    func(*tensor.Tensor) *tensor.Tensor
		want []float32
	}{
		{"Sigmoid", tensor.Sigmoid, []float32{0, 0, 0, 0}},
		{"Tanh", tensor.Tanh, []float32{0, 0, 0, 0}},
		{"Silu", tensor.Silu, []float32{0, 1, 0, 1}},
		{"Gelu", tensor.Gelu, []float32{0, 1, 0, 1}},
		{"GeluExact", tensor.GeluExact, []float32{0, 1, 0, 1}},
	}
	for _, c := range sat {
		g := grad(func(v []*tensor.Tensor) *tensor.Tensor { return c.f(v[0]) }, ts(big))[0]
		assert.InDeltaSlice(t, c.want, g.Float32s(), 1e-6, c.name)
	}
}

// The second-derivative kernels of Gelu and GeluExact are themselves
// differentiable: third derivatives check against finite differences.
func TestGeluThirdOrder(t *testing.T) {
	x := tensor.FromFloat32([]float32{-2, -0.7, 0.1, 0.9, 2.5})
	for _, f := range []func(*tensor.Tensor) *tensor.Tensor{tensor.Gelu, tensor.GeluExact} {
		g2 := gradOf(gradOf(func(v []*tensor.Tensor) *tensor.Tensor { return f(v[0]) }, 0), 0)
		checkGrad(t, g2, ts(x), autodiffOpts(1e-2, 0, 0))
	}
}
