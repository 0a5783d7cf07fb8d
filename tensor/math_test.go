package tensor_test

import (
	"fmt"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gonum.org/v1/gonum/mathext"

	"github.com/gonox/gonox/autodiff"
	"github.com/gonox/gonox/shard"
	"github.com/gonox/gonox/tensor"
)

// mathCase is one elementwise math op with float64 references of its value
// and derivative, and the interval its test inputs come from (away from
// the poles and edges, where finite differences are meaningless).
type mathCase struct {
	name   string
	op     func(*tensor.Tensor) *tensor.Tensor
	f, df  func(float64) float64
	lo, hi float64
}

func lgamma64(x float64) float64 { v, _ := math.Lgamma(x); return v }

// trigamma64 is ψ'(x) = ζ(2, x) (Hurwitz zeta, gonum), for x > 0.
func trigamma64(x float64) float64 { return mathext.Zeta(2, x) }

var mathCases = []mathCase{
	{"Sin", tensor.Sin, math.Sin, math.Cos, -7, 7},
	{"Cos", tensor.Cos, math.Cos, func(x float64) float64 { return -math.Sin(x) }, -7, 7},
	{"Tan", tensor.Tan, math.Tan, func(x float64) float64 { return 1 / (math.Cos(x) * math.Cos(x)) }, -1.4, 1.4},
	{"Asin", tensor.Asin, math.Asin, func(x float64) float64 { return 1 / math.Sqrt(1-x*x) }, -0.9, 0.9},
	{"Acos", tensor.Acos, math.Acos, func(x float64) float64 { return -1 / math.Sqrt(1-x*x) }, -0.9, 0.9},
	{"Atan", tensor.Atan, math.Atan, func(x float64) float64 { return 1 / (1 + x*x) }, -5, 5},
	{"Sinh", tensor.Sinh, math.Sinh, math.Cosh, -4, 4},
	{"Cosh", tensor.Cosh, math.Cosh, math.Sinh, -4, 4},
	{"Asinh", tensor.Asinh, math.Asinh, func(x float64) float64 { return 1 / math.Sqrt(x*x+1) }, -5, 5},
	{"Acosh", tensor.Acosh, math.Acosh, func(x float64) float64 { return 1 / math.Sqrt(x*x-1) }, 1.2, 6},
	{"Atanh", tensor.Atanh, math.Atanh, func(x float64) float64 { return 1 / (1 - x*x) }, -0.9, 0.9},
	{"Expm1", tensor.Expm1, math.Expm1, math.Exp, -3, 3},
	{"Log1p", tensor.Log1p, math.Log1p, func(x float64) float64 { return 1 / (1 + x) }, -0.8, 5},
	{"Log2", tensor.Log2, math.Log2, func(x float64) float64 { return 1 / (x * math.Ln2) }, 0.1, 10},
	{"Log10", tensor.Log10, math.Log10, func(x float64) float64 { return 1 / (x * math.Ln10) }, 0.1, 10},
	{"Exp2", tensor.Exp2, math.Exp2, func(x float64) float64 { return math.Exp2(x) * math.Ln2 }, -4, 4},
	{"Erf", tensor.Erf, math.Erf, func(x float64) float64 { return 2 / math.Sqrt(math.Pi) * math.Exp(-x*x) }, -2.5, 2.5},
	{"Erfc", tensor.Erfc, math.Erfc, func(x float64) float64 { return -2 / math.Sqrt(math.Pi) * math.Exp(-x*x) }, -2.5, 2.5},
	{"ErfInv", tensor.ErfInv, math.Erfinv, func(x float64) float64 {
		y := math.Erfinv(x)
		return math.Sqrt(math.Pi) / 2 * math.Exp(y*y)
	}, -0.9, 0.9},
	{"Lgamma", tensor.Lgamma, lgamma64, mathext.Digamma, 0.2, 8},
	{"Digamma", tensor.Digamma, mathext.Digamma, trigamma64, 0.2, 8},
	{"Polygamma1", func(x *tensor.Tensor) *tensor.Tensor { return tensor.Polygamma(1, x) }, trigamma64,
		func(x float64) float64 { return -2 * mathext.Zeta(3, x) }, 0.3, 8},
	{"Reciprocal", tensor.Reciprocal, func(x float64) float64 { return 1 / x }, func(x float64) float64 { return -1 / (x * x) }, 0.3, 5},
	{"Cbrt", tensor.Cbrt, math.Cbrt, func(x float64) float64 { return 1 / (3 * math.Cbrt(x) * math.Cbrt(x)) }, 0.3, 8},
}

// mathInputs returns float32 test inputs in [lo, hi].
func mathInputs(seed uint64, lo, hi float64, shape ...int) *tensor.Tensor {
	return randRange(newRNG(seed), lo, hi, shape...)
}

// Every op against its float64 reference: the float32 result is the
// reference rounded (within an ulp or so), and the gradient is the
// reference derivative.
func TestMathForwardAndGradient(t *testing.T) {
	for i, c := range mathCases {
		t.Run(c.name, func(t *testing.T) {
			x := mathInputs(uint64(i), c.lo, c.hi, 4, 16)
			var want, dwant []float64
			for _, v := range x.Float64s() {
				want = append(want, c.f(v))
				dwant = append(dwant, c.df(v))
			}
			requireClose(t, want, c.op(x), 1e-37, 2.5e-7, c.name)
			g := grad(func(xs []*tensor.Tensor) *tensor.Tensor { return tensor.Sum(c.op(xs[0])) }, ts(x))[0]
			requireClose(t, dwant, g, 1e-6, 2e-6, "d"+c.name)

			// Finite differences, first and second order (the VJPs are
			// built from ops). Smaller inputs keep the checks fast.
			xs := mathInputs(uint64(100+i), c.lo, c.hi, 6)
			w := mathInputs(uint64(200+i), -1, 1, 6)
			f := func(xs []*tensor.Tensor) *tensor.Tensor { return tensor.Sum(tensor.Mul(c.op(xs[0]), xs[1])) }
			checkGrad(t, f, ts(xs, w))
			second := func(xs []*tensor.Tensor) *tensor.Tensor { return tensor.Sum(gradOf(f, 0)(xs)) }
			checkGrad(t, second, ts(xs, w))
		})
	}
}

// Hand-worked values and the edges of each domain, as JAX gives them.
func TestMathSpecialValues(t *testing.T) {
	inf, nan := math.Inf(1), math.NaN()
	const gamma = 0.57721566490153286
	cases := []struct {
		name string
		op   func(*tensor.Tensor) *tensor.Tensor
		in   []float64
		want []float64
	}{
		{"Sin", tensor.Sin, []float64{0, math.Pi / 6, math.Pi / 2, inf, nan}, []float64{0, 0.5, 1, nan, nan}},
		{"Cos", tensor.Cos, []float64{0, math.Pi / 3, math.Pi}, []float64{1, 0.5, -1}},
		{"Tan", tensor.Tan, []float64{0, math.Pi / 4}, []float64{0, 1}},
		{"Asin", tensor.Asin, []float64{1, -1, 0.5, 2}, []float64{math.Pi / 2, -math.Pi / 2, math.Pi / 6, nan}},
		{"Acos", tensor.Acos, []float64{1, -1, 0.5, -2}, []float64{0, math.Pi, math.Pi / 3, nan}},
		{"Atan", tensor.Atan, []float64{1, inf, -inf}, []float64{math.Pi / 4, math.Pi / 2, -math.Pi / 2}},
		{"Sinh", tensor.Sinh, []float64{0, 1, 100}, []float64{0, (math.E - 1/math.E) / 2, inf}},
		{"Cosh", tensor.Cosh, []float64{0, 1}, []float64{1, (math.E + 1/math.E) / 2}},
		{"Asinh", tensor.Asinh, []float64{0, -inf}, []float64{0, -inf}},
		{"Acosh", tensor.Acosh, []float64{1, 0.5}, []float64{0, nan}},
		{"Atanh", tensor.Atanh, []float64{0, 1, -1, 2}, []float64{0, inf, -inf, nan}},
		// Expm1 and Log1p keep tiny arguments: e^x - 1 in float32 is 0.
		{"Expm1", tensor.Expm1, []float64{1e-10, 0, -inf, 100}, []float64{1e-10, 0, -1, inf}},
		{"Log1p", tensor.Log1p, []float64{1e-10, -1, -2}, []float64{1e-10, -inf, nan}},
		{"Log2", tensor.Log2, []float64{8, 0.25, 0}, []float64{3, -2, -inf}},
		{"Log10", tensor.Log10, []float64{1000, 0.01}, []float64{3, -2}},
		{"Exp2", tensor.Exp2, []float64{10, -1, -inf}, []float64{1024, 0.5, 0}},
		{"Erf", tensor.Erf, []float64{0, inf, -inf}, []float64{0, 1, -1}},
		// erfc(10) ≈ 2.09e-45 is a float32 subnormal; 1 - erf(10) is 0.
		{"Erfc", tensor.Erfc, []float64{0, 10, -inf}, []float64{1, math.Erfc(10), 2}},
		{"ErfInv", tensor.ErfInv, []float64{0, 1, -1, 1.5}, []float64{0, inf, -inf, nan}},
		{"Lgamma", tensor.Lgamma, []float64{1, 2, 5, 0.5, 0, -1, -0.5}, []float64{0, 0, math.Log(24), math.Log(math.Sqrt(math.Pi)), inf, inf, math.Log(2 * math.Sqrt(math.Pi))}},
		// ψ(1) = -γ, ψ(1/2) = -γ - 2 ln 2, ψ(-1/2) = ψ(1/2) + 2; NaN at the poles.
		{"Digamma", tensor.Digamma, []float64{1, 0.5, -0.5, 0, -3, 1e10},
			[]float64{-gamma, -gamma - 2*math.Ln2, 2 - gamma - 2*math.Ln2, nan, nan, math.Log(1e10)}},
		// ψ'(1) = π²/6, ψ'(1/2) = π²/2, ψ'(-1/2) = π² + 4 - ψ'(3/2)... = π²/2 + 4.
		{"Polygamma1", func(x *tensor.Tensor) *tensor.Tensor { return tensor.Polygamma(1, x) },
			[]float64{1, 0.5, -0.5, 0, -2}, []float64{math.Pi * math.Pi / 6, math.Pi * math.Pi / 2, math.Pi*math.Pi/2 + 4, inf, inf}},
		// ψ''(1) = -2ζ(3); ψ''(-1/2) = ψ''(1/2) - 2/(-1/2)³ = -14ζ(3) + 16.
		{"Polygamma2", func(x *tensor.Tensor) *tensor.Tensor { return tensor.Polygamma(2, x) },
			[]float64{1, -0.5, 0}, []float64{-2 * 1.2020569031595943, -14*1.2020569031595943 + 16, nan}},
		{"Polygamma0", func(x *tensor.Tensor) *tensor.Tensor { return tensor.Polygamma(0, x) }, []float64{1}, []float64{-gamma}},
		{"Reciprocal", tensor.Reciprocal, []float64{4, -0.5, 0}, []float64{0.25, -2, inf}},
		{"Cbrt", tensor.Cbrt, []float64{27, -8, 0}, []float64{3, -2, 0}},
		// Halves to even.
		{"Round", tensor.Round, []float64{0.5, 1.5, 2.5, -0.5, -2.5, 2.6, -2.4}, []float64{0, 2, 2, 0, -2, 3, -2}},
		{"Floor", tensor.Floor, []float64{1.7, -1.2, -2}, []float64{1, -2, -2}},
		{"Ceil", tensor.Ceil, []float64{1.2, -1.7}, []float64{2, -1}},
		{"Trunc", tensor.Trunc, []float64{1.7, -1.7}, []float64{1, -1}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			requireClose(t, c.want, c.op(tensor.FromFloat64(c.in)), 1e-44, 3e-7)
		})
	}
	// Digamma and the polygammas at negative arguments, against the
	// recurrence from positive ones: ψ⁽ⁿ⁾(x) = ψ⁽ⁿ⁾(x+1) - (-1)ⁿ·n!/x^(n+1).
	for _, x := range []float64{-0.3, -1.7, -4.25, -10.6} {
		want := mathext.Digamma(x+6) - 1/x - 1/(x+1) - 1/(x+2) - 1/(x+3) - 1/(x+4) - 1/(x+5)
		requireClose(t, []float64{want}, tensor.Digamma(tensor.FromFloat64([]float64{x})), 1e-6, 1e-5, "digamma(%v)", x)
		wantT := mathext.Zeta(2, x+12)
		for k := range 12 {
			wantT += 1 / ((x + float64(k)) * (x + float64(k)))
		}
		requireClose(t, []float64{wantT}, tensor.Polygamma(1, tensor.FromFloat64([]float64{x})), 1e-6, 1e-5, "trigamma(%v)", x)
		want3 := 6 * mathext.Zeta(4, x+12) // ψ⁽³⁾(y) = 3!·ζ(4, y)
		for k := range 12 {
			want3 += 6 / math.Pow(x+float64(k), 4)
		}
		requireClose(t, []float64{want3}, tensor.Polygamma(3, tensor.FromFloat64([]float64{x})), 1e-6, 1e-5, "polygamma(3, %v)", x)
	}
	// Higher orders at positive arguments against ζ: ψ⁽ⁿ⁾(x) = (-1)^(n+1)·n!·ζ(n+1, x).
	for n := 2; n <= 6; n++ {
		for _, x := range []float64{0.3, 1, 2.5, 17, 40} {
			fact := 1.0
			for k := 2; k <= n; k++ {
				fact *= float64(k)
			}
			want := fact * mathext.Zeta(float64(n+1), x)
			if n%2 == 0 {
				want = -want
			}
			requireClose(t, []float64{want}, tensor.Polygamma(n, tensor.FromFloat64([]float64{x})), 1e-30, 2e-6, "polygamma(%d, %v)", n, x)
		}
	}
}

// The rounding ops: integers pass through, the gradient is zero, as
// JAX's.
func TestMathRounding(t *testing.T) {
	ints := tensor.FromInt32([]int32{-3, 0, 7}, 3)
	for _, op := range []func(*tensor.Tensor) *tensor.Tensor{tensor.Round, tensor.Floor, tensor.Ceil, tensor.Trunc} {
		got := op(ints)
		assert.Equal(t, tensor.Int32, got.DType())
		assert.Equal(t, []int32{-3, 0, 7}, got.Int32s())
		g := grad(func(xs []*tensor.Tensor) *tensor.Tensor { return tensor.Sum(op(xs[0])) }, ts(tensor.FromFloat32([]float32{0.3, 1.7})))[0]
		assert.Equal(t, []float32{0, 0}, g.Float32s())
	}
}

func TestAtan2(t *testing.T) {
	// The four quadrants, the axes and the signed zeros, as math.Atan2.
	ys := []float64{1, 1, -1, -1, 0, 0, 1, -1, 0}
	xs := []float64{1, -1, -1, 1, 1, -1, 0, 0, 0}
	var want []float64
	for i := range ys {
		want = append(want, math.Atan2(ys[i], xs[i]))
	}
	requireClose(t, want, tensor.Atan2(tensor.FromFloat64(ys), tensor.FromFloat64(xs)), 1e-37, 1e-7)
	// Broadcasting, and the gradient reduced to each operand's shape.
	rng := newRNG(41)
	y := randRange(rng, 0.5, 2, 3, 1)
	x := randRange(rng, -2, -0.5, 1, 4)
	got := tensor.Atan2(y, x)
	require.Equal(t, []int{3, 4}, got.Shape())
	ref, _ := refBinary(y, x, math.Atan2)
	requireClose(t, ref, got, 1e-37, 2e-7)
	f := func(xs []*tensor.Tensor) *tensor.Tensor { return tensor.Sum(tensor.Square(tensor.Atan2(xs[0], xs[1]))) }
	checkGrad(t, f, ts(y, x))
	checkGrad(t, func(xs []*tensor.Tensor) *tensor.Tensor { return tensor.Sum(gradOf(f, 1)(xs)) }, ts(y, x))
	// A float32 scalar is weakly typed next to a half tensor.
	h := tensor.Atan2(tensor.Convert(y, tensor.BFloat16), tensor.Scalar(-1))
	assert.Equal(t, tensor.BFloat16, h.DType())
}

// Half operands are widened and the float32 result rounded once;
// cotangents have the operand's dtype.
func TestMathHalf(t *testing.T) {
	for i, c := range mathCases {
		x32 := mathInputs(uint64(300+i), c.lo, c.hi, 16)
		for _, dt := range []tensor.DType{tensor.BFloat16, tensor.Float16} {
			x := tensor.Convert(x32, dt)
			wide := tensor.Convert(x, tensor.Float32)
			y := c.op(x)
			require.Equal(t, dt, y.DType(), c.name)
			require.Equal(t, tensor.Convert(c.op(wide), dt).Bits16(), y.Bits16(), "%s %v", c.name, dt)
			sum := func(xs []*tensor.Tensor) *tensor.Tensor { return tensor.Sum(c.op(xs[0])) }
			g := grad(sum, ts(x))[0]
			require.Equal(t, dt, g.DType(), c.name)
		}
	}
}

// On placed operands the ops run blockwise by the elementwise rule: no
// gather, under Strict, and the host's values and gradients.
func TestMathPlaced(t *testing.T) {
	mesh := shard.NewMesh([]int{4, 2}, []string{"dp", "tp"})
	xh := mathInputs(7, 0.3, 0.9, 8, 6)
	x := shard.Put(xh, shard.NewSharding(mesh, shard.P("dp", "tp")))
	defer shard.Strict(mesh)()
	var comm shard.Comm
	stop := shard.Record(mesh, &comm)
	loss := func(x *tensor.Tensor) *tensor.Tensor {
		s := tensor.Add(tensor.Sin(x), tensor.Atanh(x))
		s = tensor.Add(s, tensor.Atan2(x, tensor.Cos(x)))
		s = tensor.Add(s, tensor.Digamma(tensor.AddScalar(x, 1)))
		return tensor.Sum(tensor.Mul(s, tensor.Floor(tensor.MulScalar(x, 3))))
	}
	y := tensor.Expm1(x)
	v, g := autodiff.ValueAndGrad(loss)(x)
	stop()
	require.Equal(t, "float32[8@dp,6@tp]", y.Type())
	require.Equal(t, "float32[8@dp,6@tp]", g.Type())
	require.Equal(t, tensor.Expm1(xh).Float32s(), y.Float32s())
	hv, hg := autodiff.ValueAndGrad(loss)(xh)
	requireClose(t, hv.Float64s(), v, 1e-5, 1e-5)
	requireClose(t, hg.Float64s(), g, 1e-6, 1e-5)
	for _, k := range comm.Kinds() {
		require.NotEqual(t, "all_gather", k, "nothing gathered")
	}
}

func TestMathPanics(t *testing.T) {
	ints := tensor.FromInt32([]int32{1, 2, 3}, 3)
	for _, c := range mathCases {
		if c.name == "Polygamma1" {
			continue
		}
		requirePanic(t, fmt.Sprintf("tensor.%s: i32[3]: not defined for int32", c.name), func() { c.op(ints) })
	}
	requirePanic(t, "tensor.Polygamma: order -1 of f32[] is negative", func() { tensor.Polygamma(-1, tensor.Scalar(1)) })
	requirePanic(t, "tensor.Polygamma: i32[3]: not defined for int32", func() { tensor.Polygamma(2, ints) })
	requirePanic(t, "tensor.Atan2: i32[3], i32[3]: not defined for int32", func() { tensor.Atan2(ints, ints) })
	requirePanic(t, "tensor.Sin: operand x is nil", func() { tensor.Sin(nil) })
}

// The math ops in TestNilOperands' table.
func init() {
	for _, c := range mathCases {
		if c.name != "Polygamma1" {
			nilOps[c.name] = func(t []*tensor.Tensor) { c.op(t[0]) }
		}
	}
	for name, op := range map[string]func(*tensor.Tensor) *tensor.Tensor{
		"Round": tensor.Round, "Floor": tensor.Floor, "Ceil": tensor.Ceil, "Trunc": tensor.Trunc,
	} {
		nilOps[name] = func(t []*tensor.Tensor) { op(t[0]) }
	}
	nilOps["Polygamma"] = func(t []*tensor.Tensor) { tensor.Polygamma(2, t[0]) }
	nilOps["Atan2"] = func(t []*tensor.Tensor) { tensor.Atan2(t[0], t[1]) }
}
