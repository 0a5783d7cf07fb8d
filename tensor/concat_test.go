package tensor_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/tensor"
)

// ---------------------------------------------------------------------------
// Concat

func TestConcatHandWorked(t *testing.T) {
	a := tensor.FromInts([]int{1, 2, 3, 4}, 2, 2)
	b := tensor.FromInts([]int{5, 6}, 2, 1)
	requireTensor(t, tensor.Concat(1, a, b), tensor.Int32, []int{2, 3}, []float64{1, 2, 5, 3, 4, 6})
	requireTensor(t, tensor.Concat(0, a, tensor.Reshape(b, 1, 2)), tensor.Int32, []int{3, 2}, []float64{1, 2, 3, 4, 5, 6})
	requireTensor(t, tensor.Concat(-1, tensor.FromBool([]bool{true}), tensor.FromBool([]bool{false, true})),
		tensor.Bool, []int{3}, []float64{1, 0, 1})
}

var concatCases = []struct {
	name   string
	shapes [][]int
	axis   int
}{
	{"one operand", [][]int{{2, 3}}, 0},
	{"vectors", [][]int{{3}, {1}, {4}}, 0},
	{"rows", [][]int{{2, 3}, {1, 3}}, 0},
	{"columns", [][]int{{2, 3}, {2, 1}, {2, 2}}, 1},
	{"middle of rank 3", [][]int{{2, 1, 3}, {2, 2, 3}}, -2},
	{"last of rank 4", [][]int{{2, 1, 2, 1}, {2, 1, 2, 3}}, 3},
	{"zero-size operand", [][]int{{2, 0}, {2, 3}, {2, 0}}, 1},
	{"all empty", [][]int{{0, 2}, {0, 2}}, 0},
	{"zero-size other axis", [][]int{{0, 2}, {0, 1}}, 1},
}

// concatRef is jnp.concatenate written as a naive loop.
func concatRef(xs []*tensor.Tensor, axis int) ([]int, []float64) {
	shape := xs[0].Shape()
	if axis < 0 {
		axis += len(shape)
	}
	shape[axis] = 0
	for _, x := range xs {
		shape[axis] += x.Dim(axis)
	}
	return shape, build(shape, func(idx []int) float64 {
		i := idx[axis]
		for _, x := range xs {
			if i < x.Dim(axis) {
				src := append([]int{}, idx...)
				src[axis] = i
				return x.At(src...)
			}
			i -= x.Dim(axis)
		}
		panic("unreachable")
	})
}

func TestConcatMatchesNaiveLoop(t *testing.T) {
	for _, tc := range concatCases {
		for _, dt := range allDTypes {
			t.Run(fmt.Sprintf("%s/%v", tc.name, dt), func(t *testing.T) {
				xs := make([]*tensor.Tensor, len(tc.shapes))
				for i, s := range tc.shapes {
					xs[i] = sample(dt, uint64(i), s...)
				}
				shape, want := concatRef(xs, tc.axis)
				requireTensor(t, tensor.Concat(tc.axis, xs...), dt, shape, want)
			})
		}
	}
}

func TestConcatGrad(t *testing.T) {
	for _, tc := range concatCases {
		t.Run(tc.name, func(t *testing.T) {
			xs := make([]*tensor.Tensor, len(tc.shapes))
			for i, s := range tc.shapes {
				xs[i] = sample(tensor.Float32, uint64(10+i), s...)
			}
			f := func(xs []*tensor.Tensor) *tensor.Tensor { return tensor.Concat(tc.axis, xs...) }
			checkGradOf(t, f, xs...)
		})
	}
	t.Run("same operand twice", func(t *testing.T) {
		f := func(xs []*tensor.Tensor) *tensor.Tensor { return tensor.Concat(0, xs[0], xs[1], xs[0]) }
		checkGradOf(t, f, sample(tensor.Float32, 1, 2, 2), sample(tensor.Float32, 2, 1, 2))
	})
	t.Run("second order", func(t *testing.T) {
		f := gradOfSquares(func(x *tensor.Tensor) *tensor.Tensor { return tensor.Concat(1, x, tensor.Flip(x, 1)) })
		checkGradOf(t, f, sample(tensor.Float32, 3, 2, 3))
	})
}

func TestConcatPanics(t *testing.T) {
	a := sample(tensor.Float32, 1, 2, 3)
	require.PanicsWithValue(t, "tensor.Concat: no operands", func() { tensor.Concat(0) })
	require.PanicsWithValue(t, "tensor.Concat: f32[2,3], f32[2,4] along axis 0: dims 3 != 4 at axis 1",
		func() { tensor.Concat(0, a, sample(tensor.Float32, 1, 2, 4)) })
	require.PanicsWithValue(t, "tensor.Concat: f32[2,3], i32[2,3] along axis 0: dtypes differ",
		func() { tensor.Concat(0, a, sample(tensor.Int32, 1, 2, 3)) })
	require.PanicsWithValue(t, "tensor.Concat: f32[2,3], f32[6] along axis 0: ranks differ",
		func() { tensor.Concat(0, a, sample(tensor.Float32, 1, 6)) })
	require.PanicsWithValue(t, "tensor.Concat: f32[2,3], f32[2,3] along axis 2: axis out of range for rank 2",
		func() { tensor.Concat(2, a, a) })
	require.PanicsWithValue(t, "tensor.Concat: f32[], f32[] along axis 0: axis out of range for rank 0",
		func() { tensor.Concat(0, tensor.Scalar(1), tensor.Scalar(2)) })
}

// ---------------------------------------------------------------------------
// Split and SplitSizes

func TestSplitHandWorked(t *testing.T) {
	x := tensor.FromInts([]int{0, 1, 2, 3, 4, 5, 6, 7}, 2, 4)
	parts := tensor.Split(x, 1, 2)
	require.Len(t, parts, 2)
	requireTensor(t, parts[0], tensor.Int32, []int{2, 2}, []float64{0, 1, 4, 5})
	requireTensor(t, parts[1], tensor.Int32, []int{2, 2}, []float64{2, 3, 6, 7})

	parts = tensor.SplitSizes(x, -1, []int{1, 0, 3})
	require.Len(t, parts, 3)
	requireTensor(t, parts[0], tensor.Int32, []int{2, 1}, []float64{0, 4})
	requireTensor(t, parts[1], tensor.Int32, []int{2, 0}, []float64{})
	requireTensor(t, parts[2], tensor.Int32, []int{2, 3}, []float64{1, 2, 3, 5, 6, 7})
}

var splitCases = []struct {
	name  string
	shape []int
	axis  int
	sizes []int
}{
	{"one part", []int{2, 3}, 0, []int{2}},
	{"vector", []int{6}, 0, []int{1, 2, 3}},
	{"rows", []int{4, 3}, 0, []int{2, 2}},
	{"columns", []int{3, 5}, 1, []int{2, 0, 3}},
	{"middle of rank 3", []int{2, 4, 3}, -2, []int{1, 1, 2}},
	{"zero-size axis", []int{0, 3}, 0, []int{0, 0}},
	{"zero-size other axis", []int{0, 3}, 1, []int{1, 2}},
	{"no parts of an empty axis", []int{2, 0}, 1, []int{}},
}

func TestSplitSizesMatchesSlices(t *testing.T) {
	for _, tc := range splitCases {
		for _, dt := range allDTypes {
			t.Run(fmt.Sprintf("%s/%v", tc.name, dt), func(t *testing.T) {
				x := sample(dt, 1, tc.shape...)
				parts := tensor.SplitSizes(x, tc.axis, tc.sizes)
				require.Len(t, parts, len(tc.sizes))
				a := (tc.axis + len(tc.shape)) % len(tc.shape)
				off := 0
				for i, p := range parts {
					starts, limits := make([]int, len(tc.shape)), append([]int{}, tc.shape...)
					starts[a], limits[a] = off, off+tc.sizes[i]
					shape, want := sliceRef(x, starts, limits)
					requireTensor(t, p, dt, shape, want)
					off += tc.sizes[i]
				}
			})
		}
	}
}

func TestSplitGrad(t *testing.T) {
	for _, tc := range splitCases {
		if len(tc.sizes) == 0 {
			continue
		}
		t.Run(tc.name, func(t *testing.T) {
			// A weighted sum of the parts, flattened, exercises every part's
			// cotangent.
			f := func(xs []*tensor.Tensor) *tensor.Tensor {
				parts := tensor.SplitSizes(xs[0], tc.axis, tc.sizes)
				flat := make([]*tensor.Tensor, len(parts))
				for i, p := range parts {
					flat[i] = tensor.MulScalar(tensor.Flatten(p), float32(i+1))
				}
				return tensor.Concat(0, flat...)
			}
			checkGradOf(t, f, sample(tensor.Float32, 2, tc.shape...))
		})
	}
	t.Run("unused parts", func(t *testing.T) {
		// Only the middle part is used: the others get zero cotangents.
		f := func(xs []*tensor.Tensor) *tensor.Tensor { return tensor.Split(xs[0], 1, 3)[1] }
		checkGradOf(t, f, sample(tensor.Float32, 3, 2, 6))

		x := sample(tensor.Float32, 3, 2, 6)
		tr := tensor.NewTrace()
		xt := tr.Leaf(x)
		y := tensor.Sum(tensor.Split(xt, 1, 3)[1])
		g := tensor.Backward(tr, []*tensor.Tensor{y}, []*tensor.Tensor{tensor.Scalar(1)}, []*tensor.Tensor{xt}, false)[0]
		assert.Equal(t, []float32{0, 0, 1, 1, 0, 0, 0, 0, 1, 1, 0, 0}, g.Float32s())
	})
	t.Run("second order", func(t *testing.T) {
		f := gradOfSquares(func(x *tensor.Tensor) *tensor.Tensor {
			p := tensor.Split(x, 0, 2)
			return tensor.Mul(p[0], p[1])
		})
		checkGradOf(t, f, sample(tensor.Float32, 4, 4, 2))
	})
}

func TestSplitPanics(t *testing.T) {
	x := sample(tensor.Float32, 1, 5, 2)
	require.PanicsWithValue(t, "tensor.Split: f32[5,2] along axis 0 into 2 parts: dim 5 is not divisible by 2",
		func() { tensor.Split(x, 0, 2) })
	require.PanicsWithValue(t, "tensor.Split: f32[5,2] along axis 1 into 0 parts: the number of parts must be positive",
		func() { tensor.Split(x, 1, 0) })
	require.PanicsWithValue(t, "tensor.Split: f32[5,2] along axis 2 into 1 parts: axis out of range for rank 2",
		func() { tensor.Split(x, 2, 1) })
	require.PanicsWithValue(t, "tensor.SplitSizes: f32[5,2] along axis 0 into sizes [2 2]: sizes add up to 4, not 5",
		func() { tensor.SplitSizes(x, 0, []int{2, 2}) })
	require.PanicsWithValue(t, "tensor.SplitSizes: f32[5,2] along axis 0 into sizes [6 -1]: negative size",
		func() { tensor.SplitSizes(x, 0, []int{6, -1}) })
	require.PanicsWithValue(t, "tensor.SplitSizes: f32[] along axis 0 into sizes [1]: axis out of range for rank 0",
		func() { tensor.SplitSizes(tensor.Scalar(1), 0, []int{1}) })
}

// ---------------------------------------------------------------------------
// Stack and Unstack

func TestStackHandWorked(t *testing.T) {
	a := tensor.FromInts([]int{1, 2, 3})
	b := tensor.FromInts([]int{4, 5, 6})
	requireTensor(t, tensor.Stack(0, a, b), tensor.Int32, []int{2, 3}, []float64{1, 2, 3, 4, 5, 6})
	requireTensor(t, tensor.Stack(1, a, b), tensor.Int32, []int{3, 2}, []float64{1, 4, 2, 5, 3, 6})
	requireTensor(t, tensor.Stack(-1, a, b), tensor.Int32, []int{3, 2}, []float64{1, 4, 2, 5, 3, 6})
	requireTensor(t, tensor.Stack(0, tensor.ScalarBool(true), tensor.ScalarBool(false)), tensor.Bool, []int{2}, []float64{1, 0})
}

func TestStackUnstackMatchNaiveLoop(t *testing.T) {
	for _, tc := range []struct {
		name  string
		shape []int
		n     int
		axis  int
	}{
		{"scalars", []int{}, 3, 0},
		{"one", []int{2, 3}, 1, 1},
		{"front", []int{2, 3}, 4, 0},
		{"middle", []int{2, 3}, 2, 1},
		{"back", []int{2, 3}, 3, 2},
		{"negative", []int{2, 3}, 2, -1},
		{"zero-size operands", []int{0, 3}, 2, 1},
	} {
		for _, dt := range allDTypes {
			t.Run(fmt.Sprintf("%s/%v", tc.name, dt), func(t *testing.T) {
				xs := make([]*tensor.Tensor, tc.n)
				for i := range xs {
					xs[i] = sample(dt, uint64(i), tc.shape...)
				}
				r := len(tc.shape) + 1
				a := (tc.axis + r) % r
				shape := append(append(append([]int{}, tc.shape[:a]...), tc.n), tc.shape[a:]...)
				want := build(shape, func(idx []int) float64 {
					src := append(append([]int{}, idx[:a]...), idx[a+1:]...)
					return xs[idx[a]].At(src...)
				})
				s := tensor.Stack(tc.axis, xs...)
				requireTensor(t, s, dt, shape, want)

				parts := tensor.Unstack(s, tc.axis)
				require.Len(t, parts, tc.n)
				for i, p := range parts {
					requireTensor(t, p, dt, tc.shape, xs[i].Float64s())
				}
			})
		}
	}
}

func TestStackUnstackGrad(t *testing.T) {
	f := func(xs []*tensor.Tensor) *tensor.Tensor { return tensor.Stack(1, xs...) }
	checkGradOf(t, f, sample(tensor.Float32, 1, 2, 3), sample(tensor.Float32, 2, 2, 3), sample(tensor.Float32, 3, 2, 3))

	g := func(xs []*tensor.Tensor) *tensor.Tensor {
		parts := tensor.Unstack(xs[0], 1)
		// Use the parts unevenly and leave one out.
		return tensor.Add(tensor.MulScalar(parts[0], 3), parts[2])
	}
	checkGradOf(t, g, sample(tensor.Float32, 4, 2, 4, 2))

	h := gradOfSquares(func(x *tensor.Tensor) *tensor.Tensor {
		p := tensor.Unstack(x, 0)
		return tensor.Stack(0, tensor.Mul(p[0], p[1]), p[2])
	})
	checkGradOf(t, h, sample(tensor.Float32, 5, 3, 2))
}

func TestUnstackEmptyAxis(t *testing.T) {
	parts := tensor.Unstack(sample(tensor.Float32, 1, 2, 0, 3), 1)
	assert.Empty(t, parts)
}

func TestStackUnstackPanics(t *testing.T) {
	a := sample(tensor.Float32, 1, 2, 3)
	require.PanicsWithValue(t, "tensor.Stack: no operands", func() { tensor.Stack(0) })
	require.PanicsWithValue(t, "tensor.Stack: f32[2,3], f32[3,2] along axis 0: operands must have one dtype and shape",
		func() { tensor.Stack(0, a, sample(tensor.Float32, 1, 3, 2)) })
	require.PanicsWithValue(t, "tensor.Stack: f32[2,3], i32[2,3] along axis 0: operands must have one dtype and shape",
		func() { tensor.Stack(0, a, sample(tensor.Int32, 1, 2, 3)) })
	require.PanicsWithValue(t, "tensor.Stack: f32[2,3], f32[2,3] along axis 3: axis out of range for rank 3",
		func() { tensor.Stack(3, a, a) })
	require.PanicsWithValue(t, "tensor.Stack: f32[2,3] along axis -4: axis out of range for rank 3",
		func() { tensor.Stack(-4, a) })
	require.PanicsWithValue(t, "tensor.Unstack: axis 2 out of range for f32[2,3]", func() { tensor.Unstack(a, 2) })
}

// ---------------------------------------------------------------------------
// Repeat and Tile

func TestRepeatTileHandWorked(t *testing.T) {
	x := tensor.FromInts([]int{1, 2, 3, 4}, 2, 2)
	requireTensor(t, tensor.Repeat(x, 2, 1), tensor.Int32, []int{2, 4}, []float64{1, 1, 2, 2, 3, 3, 4, 4})
	requireTensor(t, tensor.Repeat(x, 2, 0), tensor.Int32, []int{4, 2}, []float64{1, 2, 1, 2, 3, 4, 3, 4})
	requireTensor(t, tensor.Tile(x, 2), tensor.Int32, []int{2, 4}, []float64{1, 2, 1, 2, 3, 4, 3, 4})
	requireTensor(t, tensor.Tile(x, 2, 1), tensor.Int32, []int{4, 2}, []float64{1, 2, 3, 4, 1, 2, 3, 4})
	requireTensor(t, tensor.Tile(tensor.FromInts([]int{7, 8}), 2, 1, 2), tensor.Int32, []int{2, 1, 4},
		[]float64{7, 8, 7, 8, 7, 8, 7, 8})
}

var repeatCases = []struct {
	name    string
	shape   []int
	repeats int
	axis    int
}{
	{"vector", []int{3}, 3, 0},
	{"last", []int{2, 3}, 2, -1},
	{"first", []int{2, 3}, 4, 0},
	{"middle of rank 3", []int{2, 2, 3}, 2, 1},
	{"once", []int{2, 3}, 1, 1},
	{"zero times", []int{2, 3}, 0, 1},
	{"zero-size", []int{0, 3}, 2, 0},
}

func TestRepeatMatchesNaiveLoop(t *testing.T) {
	for _, tc := range repeatCases {
		for _, dt := range allDTypes {
			t.Run(fmt.Sprintf("%s/%v", tc.name, dt), func(t *testing.T) {
				x := sample(dt, 1, tc.shape...)
				a := (tc.axis + len(tc.shape)) % len(tc.shape)
				shape := append([]int{}, tc.shape...)
				shape[a] *= tc.repeats
				want := build(shape, func(idx []int) float64 {
					src := append([]int{}, idx...)
					src[a] /= tc.repeats
					return x.At(src...)
				})
				requireTensor(t, tensor.Repeat(x, tc.repeats, tc.axis), dt, shape, want)
			})
		}
	}
}

func TestRepeatGrad(t *testing.T) {
	for _, tc := range repeatCases {
		t.Run(tc.name, func(t *testing.T) {
			f := func(xs []*tensor.Tensor) *tensor.Tensor { return tensor.Repeat(xs[0], tc.repeats, tc.axis) }
			checkGradOf(t, f, sample(tensor.Float32, 2, tc.shape...))
		})
	}
}

var tileCases = []struct {
	name  string
	shape []int
	reps  []int
}{
	{"scalar", []int{}, []int{3}},
	{"vector", []int{3}, []int{2}},
	{"same rank", []int{2, 3}, []int{2, 3}},
	{"short reps", []int{2, 1, 3}, []int{2}},
	{"long reps", []int{2, 3}, []int{2, 1, 2}},
	{"no reps", []int{2, 3}, []int{}},
	{"all ones", []int{2, 3}, []int{1, 1}},
	{"zero reps", []int{2, 3}, []int{0, 2}},
	{"zero-size", []int{0, 3}, []int{2, 2}},
}

func TestTileMatchesNaiveLoop(t *testing.T) {
	for _, tc := range tileCases {
		for _, dt := range allDTypes {
			t.Run(fmt.Sprintf("%s/%v", tc.name, dt), func(t *testing.T) {
				x := sample(dt, 1, tc.shape...)
				r := max(len(tc.shape), len(tc.reps))
				xs := make([]int, r)
				rp := make([]int, r)
				for i := range r {
					xs[i], rp[i] = 1, 1
				}
				copy(xs[r-len(tc.shape):], tc.shape)
				copy(rp[r-len(tc.reps):], tc.reps)
				shape := make([]int, r)
				for i := range shape {
					shape[i] = xs[i] * rp[i]
				}
				want := build(shape, func(idx []int) float64 {
					src := make([]int, len(tc.shape))
					for i := range src {
						d := i + r - len(tc.shape)
						src[i] = idx[d] % xs[d]
					}
					return x.At(src...)
				})
				requireTensor(t, tensor.Tile(x, tc.reps...), dt, shape, want)
			})
		}
	}
}

func TestTileGrad(t *testing.T) {
	for _, tc := range tileCases {
		t.Run(tc.name, func(t *testing.T) {
			f := func(xs []*tensor.Tensor) *tensor.Tensor { return tensor.Tile(xs[0], tc.reps...) }
			checkGradOf(t, f, sample(tensor.Float32, 2, tc.shape...))
		})
	}
}

func TestRepeatTilePanics(t *testing.T) {
	x := sample(tensor.Float32, 1, 2, 3)
	require.PanicsWithValue(t, "tensor.Repeat: f32[2,3] repeated -1 times along axis 0: negative count",
		func() { tensor.Repeat(x, -1, 0) })
	require.PanicsWithValue(t, "tensor.Repeat: axis 2 out of range for f32[2,3]", func() { tensor.Repeat(x, 2, 2) })
	require.PanicsWithValue(t, "tensor.Tile: f32[2,3] by [1 -2]: negative count", func() { tensor.Tile(x, 1, -2) })
}
