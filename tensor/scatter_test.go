package tensor_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/tensor"
)

// ---------------------------------------------------------------------------
// ScatterAdd

func TestScatterAddHandWorked(t *testing.T) {
	x := tensor.FromFloat32([]float32{1, 1, 1, 1}, 4)
	got := tensor.ScatterAdd(x, ints([]int{0, 2, 0, -1}, 4), tensor.FromFloat32([]float32{10, 20, 30, 40}), 0)
	requireTensor(t, got, tensor.Float32, []int{4}, []float64{41, 1, 21, 41}) // index 0 twice accumulates

	// Rows of a [3,2] int32 table, indices of shape [2,2].
	tab := tensor.FromInts([]int{0, 0, 0, 0, 0, 0}, 3, 2)
	upd := tensor.FromInts([]int{1, 2, 3, 4, 5, 6, 7, 8}, 2, 2, 2)
	got = tensor.ScatterAdd(tab, ints([]int{2, 2, 0, 2}, 2, 2), upd, 0)
	requireTensor(t, got, tensor.Int32, []int{3, 2}, []float64{5, 6, 0, 0, 1 + 3 + 7, 2 + 4 + 8})
	assert.Equal(t, []int32{0, 0, 0, 0, 0, 0}, tab.Int32s(), "x must not change")
}

// scatterAddRef adds updates into x at indices along axis, in the same
// row-major order as the op (so float32 sums round identically).
func scatterAddRef(x, indices, updates *tensor.Tensor, axis int) []float64 {
	xs, is := x.Shape(), indices.Shape()
	if axis < 0 {
		axis += len(xs)
	}
	out := x.Float64s()
	f32 := x.DType() == tensor.Float32
	strides := make([]int, len(xs))
	acc := 1
	for i := len(xs) - 1; i >= 0; i-- {
		strides[i] = acc
		acc *= xs[i]
	}
	ri := len(is)
	forEach(updates.Shape(), func(u []int) {
		dst := append([]int{}, u[:axis]...)
		dst = append(dst, wrap(int(indices.At(u[axis:axis+ri]...)), xs[axis]))
		dst = append(dst, u[axis+ri:]...)
		off := 0
		for i, v := range dst {
			off += v * strides[i]
		}
		if f32 {
			out[off] = float64(float32(out[off]) + float32(updates.At(u...)))
		} else {
			out[off] = float64(int32(out[off]) + int32(updates.At(u...)))
		}
	})
	return out
}

var scatterCases = []struct {
	name   string
	xShape []int
	idx    []int
	idxShp []int
	axis   int
}{
	{"vector with duplicates", []int{5}, []int{1, 1, 4, -1, 0, 1}, []int{6}, 0},
	{"rows", []int{4, 3}, []int{3, 0, -4, 2}, []int{2, 2}, 0},
	{"columns", []int{3, 4}, []int{2, 2, -1}, []int{3}, 1},
	{"middle of rank 3", []int{2, 3, 2}, []int{1, 0, 1, 1}, []int{4}, -2},
	{"scalar index", []int{2, 3}, []int{1}, []int{}, 1},
	{"no indices", []int{2, 3}, []int{}, []int{0}, 0},
	{"zero-size x", []int{0, 3}, []int{0, 2, 2}, []int{3}, 1},
}

func TestScatterAddMatchesNaiveLoop(t *testing.T) {
	for _, tc := range scatterCases {
		for _, dt := range []tensor.DType{tensor.Float32, tensor.Int32} {
			t.Run(fmt.Sprintf("%s/%v", tc.name, dt), func(t *testing.T) {
				x := sample(dt, 1, tc.xShape...)
				idx := ints(tc.idx, tc.idxShp...)
				ushape, _ := takeRef(x, idx, tc.axis)
				upd := sample(dt, 2, ushape...)
				got := tensor.ScatterAdd(x, idx, upd, tc.axis)
				requireTensor(t, got, dt, tc.xShape, scatterAddRef(x, idx, upd, tc.axis))
			})
		}
	}
}

func TestScatterAddGrad(t *testing.T) {
	for _, tc := range scatterCases {
		t.Run(tc.name, func(t *testing.T) {
			x := sample(tensor.Float32, 3, tc.xShape...)
			idx := ints(tc.idx, tc.idxShp...)
			ushape, _ := takeRef(x, idx, tc.axis)
			f := func(xs []*tensor.Tensor) *tensor.Tensor { return tensor.ScatterAdd(xs[0], idx, xs[1], tc.axis) }
			checkGradOf(t, f, x, sample(tensor.Float32, 4, ushape...))
		})
	}
	t.Run("second order", func(t *testing.T) {
		idx := ints([]int{1, 1, 0}, 3)
		f := gradOfSquares(func(x *tensor.Tensor) *tensor.Tensor {
			// x is both the base and (through Take) the updates.
			return tensor.ScatterAdd(x, idx, tensor.Take(x, ints([]int{2, 0, 2}, 3), 0), 0)
		})
		checkGradOf(t, f, sample(tensor.Float32, 5, 3, 2))
	})
}

func TestScatterAddTransposesTake(t *testing.T) {
	// <Take(x), u> == <x, ScatterAdd(0, u)> for every x and u: the defining
	// property of a transpose, checked with duplicate and negative indices.
	x := sample(tensor.Float32, 1, 4, 3)
	idx := ints([]int{2, -1, 0, 0, -3}, 5)
	u := sample(tensor.Float32, 2, 4, 5)
	lhs := tensor.Sum(tensor.Mul(tensor.Take(x, idx, 1), u)).Item()
	rhs := tensor.Sum(tensor.Mul(x, tensor.ScatterAdd(tensor.Zeros(tensor.Float32, 4, 3), idx, u, 1))).Item()
	assert.InDelta(t, lhs, rhs, 1e-4)
}

func TestScatterAddPanics(t *testing.T) {
	x := sample(tensor.Float32, 1, 5, 3)
	idx := ints([]int{0, 1}, 2)
	require.PanicsWithValue(t, "tensor.ScatterAdd: f32[5,3], i32[2], f32[2,4] along axis 0: updates must have shape [2 3] (x.shape[:axis] + indices.shape + x.shape[axis+1:])",
		func() { tensor.ScatterAdd(x, idx, sample(tensor.Float32, 1, 2, 4), 0) })
	require.PanicsWithValue(t, "tensor.ScatterAdd: f32[5,3], i32[2], i32[2,3] along axis 0: x and updates have different dtypes",
		func() { tensor.ScatterAdd(x, idx, sample(tensor.Int32, 1, 2, 3), 0) })
	require.PanicsWithValue(t, "tensor.ScatterAdd: bool[2], i32[2], bool[2] along axis 0: not defined for bool",
		func() { tensor.ScatterAdd(sample(tensor.Bool, 1, 2), idx, sample(tensor.Bool, 1, 2), 0) })
	require.PanicsWithValue(t, "tensor.ScatterAdd: f32[5,3], i32[2], f32[2,3] along axis 0: index 5 at position [1] out of range [-5, 5)",
		func() { tensor.ScatterAdd(x, ints([]int{0, 5}, 2), sample(tensor.Float32, 1, 2, 3), 0) })
	require.PanicsWithValue(t, "tensor.ScatterAdd: f32[5,3], f32[2], f32[2,3] along axis 0: indices must be int32 or int64, got float32",
		func() { tensor.ScatterAdd(x, tensor.FromFloat32([]float32{0, 1}), sample(tensor.Float32, 1, 2, 3), 0) })
	require.PanicsWithValue(t, "tensor.ScatterAdd: f32[5,3], i32[2], f32[2,3] along axis -3: axis out of range for rank 2",
		func() { tensor.ScatterAdd(x, idx, sample(tensor.Float32, 1, 2, 3), -3) })
}

// ---------------------------------------------------------------------------
// SegmentSum

func TestSegmentSumHandWorked(t *testing.T) {
	data := tensor.FromFloat32([]float32{1, 2, 3, 4, 5, 6, 7, 8}, 4, 2)
	// Rows 0 and 2 go to segment 1, row 1 to segment 0, row 3 (id 5) is dropped.
	got := tensor.SegmentSum(data, ints([]int{1, 0, 1, 5}, 4), 3)
	requireTensor(t, got, tensor.Float32, []int{3, 2}, []float64{3, 4, 1 + 5, 2 + 6, 0, 0})

	// Negative ids are dropped, not wrapped.
	got = tensor.SegmentSum(tensor.FromInts([]int{10, 20, 30}), ints([]int{-1, 0, 0}, 3), 2)
	requireTensor(t, got, tensor.Int32, []int{2}, []float64{50, 0})
}

func TestSegmentSumMatchesNaiveLoop(t *testing.T) {
	for _, tc := range []struct {
		name  string
		shape []int
		ids   []int
		ns    int
	}{
		{"vector", []int{6}, []int{0, 2, 2, 1, 0, 2}, 3},
		{"rows with dropped ids", []int{5, 3}, []int{3, -1, 0, 4, 3}, 4},
		{"rank 3", []int{4, 2, 2}, []int{1, 1, 1, 0}, 2},
		{"no segments", []int{3, 2}, []int{0, 1, 2}, 0},
		{"no rows", []int{0, 2}, []int{}, 3},
		{"zero-size rows", []int{3, 0}, []int{0, 1, 0}, 2},
	} {
		for _, dt := range []tensor.DType{tensor.Float32, tensor.Int32} {
			t.Run(fmt.Sprintf("%s/%v", tc.name, dt), func(t *testing.T) {
				data := sample(dt, 1, tc.shape...)
				shape := append([]int{tc.ns}, tc.shape[1:]...)
				want := make([]float64, numel(shape))
				inner := numel(tc.shape[1:])
				vals := data.Float64s()
				for r, id := range tc.ids {
					if id < 0 || id >= tc.ns {
						continue
					}
					for e := 0; e < inner; e++ {
						if dt == tensor.Float32 {
							want[id*inner+e] = float64(float32(want[id*inner+e]) + float32(vals[r*inner+e]))
						} else {
							want[id*inner+e] += vals[r*inner+e]
						}
					}
				}
				got := tensor.SegmentSum(data, ints(tc.ids, len(tc.ids)), tc.ns)
				requireTensor(t, got, dt, shape, want)
			})
		}
	}
}

func TestSegmentSumGrad(t *testing.T) {
	ids := ints([]int{2, 0, 2, -1, 7, 1}, 6)
	f := func(xs []*tensor.Tensor) *tensor.Tensor { return tensor.SegmentSum(xs[0], ids, 3) }
	checkGradOf(t, f, sample(tensor.Float32, 1, 6, 2))
	checkGradOf(t, f, sample(tensor.Float32, 1, 6))

	// Rows whose ids are dropped get zero gradient.
	x := sample(tensor.Float32, 2, 6)
	tr := tensor.NewTrace()
	xt := tr.Leaf(x)
	y := tensor.Sum(tensor.SegmentSum(xt, ids, 3))
	g := tensor.Backward(tr, []*tensor.Tensor{y}, []*tensor.Tensor{tensor.Scalar(1)}, []*tensor.Tensor{xt}, false)[0]
	assert.Equal(t, []float32{1, 1, 1, 0, 0, 1}, g.Float32s())

	h := gradOfSquares(func(x *tensor.Tensor) *tensor.Tensor { return tensor.SegmentSum(x, ids, 3) })
	checkGradOf(t, h, sample(tensor.Float32, 3, 6, 2))
}

func TestSegmentSumPanics(t *testing.T) {
	data := sample(tensor.Float32, 1, 4, 2)
	require.PanicsWithValue(t, "tensor.SegmentSum: f32[4,2], i32[3] into 5 segments: want one segment id per row: i32[4]",
		func() { tensor.SegmentSum(data, ints([]int{0, 1, 2}, 3), 5) })
	require.PanicsWithValue(t, "tensor.SegmentSum: f32[4,2], i32[4,1] into 5 segments: want one segment id per row: i32[4]",
		func() { tensor.SegmentSum(data, ints([]int{0, 1, 2, 3}, 4, 1), 5) })
	require.PanicsWithValue(t, "tensor.SegmentSum: f32[4,2], f32[4] into 5 segments: segment ids must be int32",
		func() { tensor.SegmentSum(data, sample(tensor.Float32, 1, 4), 5) })
	require.PanicsWithValue(t, "tensor.SegmentSum: f32[4,2], i32[4] into -1 segments: negative segment count",
		func() { tensor.SegmentSum(data, ints([]int{0, 1, 2, 3}, 4), -1) })
	require.PanicsWithValue(t, "tensor.SegmentSum: bool[4], i32[4] into 2 segments: not defined for bool",
		func() { tensor.SegmentSum(sample(tensor.Bool, 1, 4), ints([]int{0, 1, 2, 3}, 4), 2) })
	require.PanicsWithValue(t, "tensor.SegmentSum: f32[], i32[1] into 2 segments: data must have at least one dimension",
		func() { tensor.SegmentSum(tensor.Scalar(1), ints([]int{0}, 1), 2) })
}
