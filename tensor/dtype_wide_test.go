package tensor_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/tensor"
)

func TestWideDTypeNames(t *testing.T) {
	cases := []struct {
		dt             tensor.DType
		name, abbrev   string
		size           int
		isFloat, isInt bool
	}{
		{tensor.Float64, "float64", "f64", 8, true, false},
		{tensor.Int64, "int64", "i64", 8, false, true},
		{tensor.Uint8, "uint8", "u8", 1, false, true},
		{tensor.Float32, "float32", "f32", 4, true, false},
		{tensor.Int32, "int32", "i32", 4, false, true},
	}
	for _, c := range cases {
		assert.Equal(t, c.name, c.dt.String())
		assert.Equal(t, c.abbrev, c.dt.Abbrev())
		assert.Equal(t, c.size, c.dt.Size(), c.name)
		assert.Equal(t, c.isFloat, c.dt.IsFloat(), c.name)
		assert.Equal(t, c.isInt, c.dt.IsInt(), c.name)
		x := tensor.Zeros(c.dt, 3, 4)
		assert.Equal(t, c.abbrev+"[3,4]", x.String())
		assert.Equal(t, c.name+"[3,4]", x.Type())
		assert.Equal(t, 12*c.size, x.Bytes())
	}
}

func TestWideConstructorsAndAccessors(t *testing.T) {
	third := 1.0 / 3
	x := tensor.FromFloat64s([]float64{third, -2, 1e300}, 3)
	assert.Equal(t, tensor.Float64, x.DType())
	assert.Equal(t, []float64{third, -2, 1e300}, x.Float64s(), "float64 kept exactly")
	assert.Equal(t, third, x.At(0))
	assert.Equal(t, []float64{third, -2, 1e300}, x.RawFloat64())
	assert.Equal(t, tensor.Float32, tensor.FromFloat64([]float64{third}).DType(), "FromFloat64 keeps JAX's default float32")

	big := int64(1)<<53 + 1 // not a float64
	i := tensor.FromInt64([]int64{big, -7, math.MinInt64}, 1, 3)
	assert.Equal(t, []int64{big, -7, math.MinInt64}, i.Int64s())
	assert.Equal(t, []int64{big, -7, math.MinInt64}, i.RawInt64())
	u := tensor.FromUint8([]uint8{0, 128, 255}, 3)
	assert.Equal(t, []uint8{0, 128, 255}, u.Uint8s())
	assert.Equal(t, []float64{0, 128, 255}, u.Float64s())
	assert.Equal(t, []uint8{0, 128, 255}, u.RawUint8())

	assert.Equal(t, []float64{1.5}, tensor.ScalarFloat64(1.5).Float64s())
	assert.Equal(t, []int64{big}, tensor.ScalarInt64(big).Int64s())
	assert.Equal(t, []float64{2.5, 2.5}, tensor.Full(tensor.Float64, 2.5, 2).Float64s())
	assert.Equal(t, []int64{1, 1}, tensor.Ones(tensor.Int64, 2).Int64s())
	assert.Equal(t, []uint8{7, 7}, tensor.Full(tensor.Uint8, 7, 2).Uint8s())
	assert.Equal(t, []float64{0, 0}, tensor.ZerosLike(tensor.FromFloat64s([]float64{1, 2})).Float64s())

	d := []float64{1, 2}
	w := tensor.WrapFloat64(d, 2)
	assert.Equal(t, d, w.Float64s())
	assert.Equal(t, []int64{3}, tensor.WrapInt64([]int64{3}).Int64s())
	assert.Equal(t, []uint8{4}, tensor.WrapUint8([]uint8{4}).Uint8s())

	requirePanic(t, "tensor.Full: 1.5 is not an int64", func() { tensor.Full(tensor.Int64, 1.5, 2) })
	requirePanic(t, "tensor.Full: 256 is not a uint8", func() { tensor.Full(tensor.Uint8, 256, 2) })
	requirePanic(t, "tensor.FromFloat64s: 3 elements do not fit shape [2 2] (4 elements)", func() { tensor.FromFloat64s([]float64{1, 2, 3}, 2, 2) })
	requirePanic(t, "Tensor.Int64s: f64[3] is float64, want int64", func() { x.Int64s() })
	requirePanic(t, "Tensor.Uint8s: i64[1,3] is int64, want uint8", func() { i.Uint8s() })
	requirePanic(t, "Tensor.RawFloat64: f32[1] is float32, want float64", func() { tensor.FromFloat32([]float32{1}).RawFloat64() })
}

func TestWideFormat(t *testing.T) {
	assert.Equal(t, "[               0.1 0.3333333333333333                nan               -inf]",
		tensor.FromFloat64s([]float64{0.1, 1.0 / 3, math.NaN(), math.Inf(-1)}).Values(), "shortest float64 decimals")
	assert.Equal(t, "[[9007199254740993               -1]]", tensor.FromInt64([]int64{1<<53 + 1, -1}, 1, 2).Values())
	assert.Equal(t, "[  0 255]", tensor.FromUint8([]uint8{0, 255}).Values())
	assert.Equal(t, "[0.33]", fmt.Sprintf("%.2f", tensor.FromFloat64s([]float64{1.0 / 3})))
}

// AsType between every pair of the non-half dtypes, against Go's
// conversions with JAX's rules: float to int truncates and saturates (NaN
// is 0), int to int wraps, nonzero is true.
func TestWideAsType(t *testing.T) {
	cases := []struct {
		name string
		x    *tensor.Tensor
		dt   tensor.DType
		want any
	}{
		{"f64->i32 saturates", tensor.FromFloat64s([]float64{-2.7, 2.7, 1e10, -1e10, math.NaN()}), tensor.Int32, []int32{-2, 2, math.MaxInt32, math.MinInt32, 0}},
		{"f64->i64", tensor.FromFloat64s([]float64{-2.7, 1e19, 9007199254740992}), tensor.Int64, []int64{-2, math.MaxInt64, 9007199254740992}},
		{"f64->u8", tensor.FromFloat64s([]float64{-3, 3.9, 300}), tensor.Uint8, []uint8{0, 3, 255}},
		{"f64->f32 rounds", tensor.FromFloat64s([]float64{1.0 / 3, 1e300}), tensor.Float32, []float32{1.0 / 3, float32(math.Inf(1))}},
		{"f64->bool", tensor.FromFloat64s([]float64{0, -0.5, math.NaN()}), tensor.Bool, []bool{false, true, true}},
		{"f32->f64 exact", tensor.FromFloat32([]float32{0.1}), tensor.Float64, []float64{float64(float32(0.1))}},
		{"i64->i32 wraps", tensor.FromInt64([]int64{1<<32 + 5, -1}), tensor.Int32, []int32{5, -1}},
		{"i64->f64 rounds", tensor.FromInt64([]int64{1<<53 + 1}), tensor.Float64, []float64{1 << 53}},
		{"i64->u8 wraps", tensor.FromInt64([]int64{300, -1}), tensor.Uint8, []uint8{44, 255}},
		{"i64->bool", tensor.FromInt64([]int64{1 << 60, 0}), tensor.Bool, []bool{true, false}},
		{"i32->i64", tensor.FromInt32([]int32{math.MinInt32, 3}), tensor.Int64, []int64{math.MinInt32, 3}},
		{"i32->u8 wraps", tensor.FromInt32([]int32{256, 257, -2}), tensor.Uint8, []uint8{0, 1, 254}},
		{"u8->f32", tensor.FromUint8([]uint8{0, 255}), tensor.Float32, []float32{0, 255}},
		{"u8->f64", tensor.FromUint8([]uint8{7}), tensor.Float64, []float64{7}},
		{"u8->i64", tensor.FromUint8([]uint8{200}), tensor.Int64, []int64{200}},
		{"u8->i32", tensor.FromUint8([]uint8{200}), tensor.Int32, []int32{200}},
		{"bool->i64", tensor.FromBool([]bool{true, false}), tensor.Int64, []int64{1, 0}},
		{"bool->u8", tensor.FromBool([]bool{true}), tensor.Uint8, []uint8{1}},
		{"bool->f64", tensor.FromBool([]bool{true, false}), tensor.Float64, []float64{1, 0}},
		{"f64->bf16 via f32", tensor.FromFloat64s([]float64{1.0 / 3}), tensor.BFloat16, []uint16{0x3eab}},
	}
	for _, c := range cases {
		y := tensor.AsType(c.x, c.dt)
		require.Equal(t, c.dt, y.DType(), c.name)
		var got any
		switch c.dt {
		case tensor.Float32:
			got = y.Float32s()
		case tensor.Float64:
			got = y.Float64s()
		case tensor.Int32:
			got = y.Int32s()
		case tensor.Int64:
			got = y.Int64s()
		case tensor.Uint8:
			got = y.Uint8s()
		case tensor.Bool:
			got = y.Bools()
		case tensor.BFloat16:
			got = y.Bits16()
		}
		assert.Equal(t, c.want, got, c.name)
	}
}

// Convert between float32 and float64 is differentiable both ways: the
// cotangent comes back in the input's dtype.
func TestWideConvertGrad(t *testing.T) {
	x32 := tensor.FromFloat32([]float32{0.5, -2}, 2)
	g := grad(func(xs []*tensor.Tensor) *tensor.Tensor {
		y := tensor.Convert(xs[0], tensor.Float64)
		return tensor.Convert(tensor.Mul(y, y), tensor.Float32)
	}, ts(x32))[0]
	require.Equal(t, tensor.Float32, g.DType())
	assert.Equal(t, []float32{1, -4}, g.Float32s())

	x64 := tensor.FromFloat64s([]float64{1.0 / 3}, 1)
	g = grad(func(xs []*tensor.Tensor) *tensor.Tensor {
		return tensor.Convert(tensor.Mul(xs[0], tensor.ScalarFloat64(3)), tensor.Float32)
	}, ts(x64))[0]
	require.Equal(t, tensor.Float64, g.DType())
	assert.Equal(t, []float64{3}, g.Float64s())
	assert.Equal(t, tensor.Float64, tensor.Convert(tensor.FromBits16(tensor.BFloat16, []uint16{0x3f80}), tensor.Float64).DType())
	assert.Equal(t, []float64{1}, tensor.Convert(tensor.FromBits16(tensor.BFloat16, []uint16{0x3f80}), tensor.Float64).Float64s())
}

// An op that does not declare a dtype among Float64, Int64 and Uint8
// panics naming itself and its operands, instead of reading the data as
// float32.
func TestWideUndeclaredOpPanics(t *testing.T) {
	op := &tensor.Op{Name: "my_op", Impl: func(in []*tensor.Tensor, _ any) *tensor.Tensor { return in[0] }}
	x := tensor.FromFloat64s([]float64{1, 2}, 2)
	requirePanic(t, `tensor: op "my_op" is not defined for float64 operands (f64[2], f32[]); convert them with tensor.Convert or tensor.AsType`,
		func() { tensor.Apply(op, nil, x, tensor.Scalar(1)) })
	requirePanic(t, `tensor: op "my_op" is not defined for uint8 operands (u8[1]); convert them with tensor.Convert or tensor.AsType`,
		func() { tensor.Apply(op, nil, tensor.FromUint8([]uint8{1})) })
	op.Traits.Types = tensor.TypesFloat64
	assert.Equal(t, []float64{1, 2}, tensor.Apply(op, nil, x).Float64s())
	requirePanic(t, "tensor.Add: u8[1] + u8[1]: not defined for uint8", func() {
		u := tensor.FromUint8([]uint8{1})
		tensor.Add(u, u)
	})
}

// Float64 storage made by ops goes back to the allocator cache when
// donated, and is served again.
func TestWideRecycling(t *testing.T) {
	if raceEnabled {
		t.Skip("sync.Pool drops what it is given at random under -race")
	}
	a := tensor.Full(tensor.Float64, 1, 4096)
	y := tensor.Add(a, a)
	tensor.Donate(y)
	hits := tensor.CacheHits()
	z := tensor.Add(a, a)
	assert.Greater(t, tensor.CacheHits(), hits, "the float64 cache served nothing")
	assert.Equal(t, 2.0, z.At(4095))
}

// rand64 returns a Float64 tensor of values uniform in [lo, hi).
func rand64(rng *rand.Rand, lo, hi float64, shape ...int) *tensor.Tensor {
	d := make([]float64, numel(shape))
	for i := range d {
		d[i] = lo + (hi-lo)*rng.Float64()
	}
	return tensor.FromFloat64s(d, shape...)
}

// requireClose64 checks got (Float64) against want within rtol of the
// largest |want| (and atol 1e-300).
func requireClose64(t *testing.T, want []float64, got *tensor.Tensor, rtol float64, msg string) {
	t.Helper()
	require.Equal(t, tensor.Float64, got.DType(), msg)
	g := got.Float64s()
	require.Len(t, g, len(want), msg)
	scale := 0.0
	for _, v := range want {
		scale = max(scale, math.Abs(v))
	}
	for i := range want {
		require.InDelta(t, want[i], g[i], rtol*scale+1e-300, "%s: element %d", msg, i)
	}
}

// Float64 ops against float64 loops and the math package: results correct
// to float64 rounding, far beyond float32's 1e-7.
func TestFloat64AgainstLoops(t *testing.T) {
	rng := newRNG(64)
	a, b := rand64(rng, -1, 1, 2, 5, 7), rand64(rng, -1, 1, 7, 3)
	ad, bd := a.Float64s(), b.Float64s()
	want := make([]float64, 2*5*3)
	for p := range 2 {
		for i := range 5 {
			for j := range 3 {
				s := 0.0
				for k := range 7 {
					s += ad[(p*5+i)*7+k] * bd[k*3+j]
				}
				want[(p*5+i)*3+j] = s
			}
		}
	}
	requireClose64(t, want, tensor.MatMul(a, b), 1e-14, "MatMul batched")
	requireClose64(t, want[:15], tensor.MatMul(tensor.Reshape(tensor.SliceAxis(a, 0, 0, 1), 5, 7), b), 1e-14, "MatMul")
	requireClose64(t, want[:15], tensor.T(tensor.MatMulT(b, tensor.Reshape(tensor.SliceAxis(a, 0, 0, 1), 5, 7), true, true)), 1e-14, "MatMulT")
	// A large product takes gemm.Dgemm's blocked path on every core.
	big1, big2 := rand64(rng, -1, 1, 130, 300), rand64(rng, -1, 1, 300, 70)
	c := tensor.MatMul(big1, big2).Float64s()
	x1, x2 := big1.Float64s(), big2.Float64s()
	for _, ij := range [][2]int{{0, 0}, {129, 69}, {64, 33}} {
		s := 0.0
		for k := range 300 {
			s += x1[ij[0]*300+k] * x2[k*70+ij[1]]
		}
		assert.InDelta(t, s, c[ij[0]*70+ij[1]], 1e-12, "MatMul 130x300x70 at %v", ij)
	}

	x := rand64(rng, -3, 3, 3, 4)
	xd := x.Float64s()
	unary := []struct {
		name string
		f    func(*tensor.Tensor) *tensor.Tensor
		ref  func(float64) float64
	}{
		{"Exp", tensor.Exp, math.Exp}, {"Tanh", tensor.Tanh, math.Tanh}, {"Sin", tensor.Sin, math.Sin},
		{"Sqrt∘Abs", func(x *tensor.Tensor) *tensor.Tensor { return tensor.Sqrt(tensor.Abs(x)) }, func(v float64) float64 { return math.Sqrt(math.Abs(v)) }},
		{"Log∘Abs", func(x *tensor.Tensor) *tensor.Tensor { return tensor.Log(tensor.Abs(x)) }, func(v float64) float64 { return math.Log(math.Abs(v)) }},
		{"Sigmoid", tensor.Sigmoid, func(v float64) float64 { return 1 / (1 + math.Exp(-v)) }},
		{"Erf", tensor.Erf, math.Erf},
	}
	for _, u := range unary {
		w := make([]float64, len(xd))
		for i, v := range xd {
			w[i] = u.ref(v)
		}
		requireClose64(t, w, u.f(x), 1e-14, u.name)
	}

	sum := make([]float64, 3)
	for i := range 3 {
		for j := range 4 {
			sum[i] += xd[i*4+j]
		}
	}
	requireClose64(t, sum, tensor.Sum(x, 1), 1e-15, "Sum")
	sm := make([]float64, 12)
	for i := range 3 {
		z := 0.0
		for j := range 4 {
			z += math.Exp(xd[i*4+j])
		}
		for j := range 4 {
			sm[i*4+j] = math.Exp(xd[i*4+j]) / z
		}
	}
	requireClose64(t, sm, tensor.Softmax(x, 1), 1e-15, "Softmax")
	// 1 + 1e-12 survives in float64 (it is 1 in float32).
	one := tensor.Add(tensor.ScalarFloat64(1), tensor.ScalarFloat64(1e-12))
	assert.Equal(t, 1+1e-12, one.Item())
}

// Int64 computes like Int32 beyond int32's range; Uint8 moves, compares
// and converts.
func TestInt64AndUint8Ops(t *testing.T) {
	big := int64(1) << 40
	a := tensor.FromInt64([]int64{big, -3, 7, 1<<53 + 1}, 2, 2)
	b := tensor.FromInt64([]int64{2, 5, -7, 1}, 2, 2)
	assert.Equal(t, []int64{big + 2, 2, 0, 1<<53 + 2}, tensor.Add(a, b).Int64s())
	assert.Equal(t, []int64{2 * big, -15, -49, 1<<53 + 1}, tensor.Mul(a, b).Int64s())
	assert.Equal(t, []int64{big / 2, -1, -1, 1<<53 + 1}, tensor.FloorDiv(a, b).Int64s())
	assert.Equal(t, []int64{big + 7, 1<<53 + 1 - 3}, tensor.Sum(a, 0).Int64s())
	assert.Equal(t, []int64{1<<53 + 1}, tensor.Max(a).Int64s())
	assert.Equal(t, []int64{big, big - 3, big + 4, big + 4 + 1<<53 + 1}, tensor.Cumsum(tensor.Reshape(a, 4), 0).Int64s())
	assert.Equal(t, []bool{false, false, true, false}, tensor.Equal(a, tensor.FromInt64([]int64{0, 0, 7, 1 << 53}, 2, 2)).Bools())
	// Sorting tells 2^53+1 from 2^53 (equal as float64).
	s := tensor.FromInt64([]int64{1<<53 + 1, 1 << 53, -1})
	assert.Equal(t, []int64{-1, 1 << 53, 1<<53 + 1}, tensor.Sort(s, 0, false).Int64s())
	// An int32 scalar meets int64 as a weak type.
	assert.Equal(t, []int64{big + 1, -2, 8, 1<<53 + 2}, tensor.Add(a, tensor.ScalarInt(1)).Int64s())
	assert.Equal(t, []bool{true, false, false, true}, tensor.Greater(a, tensor.ScalarInt(7)).Bools())
	// Int64 indices gather like int32 ones.
	x := tensor.FromFloat64s([]float64{10, 20, 30})
	assert.Equal(t, []float64{30, 10, 30}, tensor.Take(x, tensor.FromInt64([]int64{2, 0, -1}), 0).Float64s())
	requirePanic(t, "tensor.Take: f64[3], i64[1] along axis 0: index 3 at position [0] out of range [-3, 3)",
		func() { tensor.Take(x, tensor.FromInt64([]int64{3}), 0) })
	assert.Equal(t, []int64{-7, 2}, tensor.Take(tensor.Reshape(b, 4), tensor.FromInt32([]int32{2, 0}), 0).Int64s())

	img := tensor.FromUint8([]uint8{0, 1, 2, 3, 4, 5}, 2, 3)
	assert.Equal(t, []uint8{0, 3, 1, 4, 2, 5}, tensor.Transpose(img).Uint8s())
	assert.Equal(t, []uint8{1, 2, 4, 5}, tensor.SliceAxis(img, 1, 1, 3).Uint8s())
	assert.Equal(t, []uint8{0, 1, 2, 3, 4, 5, 0, 1, 2, 3, 4, 5}, tensor.Concat(0, img, img).Uint8s())
	assert.Equal(t, []bool{false, false, false, true, true, true}, tensor.Greater(img, tensor.Full(tensor.Uint8, 2, 2, 3)).Bools())
	scaled := tensor.Div(tensor.AsType(img, tensor.Float32), tensor.Scalar(255))
	assert.InDelta(t, 5.0/255, scaled.At(1, 2), 1e-7)
	requirePanic(t, "tensor.Mul: u8[2,3] * u8[2,3]: not defined for uint8", func() { tensor.Mul(img, img) })
}

// UniformFloat64 and NormalFloat64 draw float64 values from all 52
// mantissa bits, reproducibly per key, with the right moments.
func TestRandomFloat64(t *testing.T) {
	k := tensor.NewKey(7)
	const n = 100000
	u := tensor.UniformFloat64(k, n)
	require.Equal(t, tensor.Float64, u.DType())
	assert.Equal(t, u.Float64s(), tensor.UniformFloat64(k, n).Float64s(), "one key, one draw")
	assert.NotEqual(t, u.Float64s()[:10], tensor.UniformFloat64(tensor.NewKey(8), n).Float64s()[:10])
	mean, fine := 0.0, 0
	for _, v := range u.Float64s() {
		require.True(t, v >= 0 && v < 1, "uniform %v outside [0, 1)", v)
		mean += v / n
		if v != float64(float32(v)) {
			fine++
		}
	}
	assert.InDelta(t, 0.5, mean, 0.005, "mean of the uniform draws")
	assert.Greater(t, fine, n*99/100, "draws finer than float32")
	z := tensor.NormalFloat64(k, n).Float64s()
	m, v := 0.0, 0.0
	for _, x := range z {
		m += x / n
	}
	for _, x := range z {
		v += (x - m) * (x - m) / n
	}
	assert.InDelta(t, 0, m, 0.02, "mean of the normal draws")
	assert.InDelta(t, 1, v, 0.02, "variance of the normal draws")
}
