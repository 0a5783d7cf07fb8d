package tensor_test

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/tensor"
)

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

var compareCases = []struct {
	name   string
	f      func(a, b *tensor.Tensor) *tensor.Tensor
	ref    func(a, b float64) bool
	boolOK bool
}{
	{"Equal", tensor.Equal, func(a, b float64) bool { return a == b }, true},
	{"NotEqual", tensor.NotEqual, func(a, b float64) bool { return a != b }, true},
	{"Less", tensor.Less, func(a, b float64) bool { return a < b }, false},
	{"LessEqual", tensor.LessEqual, func(a, b float64) bool { return a <= b }, false},
	{"Greater", tensor.Greater, func(a, b float64) bool { return a > b }, false},
	{"GreaterEqual", tensor.GreaterEqual, func(a, b float64) bool { return a >= b }, false},
}

func TestCompare(t *testing.T) {
	rng := newRNG(5)
	for _, c := range compareCases {
		for _, dt := range []tensor.DType{tensor.Float32, tensor.Int32, tensor.Bool} {
			if dt == tensor.Bool && !c.boolOK {
				continue
			}
			for _, sh := range broadcastPairs {
				t.Run(c.name+dt.String()+shapeName(sh[0])+shapeName(sh[1]), func(t *testing.T) {
					var a, b *tensor.Tensor
					switch dt {
					case tensor.Float32: // few distinct values, so ties occur
						a = tensor.AsType(randI32(rng, -2, 3, sh[0]...), tensor.Float32)
						b = tensor.AsType(randI32(rng, -2, 3, sh[1]...), tensor.Float32)
					case tensor.Int32:
						a, b = randI32(rng, -2, 3, sh[0]...), randI32(rng, -2, 3, sh[1]...)
					default:
						a, b = randBool(rng, sh[0]...), randBool(rng, sh[1]...)
					}
					before := snapshot(a, b)
					got := c.f(a, b)
					want, shape := refBinary(a, b, func(x, y float64) float64 { return b2f(c.ref(x, y)) })
					requireExact(t, tensor.Bool, shape, want, got)
					requireUnchanged(t, before)
				})
			}
		}
	}
}

func TestCompareNaN(t *testing.T) {
	nan := float32(math.NaN())
	a := tensor.FromFloat32([]float32{nan, nan, 1, float32(math.Inf(1))})
	b := tensor.FromFloat32([]float32{nan, 1, nan, float32(math.Inf(1))})
	for _, c := range compareCases {
		want, _ := refBinary(a, b, func(x, y float64) float64 { return b2f(c.ref(x, y)) })
		requireExact(t, tensor.Bool, []int{4}, want, c.f(a, b), c.name)
	}
	assert.Equal(t, []bool{false, false, false, true}, tensor.Equal(a, b).Bools())
	assert.Equal(t, []bool{true, true, true, false}, tensor.NotEqual(a, b).Bools())
}

func TestLogical(t *testing.T) {
	rng := newRNG(6)
	cases := []struct {
		name string
		f    func(a, b *tensor.Tensor) *tensor.Tensor
		ref  func(a, b bool) bool
	}{
		{"LogicalAnd", tensor.LogicalAnd, func(a, b bool) bool { return a && b }},
		{"LogicalOr", tensor.LogicalOr, func(a, b bool) bool { return a || b }},
		{"LogicalXor", tensor.LogicalXor, func(a, b bool) bool { return a != b }},
	}
	for _, c := range cases {
		for _, sh := range broadcastPairs {
			a, b := randBool(rng, sh[0]...), randBool(rng, sh[1]...)
			before := snapshot(a, b)
			want, shape := refBinary(a, b, func(x, y float64) float64 { return b2f(c.ref(x != 0, y != 0)) })
			requireExact(t, tensor.Bool, shape, want, c.f(a, b), "%s %v %v", c.name, sh[0], sh[1])
			requireUnchanged(t, before)
		}
	}
	x := tensor.FromBool([]bool{true, false, true, true}, 2, 2)
	requireExact(t, tensor.Bool, []int{2, 2}, []float64{0, 1, 0, 0}, tensor.LogicalNot(x))
	requireExact(t, tensor.Bool, []int{}, []float64{1}, tensor.LogicalNot(tensor.ScalarBool(false)))
	requireExact(t, tensor.Bool, []int{0}, []float64{}, tensor.LogicalNot(tensor.Zeros(tensor.Bool, 0)))
	assert.Equal(t, []bool{true, false, true, true}, x.Bools(), "LogicalNot changed its input")
}

func TestIsNaNIsFinite(t *testing.T) {
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	x := tensor.FromFloat32([]float32{0, nan, inf, -inf, 1e38, -1e-45}, 2, 3)
	requireExact(t, tensor.Bool, []int{2, 3}, []float64{0, 1, 0, 0, 0, 0}, tensor.IsNaN(x))
	requireExact(t, tensor.Bool, []int{2, 3}, []float64{1, 0, 0, 0, 1, 1}, tensor.IsFinite(x))
	requireExact(t, tensor.Bool, []int{}, []float64{1}, tensor.IsNaN(tensor.Scalar(nan)))
	requireExact(t, tensor.Bool, []int{0, 2}, []float64{}, tensor.IsFinite(tensor.Zeros(tensor.Float32, 0, 2)))
}

// refWhere computes jnp.where by index arithmetic.
func refWhere(c, a, b *tensor.Tensor) ([]float64, []int) {
	shape := refBroadcast(c.Shape(), a.Shape(), b.Shape())
	cv, av, bv := c.Float64s(), a.Float64s(), b.Float64s()
	out := make([]float64, numel(shape))
	for o := range out {
		idx := unravel(o, shape)
		if cv[bcastIndex(idx, c.Shape())] != 0 {
			out[o] = av[bcastIndex(idx, a.Shape())]
		} else {
			out[o] = bv[bcastIndex(idx, b.Shape())]
		}
	}
	return out, shape
}

var whereShapes = [][3][]int{
	{{4}, {4}, {4}},
	{{3, 1}, {1, 4}, {}},
	{{}, {2, 3}, {3}},
	{{2, 1, 3}, {4, 1}, {1, 1, 1}},
	{{1}, {0}, {1}},
	{{2, 3, 4}, {2, 3, 4}, {2, 3, 4}},
	{{1, 3, 1}, {2, 1, 1}, {1, 1, 5}},
	{{}, {}, {}},
	{{5}, {}, {}},
	// An attention mask: runs merge across the last two dimensions.
	{{1, 1, 8, 8}, {2, 4, 8, 8}, {}},
	{{2, 4, 8, 8}, {2, 4, 8, 8}, {2, 4, 1, 8}},
	{{3, 1, 5}, {3, 4, 5}, {3, 4, 1}},
}

func TestWhere(t *testing.T) {
	rng := newRNG(7)
	for _, dt := range []tensor.DType{tensor.Float32, tensor.Int32, tensor.Bool} {
		for _, sh := range whereShapes {
			c := randBool(rng, sh[0]...)
			var a, b *tensor.Tensor
			switch dt {
			case tensor.Float32:
				a, b = randF32(rng, sh[1]...), randF32(rng, sh[2]...)
			case tensor.Int32:
				a, b = randI32(rng, -9, 9, sh[1]...), randI32(rng, -9, 9, sh[2]...)
			default:
				a, b = randBool(rng, sh[1]...), randBool(rng, sh[2]...)
			}
			before := snapshot(c, a, b)
			want, shape := refWhere(c, a, b)
			requireExact(t, dt, shape, want, tensor.Where(c, a, b), "%v %v", dt, sh)
			requireUnchanged(t, before)
		}
	}
	// Large enough to be split over goroutines.
	c := randBool(rng, 1, 100, 300)
	a, b := randF32(rng, 3, 100, 300), randF32(rng, 3, 1, 300)
	want, shape := refWhere(c, a, b)
	requireExact(t, tensor.Float32, shape, want, tensor.Where(c, a, b))
	// NaN passes through whichever branch is selected.
	nan := float32(math.NaN())
	got := tensor.Where(tensor.FromBool([]bool{true, false}), tensor.FromFloat32([]float32{nan, nan}), tensor.Scalar(1))
	requireExact(t, tensor.Float32, []int{2}, []float64{math.NaN(), 1}, got)
}

func TestWhereVJP(t *testing.T) {
	rng := newRNG(8)
	for _, sh := range whereShapes {
		c := randBool(rng, sh[0]...)
		a, b := randF32(rng, sh[1]...), randF32(rng, sh[2]...)
		checkGrad(t, func(xs []*tensor.Tensor) *tensor.Tensor { return tensor.Where(c, xs[0], xs[1]) }, ts(a, b))
	}
	// Hand-worked: cotangents go to the selected side, summed over broadcasts.
	c := tensor.FromBool([]bool{true, false, true, true}, 2, 2)
	g := grad(func(xs []*tensor.Tensor) *tensor.Tensor { return tensor.Where(c, xs[0], xs[1]) },
		ts(tensor.FromFloat32([]float32{1, 2}, 1, 2), tensor.Scalar(5)))
	requireExact(t, tensor.Float32, []int{1, 2}, []float64{2, 1}, g[0])
	requireExact(t, tensor.Float32, []int{}, []float64{1}, g[1])
	// The condition gets no gradient and may be computed from traced values.
	g = grad(func(xs []*tensor.Tensor) *tensor.Tensor {
		return tensor.Where(tensor.Greater(xs[0], tensor.Scalar(0)), xs[0], tensor.Neg(xs[0]))
	}, ts(tensor.FromFloat32([]float32{-2, 3})))
	requireExact(t, tensor.Float32, []int{2}, []float64{-1, 1}, g[0])
}

func TestAsType(t *testing.T) {
	nan, inf := math.NaN(), math.Inf(1)
	tests := []struct {
		name     string
		x        *tensor.Tensor
		to       tensor.DType
		want     []float64
		identity bool
	}{
		{"f32→i32 truncates", tensor.FromFloat64([]float64{2.7, -2.7, 0.5, -0.5, 0}), tensor.Int32, []float64{2, -2, 0, 0, 0}, false},
		{"f32→i32 saturates", tensor.FromFloat64([]float64{3e9, -3e9, inf, -inf, 2147483520, -2147483648}), tensor.Int32, []float64{math.MaxInt32, math.MinInt32, math.MaxInt32, math.MinInt32, 2147483520, math.MinInt32}, false},
		{"f32→i32 NaN→0", tensor.FromFloat64([]float64{nan}), tensor.Int32, []float64{0}, false},
		{"i32→f32 rounds", tensor.FromInts([]int{16777217, -3, math.MaxInt32}), tensor.Float32, []float64{16777216, -3, 2147483648}, false},
		{"f32→bool", tensor.FromFloat64([]float64{0, math.Copysign(0, -1), nan, 0.1, -inf}), tensor.Bool, []float64{0, 0, 1, 1, 1}, false},
		{"i32→bool", tensor.FromInts([]int{0, 1, -7}), tensor.Bool, []float64{0, 1, 1}, false},
		{"bool→f32", tensor.FromBool([]bool{true, false}), tensor.Float32, []float64{1, 0}, false},
		{"bool→i32", tensor.FromBool([]bool{true, false}), tensor.Int32, []float64{1, 0}, false},
		{"f32→f32", tensor.FromFloat64([]float64{1.5}), tensor.Float32, []float64{1.5}, true},
		{"i32→i32", tensor.FromInts([]int{1}), tensor.Int32, []float64{1}, true},
		{"bool→bool", tensor.FromBool([]bool{true}), tensor.Bool, []float64{1}, true},
		{"empty", tensor.Zeros(tensor.Float32, 0, 3), tensor.Int32, []float64{}, false},
		{"scalar", tensor.Scalar(-1.9), tensor.Int32, []float64{-1}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := snapshot(tt.x)
			got := tensor.AsType(tt.x, tt.to)
			requireExact(t, tt.to, tt.x.Shape(), tt.want, got)
			requireUnchanged(t, before)
			if tt.identity {
				assert.Same(t, tt.x, got)
			}
		})
	}
	// Conversions are not differentiable: a round trip through int32 cuts
	// the gradient.
	g := grad(func(xs []*tensor.Tensor) *tensor.Tensor {
		return tensor.Add(xs[0], tensor.AsType(tensor.AsType(xs[0], tensor.Int32), tensor.Float32))
	}, ts(tensor.FromFloat32([]float32{1.5, 2})))
	requireExact(t, tensor.Float32, []int{2}, []float64{1, 1}, g[0])
}

func TestCompareResultsUntraced(t *testing.T) {
	tr := tensor.NewTrace()
	x := tr.Leaf(tensor.FromFloat32([]float32{1, 2}))
	require.True(t, x.IsTraced())
	for name, y := range map[string]*tensor.Tensor{
		"Equal":    tensor.Equal(x, x),
		"Less":     tensor.Less(x, tensor.Scalar(2)),
		"IsNaN":    tensor.IsNaN(x),
		"IsFinite": tensor.IsFinite(x),
		"AsType":   tensor.AsType(x, tensor.Int32),
		"Where":    tensor.Where(tensor.Equal(x, x), tensor.Arange(2), tensor.ScalarInt(0)),
	} {
		assert.False(t, y.IsTraced(), name)
	}
}

func TestComparePanics(t *testing.T) {
	f2 := tensor.Zeros(tensor.Float32, 2)
	i2 := tensor.Zeros(tensor.Int32, 2)
	b2 := tensor.Zeros(tensor.Bool, 2)
	tests := []struct {
		f   func()
		msg string
	}{
		{func() { tensor.Equal(f2, i2) }, "tensor.Equal: f32[2] == i32[2]: dtypes differ; convert one with tensor.AsType"},
		{func() { tensor.Less(b2, b2) }, "tensor.Less: bool[2] < bool[2]: not defined for bool"},
		{func() { tensor.GreaterEqual(b2, b2) }, "tensor.GreaterEqual: bool[2] >= bool[2]: not defined for bool"},
		{func() { tensor.Greater(f2, tensor.Zeros(tensor.Float32, 3)) }, "tensor.Greater: f32[2] > f32[3]: shapes do not broadcast (dim -1: 2 vs 3)"},
		{func() { tensor.LogicalAnd(f2, f2) }, "tensor.LogicalAnd: f32[2] && f32[2]: operands must be bool"},
		{func() { tensor.LogicalOr(b2, i2) }, "tensor.LogicalOr: bool[2] || i32[2]: operands must be bool"},
		{func() { tensor.LogicalXor(b2, tensor.Zeros(tensor.Bool, 3)) }, "tensor.LogicalXor: bool[2] ^ bool[3]: shapes do not broadcast (dim -1: 2 vs 3)"},
		{func() { tensor.LogicalNot(f2) }, "tensor.LogicalNot: f32[2]: operand must be bool"},
		{func() { tensor.IsNaN(i2) }, "tensor.IsNaN: i32[2] is int32, want a float dtype (float32, float64, bfloat16, float16)"},
		{func() { tensor.IsFinite(b2) }, "tensor.IsFinite: bool[2] is bool, want a float dtype (float32, float64, bfloat16, float16)"},
		{func() { tensor.Where(f2, f2, f2) }, "tensor.Where: condition f32[2] must be bool"},
		{func() { tensor.Where(b2, f2, i2) }, "tensor.Where: f32[2], i32[2]: dtypes differ"},
		{func() { tensor.Where(b2, f2, tensor.Zeros(tensor.Float32, 3)) }, "tensor.Where: bool[2], f32[2], f32[3]: shapes do not broadcast (dim -1: 2 vs 3)"},
		{func() { tensor.AsType(f2, tensor.DType(0)) }, "tensor.AsType: f32[2]: invalid dtype DType(0)"},
	}
	for _, tt := range tests {
		requirePanic(t, tt.msg, tt.f)
	}
}
