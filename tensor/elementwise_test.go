package tensor_test

import (
	"fmt"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/tensor"
)

type binaryCase struct {
	name string
	sym  string
	f    func(a, b *tensor.Tensor) *tensor.Tensor
	// Reference on float32 values (computed in float64, rounded to float32).
	ref32 func(a, b float64) float64
	// Reference on int32 values; nil if the op is float-only.
	refI32 func(a, b int32) int32
	// divides: the int32 op panics on a zero divisor.
	divides bool
}

func floorDivI32(a, b int32) int32 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}

var binaryCases = []binaryCase{
	{"Add", "+", tensor.Add, func(a, b float64) float64 { return a + b }, func(a, b int32) int32 { return a + b }, false},
	{"Sub", "-", tensor.Sub, func(a, b float64) float64 { return a - b }, func(a, b int32) int32 { return a - b }, false},
	{"Mul", "*", tensor.Mul, func(a, b float64) float64 { return a * b }, func(a, b int32) int32 { return a * b }, false},
	{"Div", "/", tensor.Div, func(a, b float64) float64 { return a / b }, func(a, b int32) int32 { return a / b }, true},
	{"Rem", "%", tensor.Rem, math.Mod, func(a, b int32) int32 { return a % b }, true},
	{"FloorDiv", "//", tensor.FloorDiv, func(a, b float64) float64 { return math.Floor(a / b) }, floorDivI32, true},
	{"Maximum", ",", tensor.Maximum, func(a, b float64) float64 {
		if math.IsNaN(a) || math.IsNaN(b) {
			return math.NaN()
		}
		return math.Max(a, b)
	}, func(a, b int32) int32 { return max(a, b) }, false},
	{"Minimum", ",", tensor.Minimum, func(a, b float64) float64 {
		if math.IsNaN(a) || math.IsNaN(b) {
			return math.NaN()
		}
		return math.Min(a, b)
	}, func(a, b int32) int32 { return min(a, b) }, false},
	{"Pow", "**", tensor.Pow, math.Pow, nil, false},
}

// broadcastPairs are operand shapes that broadcast.
var broadcastPairs = [][2][]int{
	{{5}, {5}},
	{{3, 1}, {1, 4}},
	{{2, 3, 4}, {4}},
	{{4}, {2, 3, 4}},
	{{}, {2, 3}},
	{{2, 3}, {}},
	{{}, {}},
	{{1}, {0}},
	{{0}, {1}},
	{{0, 3}, {1, 3}},
	{{2, 0}, {2, 1}},
	{{2, 1, 3}, {4, 1}},
	{{1, 1}, {1}},
	{{2, 3, 4}, {2, 1, 4}},
	{{1, 3, 1}, {2, 1, 5}},
	{{4, 1, 1, 3}, {2, 3}},
	{{3, 4}, {3, 4}},
	{{1, 7}, {6, 1}},
	{{2, 1, 4, 1}, {1, 3, 1, 5}},
}

func shapeName(s []int) string { return fmt.Sprint(s) }

func TestBinaryFloat(t *testing.T) {
	rng := newRNG(1)
	for _, c := range binaryCases {
		for _, sh := range broadcastPairs {
			t.Run(c.name+shapeName(sh[0])+shapeName(sh[1]), func(t *testing.T) {
				a := randF32(rng, sh[0]...)
				b := randF32(rng, sh[1]...)
				if c.name == "Pow" {
					a = randRange(rng, 0.1, 3, sh[0]...)
				}
				before := snapshot(a, b)
				got := c.f(a, b)
				want, shape := refBinary(a, b, func(x, y float64) float64 { return f32(c.ref32(x, y)) })
				requireExact(t, tensor.Float32, shape, want, got)
				requireUnchanged(t, before)
				assert.False(t, sharesStorage(got, a) || sharesStorage(got, b), "result shares storage with an input")
			})
		}
	}
}

func TestBinaryInt(t *testing.T) {
	rng := newRNG(2)
	for _, c := range binaryCases {
		if c.refI32 == nil {
			continue
		}
		for _, sh := range broadcastPairs {
			t.Run(c.name+shapeName(sh[0])+shapeName(sh[1]), func(t *testing.T) {
				a := randI32(rng, -50, 50, sh[0]...)
				b := randI32(rng, -9, 10, sh[1]...)
				if c.divides { // no zero divisors
					b = tensor.Where(tensor.Equal(b, tensor.ScalarInt(0)), tensor.ScalarInt(3), b)
				}
				before := snapshot(a, b)
				got := c.f(a, b)
				want, shape := refBinary(a, b, func(x, y float64) float64 { return float64(c.refI32(int32(x), int32(y))) })
				requireExact(t, tensor.Int32, shape, want, got)
				requireUnchanged(t, before)
			})
		}
	}
}

// Hand-worked values, including the sign conventions of integer division
// and NaN handling.
func TestBinarySpecialValues(t *testing.T) {
	nan, inf := math.NaN(), math.Inf(1)
	tests := []struct {
		name string
		f    func(a, b *tensor.Tensor) *tensor.Tensor
		a, b []float64
		dt   tensor.DType
		want []float64
	}{
		{"int Div truncates", tensor.Div, []float64{7, -7, 7, -7, 0, 1}, []float64{2, 2, -2, -2, 5, 3}, tensor.Int32, []float64{3, -3, -3, 3, 0, 0}},
		{"int FloorDiv floors", tensor.FloorDiv, []float64{7, -7, 7, -7, -6, 0, -1}, []float64{2, 2, -2, -2, 2, -3, 5}, tensor.Int32, []float64{3, -4, -4, 3, -3, 0, -1}},
		{"int Rem sign of a", tensor.Rem, []float64{7, -7, 7, -7}, []float64{2, 2, -2, -2}, tensor.Int32, []float64{1, -1, 1, -1}},
		{"int Div overflow wraps", tensor.Div, []float64{math.MinInt32}, []float64{-1}, tensor.Int32, []float64{math.MinInt32}},
		{"int Add wraps", tensor.Add, []float64{math.MaxInt32}, []float64{1}, tensor.Int32, []float64{math.MinInt32}},
		{"int Max/Min", tensor.Maximum, []float64{-3, 5}, []float64{2, 5}, tensor.Int32, []float64{2, 5}},
		{"float FloorDiv", tensor.FloorDiv, []float64{7, -7, 7.5, -0.5, 1, -1}, []float64{2, 2, 2, 4, 0, 0}, tensor.Float32, []float64{3, -4, 3, -1, inf, -inf}},
		{"float Rem sign of a", tensor.Rem, []float64{7.5, -7.5, 7.5, 1}, []float64{2, 2, -2, 0}, tensor.Float32, []float64{1.5, -1.5, 1.5, nan}},
		{"float Div by zero", tensor.Div, []float64{1, -1, 0}, []float64{0, 0, 0}, tensor.Float32, []float64{inf, -inf, nan}},
		{"Maximum NaN", tensor.Maximum, []float64{nan, 1, nan, 2}, []float64{1, nan, nan, 2}, tensor.Float32, []float64{nan, nan, nan, 2}},
		{"Minimum NaN", tensor.Minimum, []float64{nan, 1, nan, -inf}, []float64{1, nan, nan, 3}, tensor.Float32, []float64{nan, nan, nan, -inf}},
		{"Maximum inf", tensor.Maximum, []float64{-inf, inf}, []float64{0, 0}, tensor.Float32, []float64{0, inf}},
		{"Pow", tensor.Pow, []float64{0, 0, 2, -8, 4, -2, 0}, []float64{0, 2, -1, 1.0 / 3, 0.5, 3, -1}, tensor.Float32, []float64{1, 0, 0.5, nan, 2, -8, inf}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := withDType(tt.dt, tt.a, len(tt.a))
			b := withDType(tt.dt, tt.b, len(tt.b))
			requireExact(t, tt.dt, []int{len(tt.a)}, tt.want, tt.f(a, b))
		})
	}
	assert.Equal(t, []float32{3.5}, tensor.AddScalar(tensor.FromFloat32([]float32{1}), 2.5).Float32s())
	assert.Equal(t, []float32{-2, 4}, tensor.MulScalar(tensor.FromFloat32([]float32{1, -2}), -2).Float32s())
	requireExact(t, tensor.Float32, []int{}, []float64{6}, tensor.MulScalar(tensor.Scalar(3), 2))
}

func TestBinaryPanics(t *testing.T) {
	f2 := tensor.Zeros(tensor.Float32, 2)
	i2 := tensor.Zeros(tensor.Int32, 2)
	b2 := tensor.Zeros(tensor.Bool, 2)
	tests := []struct {
		name string
		f    func()
		msg  string
	}{
		{"dtype", func() { tensor.Add(f2, i2) }, "tensor.Add: f32[2] + i32[2]: dtypes differ; convert one with tensor.AsType"},
		{"dtype Sub", func() { tensor.Sub(i2, f2) }, "tensor.Sub: i32[2] - f32[2]: dtypes differ; convert one with tensor.AsType"},
		{"bool", func() { tensor.Mul(b2, b2) }, "tensor.Mul: bool[2] * bool[2]: not defined for bool"},
		{"pow int", func() { tensor.Pow(i2, i2) }, "tensor.Pow: i32[2] ** i32[2]: not defined for int32"},
		{"broadcast", func() { tensor.Add(tensor.Zeros(tensor.Float32, 3, 4), tensor.Zeros(tensor.Float32, 5)) }, "tensor.Add: f32[3,4] + f32[5]: shapes do not broadcast (dim -1: 4 vs 5)"},
		{"broadcast inner", func() { tensor.Div(tensor.Zeros(tensor.Float32, 2, 3, 4), tensor.Zeros(tensor.Float32, 5, 1)) }, "tensor.Div: f32[2,3,4] / f32[5,1]: shapes do not broadcast (dim -2: 3 vs 5)"},
		{"broadcast zero", func() { tensor.Add(tensor.Zeros(tensor.Float32, 2), tensor.Zeros(tensor.Float32, 0)) }, "tensor.Add: f32[2] + f32[0]: shapes do not broadcast (dim -1: 2 vs 0)"},
		{"Maximum", func() { tensor.Maximum(f2, tensor.Zeros(tensor.Float32, 3)) }, "tensor.Maximum: f32[2], f32[3]: shapes do not broadcast (dim -1: 2 vs 3)"},
		{"Minimum dtype", func() { tensor.Minimum(f2, i2) }, "tensor.Minimum: f32[2], i32[2]: dtypes differ; convert one with tensor.AsType"},
		{"FloorDiv", func() { tensor.FloorDiv(b2, b2) }, "tensor.FloorDiv: bool[2] // bool[2]: not defined for bool"},
		{"Rem", func() { tensor.Rem(f2, i2) }, "tensor.Rem: f32[2] % i32[2]: dtypes differ; convert one with tensor.AsType"},
		{"int Div by zero", func() { tensor.Div(tensor.FromInts([]int{1, 2}), tensor.FromInts([]int{1, 0})) }, "tensor.Div: i32[2] / i32[2]: integer division by zero"},
		{"int Rem by zero", func() { tensor.Rem(tensor.FromInts([]int{1, 2}), tensor.ScalarInt(0)) }, "tensor.Rem: i32[2] % i32[]: integer division by zero"},
		{"int FloorDiv by zero", func() { tensor.FloorDiv(tensor.ScalarInt(1), tensor.FromInts([]int{0}, 1, 1)) }, "tensor.FloorDiv: i32[] // i32[1,1]: integer division by zero"},
		{"AddScalar int", func() { tensor.AddScalar(i2, 1) }, "tensor.Add: i32[2] + f32[]: dtypes differ; convert one with tensor.AsType"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { requirePanic(t, tt.msg, tt.f) })
	}
	// An int division by zero in a size-0 result does not panic.
	assert.Equal(t, []int{0}, tensor.Div(tensor.Zeros(tensor.Int32, 0), tensor.ScalarInt(0)).Shape())
}

// separated returns float operands whose broadcast pairs differ by at
// least gap, so Maximum/Minimum have no ties near the evaluation point.
func separated(seed uint64, sa, sb []int, gap float64) (*tensor.Tensor, *tensor.Tensor) {
	rng := newRNG(seed)
	for {
		a, b := randF32(rng, sa...), randF32(rng, sb...)
		d, _ := refBinary(a, b, func(x, y float64) float64 { return math.Abs(x - y) })
		ok := true
		for _, v := range d {
			if v < gap {
				ok = false
			}
		}
		if ok {
			return a, b
		}
	}
}

func TestBinaryVJP(t *testing.T) {
	shapes := [][2][]int{
		{{3, 4}, {3, 4}},
		{{3, 1}, {1, 4}},
		{{2, 3, 4}, {4}},
		{{}, {2, 3}},
		{{2, 1, 3}, {4, 1}},
		{{1}, {2, 2}},
	}
	ops := []struct {
		name string
		f    func(a, b *tensor.Tensor) *tensor.Tensor
		gen  func(seed uint64, sa, sb []int) (*tensor.Tensor, *tensor.Tensor)
	}{
		{"Add", tensor.Add, nil},
		{"Sub", tensor.Sub, nil},
		{"Mul", tensor.Mul, nil},
		{"Div", tensor.Div, func(seed uint64, sa, sb []int) (*tensor.Tensor, *tensor.Tensor) {
			rng := newRNG(seed)
			return randF32(rng, sa...), tensor.Mul(randRange(rng, 0.5, 2, sb...), tensor.Sign(randF32(rng, sb...)))
		}},
		{"Maximum", tensor.Maximum, func(seed uint64, sa, sb []int) (*tensor.Tensor, *tensor.Tensor) {
			return separated(seed, sa, sb, 0.05)
		}},
		{"Minimum", tensor.Minimum, func(seed uint64, sa, sb []int) (*tensor.Tensor, *tensor.Tensor) {
			return separated(seed, sa, sb, 0.05)
		}},
		{"Pow", tensor.Pow, func(seed uint64, sa, sb []int) (*tensor.Tensor, *tensor.Tensor) {
			rng := newRNG(seed)
			return randRange(rng, 0.5, 2, sa...), randF32(rng, sb...)
		}},
	}
	for _, op := range ops {
		for i, sh := range shapes {
			t.Run(op.name+shapeName(sh[0])+shapeName(sh[1]), func(t *testing.T) {
				var a, b *tensor.Tensor
				if op.gen != nil {
					a, b = op.gen(uint64(i), sh[0], sh[1])
				} else {
					rng := newRNG(uint64(i))
					a, b = randF32(rng, sh[0]...), randF32(rng, sh[1]...)
				}
				f := func(xs []*tensor.Tensor) *tensor.Tensor { return op.f(xs[0], xs[1]) }
				checkGrad(t, f, ts(a, b))
				// Also the same operand on both sides.
				checkGrad(t, func(xs []*tensor.Tensor) *tensor.Tensor { return op.f(xs[0], xs[0]) }, ts(a))
			})
		}
	}
}

// Where the operands of Maximum/Minimum are equal the gradient is split
// evenly, as in JAX.
func TestMinMaxTies(t *testing.T) {
	for _, f := range []func(a, b *tensor.Tensor) *tensor.Tensor{tensor.Maximum, tensor.Minimum} {
		a := tensor.FromFloat32([]float32{1, 2, 3})
		b := tensor.FromFloat32([]float32{1, 5, 0})
		g := grad(func(xs []*tensor.Tensor) *tensor.Tensor { return f(xs[0], xs[1]) }, ts(a, b))
		isMax := f(tensor.Scalar(0), tensor.Scalar(1)).Item() == 1
		if isMax {
			assert.Equal(t, []float32{0.5, 0, 1}, g[0].Float32s())
			assert.Equal(t, []float32{0.5, 1, 0}, g[1].Float32s())
		} else {
			assert.Equal(t, []float32{0.5, 1, 0}, g[0].Float32s())
			assert.Equal(t, []float32{0.5, 0, 1}, g[1].Float32s())
		}
		// Tie against a broadcast scalar: the scalar collects its halves.
		g = grad(func(xs []*tensor.Tensor) *tensor.Tensor { return f(xs[0], xs[1]) }, ts(tensor.FromFloat32([]float32{1, 1, 1}), tensor.Scalar(1)))
		assert.Equal(t, []float32{0.5, 0.5, 0.5}, g[0].Float32s())
		assert.Equal(t, []float32{1.5}, g[1].Float32s())
		// max(x, x): the halves add up to 1.
		g = grad(func(xs []*tensor.Tensor) *tensor.Tensor { return f(xs[0], xs[0]) }, ts(a))
		assert.Equal(t, []float32{1, 1, 1}, g[0].Float32s())
	}
}

// Pow's derivatives at a = 0 follow JAX: d/da a^b = 0 where b == 0 and
// d/db a^b uses log(a) replaced by 0 where a == 0.
func TestPowAtZero(t *testing.T) {
	a := tensor.FromFloat32([]float32{0, 0, 0, 0, 2})
	b := tensor.FromFloat32([]float32{0, 1, 2, 3, 0})
	g := grad(func(xs []*tensor.Tensor) *tensor.Tensor { return tensor.Pow(xs[0], xs[1]) }, ts(a, b))
	// d/da: b·a^(b-1) → 0 (b=0), 1, 0, 0, 0 (b=0).
	requireExact(t, tensor.Float32, []int{5}, []float64{0, 1, 0, 0, 0}, g[0])
	// d/db: a^b·log a → 0 where a == 0; log(2)·1 at a=2, b=0.
	requireExact(t, tensor.Float32, []int{5}, []float64{0, 0, 0, 0, f32(math.Log(2))}, g[1])

	// Finite differences agree at a = 0 for b >= 1 (one-sided kinks aside).
	checkGrad(t, func(xs []*tensor.Tensor) *tensor.Tensor { return tensor.Pow(xs[0], tensor.Scalar(2)) }, ts(tensor.FromFloat32([]float32{0, 1})))
	checkGrad(t, func(xs []*tensor.Tensor) *tensor.Tensor { return tensor.Pow(tensor.Scalar(0), xs[0]) }, ts(tensor.FromFloat32([]float32{1, 2})))

	// The second derivative with respect to b at a = 0 is finite (no NaN
	// from the unselected log(0) branch).
	gb := gradOf(func(xs []*tensor.Tensor) *tensor.Tensor { return tensor.Pow(xs[0], xs[1]) }, 1)
	gg := grad(gb, ts(tensor.FromFloat32([]float32{0, 2}), tensor.FromFloat32([]float32{2, 2})))
	for i, v := range gg[1].Float32s() {
		require.False(t, math.IsNaN(float64(v)), "d²/db² a^b element %d is NaN", i)
	}
	require.InDelta(t, 4*math.Log(2)*math.Log(2), gg[1].At(1), 1e-5)
}

// Where Maximum/Minimum is NaN neither operand was selected: like JAX, both
// get a zero cotangent, so a NaN masked out downstream does not leak NaN
// into the gradient of the other operand.
func TestMinMaxNaNGradient(t *testing.T) {
	nan := float32(math.NaN())
	for _, f := range []func(a, b *tensor.Tensor) *tensor.Tensor{tensor.Maximum, tensor.Minimum} {
		x := tensor.FromFloat32([]float32{1, 2, 3})
		other := tensor.FromFloat32([]float32{nan, 0, nan})
		g := grad(func(xs []*tensor.Tensor) *tensor.Tensor {
			m := f(xs[0], xs[1])
			return tensor.Where(tensor.IsNaN(m), tensor.Scalar(0), m)
		}, ts(x, other))
		isMax := f(tensor.Scalar(0), tensor.Scalar(1)).Item() == 1
		want0 := []float64{0, 1, 0}
		want1 := []float64{0, 0, 0}
		if !isMax {
			want0, want1 = []float64{0, 0, 0}, []float64{0, 1, 0}
		}
		requireExact(t, tensor.Float32, []int{3}, want0, g[0])
		requireExact(t, tensor.Float32, []int{3}, want1, g[1])
	}
}

// Random broadcast-compatible shapes of rank 0 to 5 with dimensions 0 to 3:
// binary ops, Where, comparisons, BroadcastTo and the VJP's unbroadcast
// against index arithmetic.
func TestRandomBroadcastShapes(t *testing.T) {
	rng := newRNG(99)
	randShape := func(rank int) []int {
		s := make([]int, rank)
		for i := range s {
			s[i] = rng.IntN(4)
		}
		return s
	}
	// derive returns a shape that broadcasts with out: a suffix of it with
	// some dimensions replaced by 1.
	derive := func(out []int) []int {
		r := rng.IntN(len(out) + 1)
		s := append([]int{}, out[len(out)-r:]...)
		for i := range s {
			if rng.IntN(3) == 0 {
				s[i] = 1
			}
		}
		return s
	}
	for iter := 0; iter < 400; iter++ {
		out := randShape(rng.IntN(6))
		sa, sb, sc := derive(out), derive(out), derive(out)
		a, b := randF32(rng, sa...), randF32(rng, sb...)
		c := randBool(rng, sc...)
		want, abShape := refBinary(a, b, func(x, y float64) float64 { return f32(x - y) })
		requireExact(t, tensor.Float32, abShape, want, tensor.Sub(a, b), "%v - %v", sa, sb)
		want, _ = refBinary(a, b, func(x, y float64) float64 { return b2f(x < y) })
		requireExact(t, tensor.Bool, abShape, want, tensor.Less(a, b), "%v < %v", sa, sb)
		want, shape := refWhere(c, a, b)
		requireExact(t, tensor.Float32, shape, want, tensor.Where(c, a, b), "where %v %v %v", sc, sa, sb)
		bt := tensor.BroadcastTo(a, shape...)
		want, _ = refBinary(a, tensor.Zeros(tensor.Float32, shape...), func(x, _ float64) float64 { return x })
		requireExact(t, tensor.Float32, shape, want, bt, "%v to %v", sa, shape)
		// The gradient of Σ c·(a·b) with respect to a sums over a's
		// broadcast dimensions.
		g := grad(func(xs []*tensor.Tensor) *tensor.Tensor { return tensor.Mul(xs[0], xs[1]) }, ts(a, b))
		wantA, _ := refReduceTo(b, abShape, sa)
		requireClose(t, wantA, g[0], 1e-5, 1e-5, "grad %v * %v", sa, sb)
	}
}

// refReduceTo broadcasts v to shape and sums it back down to target by
// index arithmetic.
func refReduceTo(v *tensor.Tensor, shape, target []int) ([]float64, []int) {
	vals := v.Float64s()
	out := make([]float64, numel(target))
	for o := 0; o < numel(shape); o++ {
		idx := unravel(o, shape)
		out[bcastIndex(idx, target)] += vals[bcastIndex(idx, v.Shape())]
	}
	return out, target
}
