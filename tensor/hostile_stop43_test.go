package tensor_test

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/tensor"
)

// Hostile inputs to the APIs added in stops 42 and 43 (SegmentWeightedSum,
// DotProductAttentionAs, StepFrom, the PieceSteps of the Later steps,
// SumProductsPartThen): each programmer error panics with a message naming
// the op and its operands in type notation, never with a runtime error
// from inside the op (index out of range, nil dereference, makeslice).

// f32z is a float32 tensor of zeros.
func f32z(shape ...int) *tensor.Tensor { return tensor.Zeros(tensor.Float32, shape...) }

// i32s is an int32 vector.
func i32s(v ...int32) *tensor.Tensor { return tensor.FromInt32(v, len(v)) }

// donatedT returns x donated.
func donatedT(x *tensor.Tensor) *tensor.Tensor {
	tensor.Donate(x)
	return x
}

func TestHostileSegmentWeightedSum(t *testing.T) {
	sws := tensor.SegmentWeightedSum
	cases := []struct {
		name string
		f    func()
		want string
	}{
		{"negative count", func() { sws(f32z(3, 2), f32z(3), i32s(0, 1, 0), -1) },
			"tensor.SegmentWeightedSum: f32[3,2], f32[3], i32[3] into -1 segments: negative segment count"},
		{"count overflowing the result", func() { sws(f32z(3, 2), f32z(3), i32s(0, 1, 0), math.MaxInt/2) },
			"tensor.SegmentWeightedSum: f32[3,2], f32[3], i32[3] into 4611686018427387903 segments: the result's 4611686018427387903 rows of 2 elements overflow"},
		{"scalar data", func() { sws(tensor.Scalar(1), tensor.Scalar(1), i32s(0), 2) },
			"tensor.SegmentWeightedSum: f32[], f32[], i32[1] into 2 segments: data must have at least one dimension"},
		{"weights a column", func() { sws(f32z(3, 2), f32z(3, 1), i32s(0, 1, 0), 2) },
			"tensor.SegmentWeightedSum: f32[3,2], f32[3,1], i32[3] into 2 segments: want one weight per row: [3]"},
		{"weights of another dtype", func() { sws(f32z(3, 2), tensor.Zeros(tensor.Float64, 3), i32s(0, 1, 0), 2) },
			"tensor.SegmentWeightedSum: f32[3,2], f64[3], i32[3] into 2 segments: weights must have data's dtype"},
		{"integer data", func() { sws(tensor.Zeros(tensor.Int32, 3, 2), tensor.Zeros(tensor.Int32, 3), i32s(0, 1, 0), 2) },
			"tensor.SegmentWeightedSum: i32[3,2], i32[3], i32[3] into 2 segments: data must be a float"},
		{"int64 ids", func() { sws(f32z(3, 2), f32z(3), tensor.Zeros(tensor.Int64, 3), 2) },
			"tensor.SegmentWeightedSum: f32[3,2], f32[3], i64[3] into 2 segments: segment ids must be int32"},
		{"too few ids", func() { sws(f32z(3, 2), f32z(3), i32s(0, 1), 2) },
			"tensor.SegmentWeightedSum: f32[3,2], f32[3], i32[2] into 2 segments: want one segment id per row: i32[3]"},
		{"donated data", func() { sws(donatedT(f32z(3, 2)), f32z(3), i32s(0, 1, 0), 2) },
			"tensor.SegmentWeightedSum: operand data f32[3,2] was donated (tensor.Donate)"},
		{"SegmentSum's count overflowing", func() { tensor.SegmentSum(f32z(3, 4), i32s(0, 1, 0), math.MaxInt/4) },
			"tensor.SegmentSum: f32[3,4], i32[3] into 2305843009213693951 segments: the result's 2305843009213693951 rows of 4 elements overflow"},
	}
	for _, c := range cases {
		requirePanic(t, c.want, c.f, c.name)
	}

	// Ids outside [0, numSegments) are dropped, negative ones too; no rows
	// or no columns give zeros of the result's shape.
	data := tensor.FromFloat32([]float32{1, 2, 3, 4, 5, 6}, 3, 2)
	w := tensor.FromFloat32([]float32{10, 100, 1000}, 3)
	got := sws(data, w, i32s(-1, 1, 7), 2)
	assert.Equal(t, []float32{0, 0, 300, 400}, got.Float32s())
	assert.Equal(t, []float32{0, 0, 0, 0}, sws(f32z(0, 2), f32z(0), i32s(), 2).Float32s())
	assert.Equal(t, []int{2, 0}, sws(f32z(3, 0), f32z(3), i32s(0, 1, 0), 2).Shape())
	assert.Equal(t, []int{0, 2}, sws(f32z(3, 2), f32z(3), i32s(0, 1, 0), 0).Shape())

	// NaN and Inf propagate as in the composition it stands for: 0·Inf and
	// NaN·w are NaN in their segment, and nowhere else.
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	data = tensor.FromFloat32([]float32{nan, 1, inf, 2, 3}, 5, 1)
	w = tensor.FromFloat32([]float32{1, 1, 0, 1, 1}, 5)
	ids := i32s(0, 0, 1, 2, 2)
	got = sws(data, w, ids, 3)
	want := tensor.SegmentSum(tensor.Mul(data, tensor.Reshape(w, 5, 1)), ids, 3)
	g, wf := got.Float32s(), want.Float32s()
	assert.True(t, math.IsNaN(float64(g[0])) && math.IsNaN(float64(g[1])), "segments 0 and 1: %v", g)
	assert.True(t, math.IsNaN(float64(wf[0])) && math.IsNaN(float64(wf[1])))
	assert.Equal(t, float32(5), g[2])
}

func TestHostileDotProductAttentionAs(t *testing.T) {
	q, k, v := f32z(1, 2, 1, 4), f32z(1, 3, 1, 4), f32z(1, 3, 1, 5)
	bf := tensor.BFloat16
	dpa := tensor.DotProductAttentionAs
	const qkv = "f32[1,2,1,4], f32[1,3,1,4], f32[1,3,1,5]"
	mask5 := tensor.FromBool(make([]bool, 6), 1, 1, 1, 2, 3)
	cases := []struct {
		name string
		f    func()
		want string
	}{
		{"float16 compute", func() { dpa(q, k, v, nil, 0, false, tensor.Float16) },
			"tensor.DotProductAttentionAs: " + qkv + ": compute dtype float16: want float32 operands and a compute dtype float32 or bfloat16"},
		{"integer compute", func() { dpa(q, k, v, nil, 0, false, tensor.Int32) },
			"tensor.DotProductAttentionAs: " + qkv + ": compute dtype int32: want float32 operands and a compute dtype float32 or bfloat16"},
		{"undefined compute dtype", func() { dpa(q, k, v, nil, 0, false, tensor.DType(99)) },
			"tensor.DotProductAttentionAs: " + qkv + ": compute dtype DType(99): want float32 operands and a compute dtype float32 or bfloat16"},
		{"float64 q under bf16", func() { dpa(tensor.Zeros(tensor.Float64, 1, 2, 1, 4), k, v, nil, 0, false, bf) },
			"tensor.DotProductAttentionAs: f64[1,2,1,4], f32[1,3,1,4], f32[1,3,1,5]: compute dtype bfloat16: want float32 operands and a compute dtype float32 or bfloat16"},
		{"bf16 k", func() { dpa(q, tensor.Zeros(bf, 1, 3, 1, 4), v, nil, 0, false, bf) },
			"tensor.DotProductAttentionAs: f32[1,2,1,4], bf16[1,3,1,4], f32[1,3,1,5]: want q [batch, T, heads, H], k [batch, S, heads, H], v [batch, S, heads, V] of one float dtype"},
		{"rank 3", func() { dpa(f32z(2, 1, 4), f32z(3, 1, 4), f32z(3, 1, 5), nil, 0, false, bf) },
			"tensor.DotProductAttentionAs: f32[2,1,4], f32[3,1,4], f32[3,1,5]: want q [batch, T, heads, H], k [batch, S, heads, H], v [batch, S, heads, V] of one float dtype"},
		{"k's features", func() { dpa(q, f32z(1, 3, 1, 3), v, nil, 0, false, bf) },
			"tensor.DotProductAttentionAs: f32[1,2,1,4], f32[1,3,1,3], f32[1,3,1,5]: k must be [1, S, 1, 4] and v [1, S, 1, V] with the same S"},
		{"v's length", func() { dpa(q, k, f32z(1, 2, 1, 5), nil, 0, false, bf) },
			"tensor.DotProductAttentionAs: f32[1,2,1,4], f32[1,3,1,4], f32[1,2,1,5]: k must be [1, S, 1, 4] and v [1, S, 1, V] with the same S"},
		{"NaN scale", func() { dpa(q, k, v, nil, float32(math.NaN()), false, bf) },
			"tensor.DotProductAttentionAs: " + qkv + ": scale NaN is not finite"},
		{"-Inf scale", func() { dpa(q, k, v, nil, float32(math.Inf(-1)), false, bf) },
			"tensor.DotProductAttentionAs: " + qkv + ": scale -Inf is not finite"},
		{"float mask", func() { dpa(q, k, v, f32z(2, 3), 0, false, bf) },
			"tensor.DotProductAttentionAs: mask f32[2,3]: want bool broadcastable to [1,1,2,3] (batch, heads, queries, keys)"},
		{"transposed mask", func() { dpa(q, k, v, tensor.FromBool(make([]bool, 6), 3, 2), 0, false, bf) },
			"tensor.DotProductAttentionAs: mask bool[3,2]: want bool broadcastable to [1,1,2,3] (batch, heads, queries, keys)"},
		{"rank-5 mask", func() { dpa(q, k, v, mask5, 0, false, bf) },
			"tensor.DotProductAttentionAs: mask bool[1,1,1,2,3]: want bool broadcastable to [1,1,2,3] (batch, heads, queries, keys)"},
		{"rank-5 mask, float32", func() { tensor.DotProductAttention(q, k, v, mask5, 0, false) },
			"tensor.DotProductAttention: mask bool[1,1,1,2,3]: want bool broadcastable to [1,1,2,3] (batch, heads, queries, keys)"},
		{"donated mask", func() { dpa(q, k, v, donatedT(tensor.FromBool(make([]bool, 6), 2, 3)), 0, false, bf) },
			"tensor.DotProductAttentionAs: operand mask bool[2,3] was donated (tensor.Donate)"},
	}
	for _, c := range cases {
		requirePanic(t, c.want, c.f, c.name)
	}

	// Empty dimensions give results of the right (empty) shape; no keys at
	// all give zeros, as the einsum over no keys does in JAX.
	for _, c := range []struct {
		q, k, v []int
		want    []int
	}{
		{[]int{1, 2, 1, 4}, []int{1, 0, 1, 4}, []int{1, 0, 1, 5}, []int{1, 2, 1, 5}},
		{[]int{1, 0, 1, 4}, []int{1, 3, 1, 4}, []int{1, 3, 1, 5}, []int{1, 0, 1, 5}},
		{[]int{0, 2, 1, 4}, []int{0, 3, 1, 4}, []int{0, 3, 1, 5}, []int{0, 2, 1, 5}},
		{[]int{1, 2, 0, 4}, []int{1, 3, 0, 4}, []int{1, 3, 0, 5}, []int{1, 2, 0, 5}},
		{[]int{1, 2, 1, 4}, []int{1, 3, 1, 4}, []int{1, 3, 1, 0}, []int{1, 2, 1, 0}},
	} {
		y := dpa(f32z(c.q...), f32z(c.k...), f32z(c.v...), nil, 0, true, bf)
		require.Equal(t, c.want, y.Shape())
		for _, x := range y.Float32s() {
			require.Zero(t, x, "q %v k %v", c.q, c.k)
		}
	}
	// A NaN query or an infinite key makes its output NaN, nothing else.
	y := dpa(tensor.Full(tensor.Float32, math.NaN(), 1, 2, 1, 4), k, tensor.Ones(tensor.Float32, 1, 3, 1, 2), nil, 0, false, bf)
	for _, x := range y.Float32s() {
		assert.True(t, math.IsNaN(float64(x)))
	}
}

func TestHostileStepFrom(t *testing.T) {
	adamStep := func(n int) tensor.PieceStep {
		_, _, _, st := tensor.AdamStepIntoOverMomentsLater(nil, f32z(n), f32z(n), f32z(n), tensor.AdamCoeffs{})
		return st
	}
	sgdStep := func(n int) tensor.PieceStep {
		_, _, st := tensor.SGDStepIntoLater(nil, f32z(n), nil, 0, 1, false)
		return st
	}
	const adam, sgd = "tensor.AdamStepIntoOverMomentsLater", "tensor.SGDStepIntoLater"
	cases := []struct {
		name string
		f    func()
		want string
	}{
		{"nil step", func() { tensor.StepFrom(nil, f32z(3)) }, "tensor.StepFrom: nil step"},
		{"float64 gradient", func() { tensor.StepFrom(adamStep(3), tensor.Zeros(tensor.Float64, 3)) },
			"tensor.StepFrom: f64[3]: want an untraced, unbatched float32 host gradient"},
		{"donated gradient", func() { tensor.StepFrom(adamStep(3), donatedT(f32z(3))) },
			"tensor.StepFrom: operand g f32[3] was donated (tensor.Donate)"},
		// Split over the cores: the panic of a piece (whichever fails
		// first) comes back to the caller.
		{"gradient larger than the parameter", func() { tensor.StepFrom(adamStep(10), f32z(1<<20)) },
			adam + ": step of elements ["},
		{"negative offset", func() { adamStep(10)(-1, make([]float32, 2)) },
			adam + ": step of elements [-1, 1) of a parameter of 10"},
		{"past the end", func() { adamStep(10)(9, make([]float32, 2)) },
			adam + ": step of elements [9, 11) of a parameter of 10"},
		{"offset overflowing", func() { adamStep(10)(math.MaxInt, make([]float32, 2)) },
			adam + ": step of elements [9223372036854775807, -9223372036854775807) of a parameter of 10"},
		{"SGD's offset overflowing", func() { sgdStep(10)(math.MaxInt-1, make([]float32, 2)) },
			sgd + ": step of elements [9223372036854775806, -9223372036854775808) of a parameter of 10"},
		{"SGD's negative offset", func() { sgdStep(10)(-3, nil) }, sgd + ": step of elements [-3, -3) of a parameter of 10"},
	}
	for _, c := range cases {
		msg := panicMessage(c.f)
		require.NotEmpty(t, msg, c.name)
		assert.Contains(t, msg, c.want, c.name)
	}
	// An empty gradient of an empty parameter is no step at all.
	tensor.StepFrom(adamStep(0), f32z(0))
}

func TestHostileSumProductsPartThen(t *testing.T) {
	none := func(int, []float32) {}
	spt := tensor.SumProductsPartThen
	const op = "tensor.SumProductsPartThen: "
	cases := []struct {
		name string
		f    func()
		want string
	}{
		{"no terms", func() { spt(nil, nil, 0, 0, 1, none) }, op + "0 left and 0 right operands; want the same number, at least one"},
		{"unpaired term", func() { spt(ts(f32z(3, 4)), nil, 0, 0, 1, none) }, op + "1 left and 0 right operands; want the same number, at least one"},
		{"nil then", func() { spt(ts(f32z(3, 4)), ts(f32z(3, 5)), 0, 0, 1, nil) }, op + "nil then"},
		{"dim 2", func() { spt(ts(f32z(3, 4)), ts(f32z(3, 5)), 2, 0, 1, none) }, op + "dim 2; want 0 or 1"},
		{"lo after hi", func() { spt(ts(f32z(3, 4)), ts(f32z(3, 5)), 0, 3, 1, none) }, op + "part [3, 1) of dimension 0 of f32[4,5]"},
		{"empty part", func() { spt(ts(f32z(3, 4)), ts(f32z(3, 5)), 0, 2, 2, none) }, op + "part [2, 2) of dimension 0 of f32[4,5]"},
		{"hi past the end", func() { spt(ts(f32z(3, 4)), ts(f32z(3, 5)), 1, 0, 6, none) }, op + "part [0, 6) of dimension 1 of f32[4,5]"},
		{"negative lo", func() { spt(ts(f32z(3, 4)), ts(f32z(3, 5)), 0, -1, 1, none) }, op + "part [-1, 1) of dimension 0 of f32[4,5]"},
		{"rows differ", func() { spt(ts(f32z(3, 4)), ts(f32z(2, 5)), 0, 0, 1, none) },
			op + "term 0: f32[3,4] and f32[2,5]; want float32 matrices with as many rows, on the host"},
		{"terms' columns differ", func() { spt(ts(f32z(3, 4), f32z(3, 3)), ts(f32z(3, 5), f32z(3, 5)), 0, 0, 1, none) },
			op + "term 1: f32[3,3] and f32[3,5]; term 0 is f32[_,4]ᵀ·f32[_,5]"},
		{"float64 term", func() { spt(ts(tensor.Zeros(tensor.Float64, 3, 4)), ts(f32z(3, 5)), 0, 0, 1, none) },
			op + "term 0: f64[3,4] and f32[3,5]; want float32 matrices with as many rows, on the host"},
		{"vectors", func() { spt(ts(f32z(3)), ts(f32z(3)), 0, 0, 1, none) },
			op + "term 0: f32[3] and f32[3]; want float32 matrices with as many rows, on the host"},
		{"nil term", func() { spt(ts(nil), ts(f32z(3, 5)), 0, 0, 1, none) }, op + "operand ps[0] is nil"},
		{"donated term", func() { spt(ts(f32z(3, 4)), ts(donatedT(f32z(3, 5))), 0, 0, 1, none) },
			op + "operand qs[0] f32[3,5] was donated (tensor.Donate)"},
	}
	for _, c := range cases {
		requirePanic(t, c.want, c.f, c.name)
	}
	// Terms without rows sum to zeros, each element handed over once; a
	// part without columns calls then never.
	var n int
	spt(ts(f32z(0, 4)), ts(f32z(0, 5)), 0, 0, 4, func(at int, g []float32) {
		assert.Equal(t, n, at)
		assert.Equal(t, make([]float32, len(g)), g)
		n += len(g)
	})
	assert.Equal(t, 20, n)
	spt(ts(f32z(3, 4)), ts(f32z(3, 0)), 0, 0, 4, func(int, []float32) { t.Error("then called for a part without columns") })
}
