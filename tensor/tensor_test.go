package tensor_test

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/gonox/gonox/tensor"
)

func TestDType(t *testing.T) {
	tests := []struct {
		dt           tensor.DType
		name, abbrev string
		size         int
		isFloat      bool
	}{
		{tensor.Float32, "float32", "f32", 4, true},
		{tensor.Int32, "int32", "i32", 4, false},
		{tensor.Bool, "bool", "bool", 1, false},
		{tensor.DType(0), "DType(0)", "DType(0)", 0, false},
		{tensor.DType(9), "DType(9)", "DType(9)", 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.name, tt.dt.String())
			assert.Equal(t, tt.abbrev, tt.dt.Abbrev())
			assert.Equal(t, tt.size, tt.dt.Size())
			assert.Equal(t, tt.isFloat, tt.dt.IsFloat())
		})
	}
}

func TestConstructors(t *testing.T) {
	tests := []struct {
		name  string
		make  func() *tensor.Tensor
		dt    tensor.DType
		shape []int
		vals  []float64
	}{
		{"FromFloat32 1-D default", func() *tensor.Tensor { return tensor.FromFloat32([]float32{1, 2, 3}) }, tensor.Float32, []int{3}, []float64{1, 2, 3}},
		{"FromFloat32 2x3", func() *tensor.Tensor { return tensor.FromFloat32([]float32{1, 2, 3, 4, 5, 6}, 2, 3) }, tensor.Float32, []int{2, 3}, []float64{1, 2, 3, 4, 5, 6}},
		{"FromFloat32 nil", func() *tensor.Tensor { return tensor.FromFloat32(nil) }, tensor.Float32, []int{0}, []float64{}},
		{"FromFloat32 empty 2-D", func() *tensor.Tensor { return tensor.FromFloat32(nil, 3, 0) }, tensor.Float32, []int{3, 0}, []float64{}},
		{"FromFloat32 rank0 via shape 1", func() *tensor.Tensor { return tensor.FromFloat32([]float32{7}, 1, 1) }, tensor.Float32, []int{1, 1}, []float64{7}},
		{"FromFloat64", func() *tensor.Tensor { return tensor.FromFloat64([]float64{0.1, -2}, 2, 1) }, tensor.Float32, []int{2, 1}, []float64{f32(0.1), -2}},
		{"FromFloat64 nil", func() *tensor.Tensor { return tensor.FromFloat64(nil) }, tensor.Float32, []int{0}, []float64{}},
		{"FromInt32", func() *tensor.Tensor { return tensor.FromInt32([]int32{-1, 0, 5, 9}, 2, 2) }, tensor.Int32, []int{2, 2}, []float64{-1, 0, 5, 9}},
		{"FromInts", func() *tensor.Tensor { return tensor.FromInts([]int{math.MaxInt32, math.MinInt32}) }, tensor.Int32, []int{2}, []float64{math.MaxInt32, math.MinInt32}},
		{"FromBool", func() *tensor.Tensor { return tensor.FromBool([]bool{true, false, true}, 3, 1) }, tensor.Bool, []int{3, 1}, []float64{1, 0, 1}},
		{"WrapFloat32", func() *tensor.Tensor { return tensor.WrapFloat32([]float32{1, 2}, 1, 2) }, tensor.Float32, []int{1, 2}, []float64{1, 2}},
		{"WrapFloat32 nil", func() *tensor.Tensor { return tensor.WrapFloat32(nil) }, tensor.Float32, []int{0}, []float64{}},
		{"WrapInt32", func() *tensor.Tensor { return tensor.WrapInt32([]int32{4}) }, tensor.Int32, []int{1}, []float64{4}},
		{"WrapInt32 nil", func() *tensor.Tensor { return tensor.WrapInt32(nil, 0, 4) }, tensor.Int32, []int{0, 4}, []float64{}},
		{"Scalar", func() *tensor.Tensor { return tensor.Scalar(2.5) }, tensor.Float32, []int{}, []float64{2.5}},
		{"ScalarInt", func() *tensor.Tensor { return tensor.ScalarInt(-3) }, tensor.Int32, []int{}, []float64{-3}},
		{"ScalarBool", func() *tensor.Tensor { return tensor.ScalarBool(true) }, tensor.Bool, []int{}, []float64{1}},
		{"Zeros f32", func() *tensor.Tensor { return tensor.Zeros(tensor.Float32, 2, 2) }, tensor.Float32, []int{2, 2}, []float64{0, 0, 0, 0}},
		{"Zeros i32 rank0", func() *tensor.Tensor { return tensor.Zeros(tensor.Int32) }, tensor.Int32, []int{}, []float64{0}},
		{"Zeros bool empty", func() *tensor.Tensor { return tensor.Zeros(tensor.Bool, 0) }, tensor.Bool, []int{0}, []float64{}},
		{"Ones f32", func() *tensor.Tensor { return tensor.Ones(tensor.Float32, 3) }, tensor.Float32, []int{3}, []float64{1, 1, 1}},
		{"Ones bool", func() *tensor.Tensor { return tensor.Ones(tensor.Bool, 2) }, tensor.Bool, []int{2}, []float64{1, 1}},
		{"Ones i32 rank0", func() *tensor.Tensor { return tensor.Ones(tensor.Int32) }, tensor.Int32, []int{}, []float64{1}},
		{"Full f32", func() *tensor.Tensor { return tensor.Full(tensor.Float32, 0.1, 2) }, tensor.Float32, []int{2}, []float64{f32(0.1), f32(0.1)}},
		{"Full i32", func() *tensor.Tensor { return tensor.Full(tensor.Int32, -7, 1, 2) }, tensor.Int32, []int{1, 2}, []float64{-7, -7}},
		{"Full i32 max", func() *tensor.Tensor { return tensor.Full(tensor.Int32, math.MaxInt32, 1) }, tensor.Int32, []int{1}, []float64{math.MaxInt32}},
		{"Full bool 0", func() *tensor.Tensor { return tensor.Full(tensor.Bool, 0, 2) }, tensor.Bool, []int{2}, []float64{0, 0}},
		{"Full bool 0.5", func() *tensor.Tensor { return tensor.Full(tensor.Bool, 0.5, 1) }, tensor.Bool, []int{1}, []float64{1}},
		{"Full f32 NaN", func() *tensor.Tensor { return tensor.Full(tensor.Float32, math.NaN(), 1) }, tensor.Float32, []int{1}, []float64{math.NaN()}},
		{"ZerosLike", func() *tensor.Tensor { return tensor.ZerosLike(tensor.FromInt32([]int32{1, 2}, 2, 1)) }, tensor.Int32, []int{2, 1}, []float64{0, 0}},
		{"OnesLike", func() *tensor.Tensor { return tensor.OnesLike(tensor.FromBool([]bool{false})) }, tensor.Bool, []int{1}, []float64{1}},
		{"FullLike", func() *tensor.Tensor { return tensor.FullLike(tensor.Scalar(0), 3) }, tensor.Float32, []int{}, []float64{3}},
		{"Arange 5", func() *tensor.Tensor { return tensor.Arange(5) }, tensor.Int32, []int{5}, []float64{0, 1, 2, 3, 4}},
		{"Arange 0", func() *tensor.Tensor { return tensor.Arange(0) }, tensor.Int32, []int{0}, []float64{}},
		{"Arange -3", func() *tensor.Tensor { return tensor.Arange(-3) }, tensor.Int32, []int{0}, []float64{}},
		{"ArangeStep 2..9 by 3", func() *tensor.Tensor { return tensor.ArangeStep(2, 9, 3) }, tensor.Int32, []int{3}, []float64{2, 5, 8}},
		{"ArangeStep 2..8 by 3", func() *tensor.Tensor { return tensor.ArangeStep(2, 8, 3) }, tensor.Int32, []int{2}, []float64{2, 5}},
		{"ArangeStep down", func() *tensor.Tensor { return tensor.ArangeStep(5, 0, -2) }, tensor.Int32, []int{3}, []float64{5, 3, 1}},
		{"ArangeStep down exact", func() *tensor.Tensor { return tensor.ArangeStep(6, 0, -2) }, tensor.Int32, []int{3}, []float64{6, 4, 2}},
		{"ArangeStep wrong direction", func() *tensor.Tensor { return tensor.ArangeStep(0, 5, -1) }, tensor.Int32, []int{0}, []float64{}},
		{"ArangeStep negative range", func() *tensor.Tensor { return tensor.ArangeStep(-3, 1, 1) }, tensor.Int32, []int{4}, []float64{-3, -2, -1, 0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			x := tt.make()
			requireExact(t, tt.dt, tt.shape, tt.vals, x)
			assert.Equal(t, len(tt.shape), x.Rank())
			assert.Equal(t, len(tt.vals), x.Size())
			assert.Equal(t, len(tt.vals)*tt.dt.Size(), x.Bytes())
			assert.False(t, x.IsTraced())
			assert.Nil(t, x.Local())
			assert.Nil(t, x.Layout())
			assert.Nil(t, x.LogicalAxes())
		})
	}
}

func TestConstructorsCopy(t *testing.T) {
	f := []float32{1, 2}
	x := tensor.FromFloat32(f)
	f[0] = 9
	assert.Equal(t, []float32{1, 2}, x.Float32s(), "FromFloat32 must copy")

	i := []int32{1, 2}
	xi := tensor.FromInt32(i)
	i[0] = 9
	assert.Equal(t, []int32{1, 2}, xi.Int32s(), "FromInt32 must copy")

	b := []bool{true}
	xb := tensor.FromBool(b)
	b[0] = false
	assert.Equal(t, []bool{true}, xb.Bools(), "FromBool must copy")

	shape := []int{2, 1}
	xs := tensor.FromFloat32([]float32{1, 2}, shape...)
	shape[0] = 7
	assert.Equal(t, []int{2, 1}, xs.Shape(), "constructors must copy the shape")
	xz := tensor.Zeros(tensor.Float32, shape...)
	shape[0] = 1
	assert.Equal(t, []int{7, 1}, xz.Shape(), "Zeros must copy the shape")

	// Wrap shares.
	w := []float32{1, 2}
	xw := tensor.WrapFloat32(w)
	assert.Same(t, &w[0], &xw.RawFloat32()[0])
	wi := []int32{1, 2}
	xwi := tensor.WrapInt32(wi)
	assert.Same(t, &wi[0], &xwi.RawInt32()[0])
}

func TestAccessorsCopy(t *testing.T) {
	x := tensor.FromFloat32([]float32{1, 2, 3, 4}, 2, 2)
	s := x.Shape()
	s[0] = 100
	assert.Equal(t, []int{2, 2}, x.Shape(), "Shape returns a copy")

	f := x.Float32s()
	f[0] = 100
	assert.Equal(t, float64(1), x.At(0, 0), "Float32s returns a copy")
	f64 := x.Float64s()
	f64[0] = 100
	assert.Equal(t, float64(1), x.At(0, 0), "Float64s returns a copy")

	xi := tensor.FromInt32([]int32{5, 6})
	ii := xi.Int32s()
	ii[0] = 0
	assert.Equal(t, []int32{5, 6}, xi.Int32s())
	assert.Equal(t, []int{5, 6}, xi.Ints())

	xb := tensor.FromBool([]bool{true, false})
	bb := xb.Bools()
	bb[0] = false
	assert.Equal(t, []bool{true, false}, xb.Bools())
	assert.Equal(t, []float64{1, 0}, xb.Float64s())

	named := tensor.WithLogicalAxes(x, "batch", "")
	la := named.LogicalAxes()
	la[0] = "x"
	assert.Equal(t, []string{"batch", ""}, named.LogicalAxes(), "LogicalAxes returns a copy")
}

func TestAtItemDim(t *testing.T) {
	x := tensor.FromFloat32([]float32{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23}, 2, 3, 4)
	for o := 0; o < 24; o++ {
		idx := unravel(o, []int{2, 3, 4})
		assert.Equal(t, float64(o), x.At(idx...), "At(%v)", idx)
	}
	assert.Equal(t, 2, x.Dim(0))
	assert.Equal(t, 4, x.Dim(-1))
	assert.Equal(t, 2, x.Dim(-3))
	assert.Equal(t, 3.0, tensor.FromInt32([]int32{3}, 1, 1).Item())
	assert.Equal(t, 1.0, tensor.ScalarBool(true).Item())
	assert.Equal(t, -1.5, tensor.Scalar(-1.5).At())
	assert.Equal(t, 1.0, tensor.FromBool([]bool{false, true}).At(1))
	assert.Equal(t, 7.0, tensor.FromInts([]int{7}).At(0))
}

func TestConstructorPanics(t *testing.T) {
	tests := []struct {
		name string
		f    func()
		msg  string
	}{
		{"FromFloat32 size", func() { tensor.FromFloat32([]float32{1, 2, 3, 4, 5}, 2, 3) }, "tensor.FromFloat32: 5 elements do not fit shape [2 3] (6 elements)"},
		{"FromFloat32 negative", func() { tensor.FromFloat32(nil, -1, 0) }, "tensor.FromFloat32: negative dimension in shape [-1 0]"},
		{"FromFloat64 size", func() { tensor.FromFloat64([]float64{1}, 2) }, "tensor.FromFloat64: 1 elements do not fit shape [2] (2 elements)"},
		{"FromInt32 size", func() { tensor.FromInt32([]int32{1}, 0) }, "tensor.FromInt32: 1 elements do not fit shape [0] (0 elements)"},
		{"FromInts size", func() { tensor.FromInts([]int{1, 2}, 3) }, "tensor.FromInts: 2 elements do not fit shape [3] (3 elements)"},
		{"FromInts overflow", func() { tensor.FromInts([]int{0, math.MaxInt32 + 1}) }, "tensor.FromInts: value 2147483648 at index 1 overflows int32"},
		{"FromInts underflow", func() { tensor.FromInts([]int{math.MinInt32 - 1}) }, "tensor.FromInts: value -2147483649 at index 0 overflows int32"},
		{"FromBool size", func() { tensor.FromBool([]bool{true}, 2, 2) }, "tensor.FromBool: 1 elements do not fit shape [2 2] (4 elements)"},
		{"WrapFloat32 size", func() { tensor.WrapFloat32([]float32{1}, 2) }, "tensor.WrapFloat32: 1 elements do not fit shape [2] (2 elements)"},
		{"WrapInt32 size", func() { tensor.WrapInt32([]int32{1}, 2) }, "tensor.WrapInt32: 1 elements do not fit shape [2] (2 elements)"},
		{"Zeros negative", func() { tensor.Zeros(tensor.Float32, 2, -3) }, "tensor.Zeros: negative dimension in shape [2 -3]"},
		{"Zeros bad dtype", func() { tensor.Zeros(tensor.DType(0), 2) }, "tensor.Zeros: invalid dtype DType(0)"},
		// A shape whose element count overflows an int wrapped around to a
		// tensor of no storage (2^80 = 0 mod 2^64), or failed in makeslice.
		{"Zeros overflow", func() { tensor.Zeros(tensor.Float32, 1<<40, 1<<40) }, "tensor.Zeros: shape [1099511627776 1099511627776] has more elements than fit in memory"},
		{"Zeros too large", func() { tensor.Zeros(tensor.Float32, 1<<31, 1<<31) }, "tensor.Zeros: shape [2147483648 2147483648] has more elements than fit in memory"},
		{"Ones overflow", func() { tensor.Ones(tensor.Float32, 1<<62, 4, 1) }, "tensor.Ones: shape [4611686018427387904 4 1] has more elements than fit in memory"},
		{"Normal overflow", func() { tensor.Normal(tensor.NewKey(0), 1<<32, 1<<32) }, "tensor.Normal: shape [4294967296 4294967296] has more elements than fit in memory"},
		{"Reshape overflow", func() { tensor.Reshape(tensor.Zeros(tensor.Float32, 0), 1<<40, 1<<40) }, "tensor.Reshape: f32[0] to [1099511627776 1099511627776]: more elements than fit in memory"},
		{"Full negative", func() { tensor.Full(tensor.Float32, 1, -1) }, "tensor.Full: negative dimension in shape [-1]"},
		{"Full bad dtype", func() { tensor.Full(tensor.DType(99), 1, 1) }, "tensor.Full: invalid dtype DType(99)"},
		{"Ones negative", func() { tensor.Ones(tensor.Int32, -2) }, "tensor.Ones: negative dimension in shape [-2]"},
		{"Full int fraction", func() { tensor.Full(tensor.Int32, 1.5, 2) }, "tensor.Full: 1.5 is not an int32"},
		{"Full int overflow", func() { tensor.Full(tensor.Int32, 1e10) }, "tensor.Full: 1e+10 is not an int32"},
		{"Full int NaN", func() { tensor.Full(tensor.Int32, math.NaN()) }, "tensor.Full: NaN is not an int32"},
		{"Full int Inf", func() { tensor.Full(tensor.Int32, math.Inf(-1)) }, "tensor.Full: -Inf is not an int32"},
		{"FullLike int fraction", func() { tensor.FullLike(tensor.ScalarInt(0), 0.5) }, "tensor.FullLike: 0.5 is not an int32"},
		{"ArangeStep zero", func() { tensor.ArangeStep(0, 3, 0) }, "tensor.ArangeStep: step is 0"},
		{"ArangeStep overflow", func() { tensor.ArangeStep(math.MaxInt32-1, math.MaxInt32+2, 1) }, "tensor.ArangeStep: values from 2147483646 to 2147483648 overflow int32"},
		{"At rank", func() { tensor.Zeros(tensor.Float32, 2, 3).At(1) }, "Tensor.At: f32[2,3] indexed with 1 indices"},
		{"At range", func() { tensor.Zeros(tensor.Float32, 2, 3).At(1, 3) }, "Tensor.At: index [1 3] out of range for f32[2,3]"},
		{"At negative", func() { tensor.Zeros(tensor.Int32, 2).At(-1) }, "Tensor.At: index [-1] out of range for i32[2]"},
		{"Item size", func() { tensor.Zeros(tensor.Float32, 2).Item() }, "Tensor.Item: f32[2] has 2 elements, want 1"},
		{"Item empty", func() { tensor.Zeros(tensor.Float32, 0).Item() }, "Tensor.Item: f32[0] has 0 elements, want 1"},
		{"Dim range", func() { tensor.Zeros(tensor.Float32, 2).Dim(1) }, "Tensor.Dim: axis 1 out of range for f32[2]"},
		{"Dim neg range", func() { tensor.Zeros(tensor.Float32, 2).Dim(-2) }, "Tensor.Dim: axis -2 out of range for f32[2]"},
		{"Float32s dtype", func() { tensor.Zeros(tensor.Int32, 2).Float32s() }, "Tensor.Float32s: i32[2] is int32, want float32"},
		{"Int32s dtype", func() { tensor.Zeros(tensor.Float32, 2).Int32s() }, "Tensor.Int32s: f32[2] is float32, want int32"},
		{"Ints dtype", func() { tensor.Zeros(tensor.Bool, 2).Ints() }, "Tensor.Ints: bool[2] is bool, want int32"},
		{"Bools dtype", func() { tensor.Zeros(tensor.Int32).Bools() }, "Tensor.Bools: i32[] is int32, want bool"},
		{"RawFloat32 dtype", func() { tensor.Zeros(tensor.Int32).RawFloat32() }, "Tensor.RawFloat32: i32[] is int32, want float32"},
		{"RawInt32 dtype", func() { tensor.Zeros(tensor.Float32).RawInt32() }, "Tensor.RawInt32: f32[] is float32, want int32"},
		{"RawBool dtype", func() { tensor.Zeros(tensor.Float32).RawBool() }, "Tensor.RawBool: f32[] is float32, want bool"},
		{"WithLogicalAxes count", func() { tensor.WithLogicalAxes(tensor.Zeros(tensor.Float32, 2, 3), "a") }, `tensor.WithLogicalAxes: 1 names ["a"] for f32[2,3]`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			requirePanic(t, tt.msg, tt.f)
		})
	}
}

func TestArangeStepMatchesLoop(t *testing.T) {
	for start := -5; start <= 5; start++ {
		for stop := -5; stop <= 5; stop++ {
			for _, step := range []int{-3, -2, -1, 1, 2, 3} {
				var want []float64
				for v := start; (step > 0 && v < stop) || (step < 0 && v > stop); v += step {
					want = append(want, float64(v))
				}
				got := tensor.ArangeStep(start, stop, step)
				requireExact(t, tensor.Int32, []int{len(want)}, want, got, "ArangeStep(%d,%d,%d)", start, stop, step)
			}
		}
	}
}

func TestWithLogicalAxes(t *testing.T) {
	x := tensor.FromFloat32([]float32{1, 2, 3, 4, 5, 6}, 2, 3)
	y := tensor.WithLogicalAxes(x, "batch", "embed")
	assert.Equal(t, []string{"batch", "embed"}, y.LogicalAxes())
	assert.Nil(t, x.LogicalAxes(), "WithLogicalAxes must not change its input")
	assert.True(t, sharesStorage(x, y))
	z := tensor.WithLogicalAxes(y)
	assert.Nil(t, z.LogicalAxes())
	assert.Equal(t, []string{"batch", "embed"}, y.LogicalAxes())
}

// Ops do not propagate logical axis names: every result of a computing op
// starts with none.
func TestLogicalAxesNotPropagated(t *testing.T) {
	x := tensor.WithLogicalAxes(tensor.FromFloat32([]float32{1, 2, 3, 4, 5, 6}, 2, 3), "batch", "embed")
	w := tensor.WithLogicalAxes(tensor.FromFloat32([]float32{1, 2, 3, 4, 5, 6}, 3, 2), "embed", "mlp")
	ops := map[string]*tensor.Tensor{
		"Add":        tensor.Add(x, x),
		"Neg":        tensor.Neg(x),
		"Exp":        tensor.Exp(x),
		"Relu":       tensor.Relu(x),
		"Clamp":      tensor.Clamp(x, 0, 1),
		"Sum":        tensor.SumKeep(x, 0),
		"Max":        tensor.MaxKeep(x, 1),
		"Reshape":    tensor.Reshape(x, 3, 2),
		"ExpandDims": tensor.ExpandDims(x, 0),
		"Transpose":  tensor.Transpose(x),
		"Broadcast":  tensor.BroadcastTo(x, 4, 2, 3),
		"MatMul":     tensor.MatMul(x, w),
		"Where":      tensor.Where(tensor.Greater(x, tensor.Scalar(2)), x, x),
		"AsType":     tensor.AsType(x, tensor.Int32),
		"Equal":      tensor.Equal(x, x),
	}
	for name, y := range ops {
		assert.Nil(t, y.LogicalAxes(), name)
	}
	assert.Equal(t, []string{"batch", "embed"}, x.LogicalAxes())
}

func TestMoreConstructorPanics(t *testing.T) {
	requirePanic(t, "tensor.OnesLike: invalid dtype DType(0)", func() { tensor.OnesLike(&tensor.Tensor{}) })
	requirePanic(t, "tensor.Arange: values from 0 to 2147483648 overflow int32", func() { tensor.Arange(math.MaxInt32 + 2) })
	requirePanic(t, "tensor.ArangeStep: values from -2147483649 to -2147483650 overflow int32", func() { tensor.ArangeStep(math.MinInt32-1, math.MinInt32-3, -1) })
}

// x.Shape() of a scalar is an empty, non-nil slice, and constructors given
// it make a scalar: FromFloat32(d, x.Shape()...) reproduces x's shape.
// (autodiff.CheckGrad builds its cotangent this way; a scalar-output
// function used to get a f32[1] seed for a f32[] output and panic.)
func TestScalarShapeRoundTrip(t *testing.T) {
	s := tensor.Scalar(3)
	assert.NotNil(t, s.Shape())
	assert.Equal(t, []int{}, s.Shape())
	assert.Equal(t, []int{}, tensor.Zeros(tensor.Float32).Shape())
	for _, x := range []*tensor.Tensor{tensor.Scalar(1), tensor.ScalarInt(1), tensor.Sum(tensor.Ones(tensor.Float32, 2))} {
		assert.Equal(t, 0, tensor.FromFloat32([]float32{5}, x.Shape()...).Rank())
		assert.Equal(t, 0, tensor.FromFloat64([]float64{5}, x.Shape()...).Rank())
		assert.Equal(t, 0, tensor.FromInt32([]int32{5}, x.Shape()...).Rank())
		assert.Equal(t, 0, tensor.FromInts([]int{5}, x.Shape()...).Rank())
		assert.Equal(t, 0, tensor.FromBool([]bool{true}, x.Shape()...).Rank())
		assert.Equal(t, 0, tensor.WrapFloat32([]float32{5}, x.Shape()...).Rank())
		assert.Equal(t, 0, tensor.WrapInt32([]int32{5}, x.Shape()...).Rank())
	}
	// No shape argument still means 1-D.
	assert.Equal(t, []int{1}, tensor.FromFloat32([]float32{5}).Shape())
	requirePanic(t, "tensor.FromFloat32: 2 elements do not fit shape [] (1 elements)", func() { tensor.FromFloat32([]float32{1, 2}, []int{}...) })
	// CheckGrad of a function with a scalar output.
	checkGrad(t, func(xs []*tensor.Tensor) *tensor.Tensor { return tensor.Sum(tensor.Square(xs[0])) }, ts(tensor.FromFloat32([]float32{1, 2})))
	checkGrad(t, func(xs []*tensor.Tensor) *tensor.Tensor { return tensor.Exp(xs[0]) }, ts(tensor.Scalar(0.5)))
}
