package tensor_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/tensor"
)

// sliceRef is lax.slice written as a naive loop.
func sliceRef(x *tensor.Tensor, starts, limits []int) ([]int, []float64) {
	shape := make([]int, len(starts))
	for i := range shape {
		shape[i] = limits[i] - starts[i]
	}
	return shape, build(shape, func(idx []int) float64 {
		src := make([]int, len(idx))
		for i, v := range idx {
			src[i] = v + starts[i]
		}
		return x.At(src...)
	})
}

func TestSliceHandWorked(t *testing.T) {
	x := tensor.FromInts([]int{
		0, 1, 2, 3,
		4, 5, 6, 7,
		8, 9, 10, 11,
	}, 3, 4)
	requireTensor(t, tensor.Slice(x, []int{1, 1}, []int{3, 3}), tensor.Int32, []int{2, 2}, []float64{5, 6, 9, 10})
	requireTensor(t, tensor.SliceAxis(x, 1, -2, 4), tensor.Int32, []int{3, 2}, []float64{2, 3, 6, 7, 10, 11})
	requireTensor(t, tensor.SliceAxis(x, 0, 0, -1), tensor.Int32, []int{2, 4}, []float64{0, 1, 2, 3, 4, 5, 6, 7})
}

var sliceCases = []struct {
	name           string
	shape          []int
	starts, limits []int
}{
	{"rank 0", []int{}, []int{}, []int{}},
	{"vector", []int{7}, []int{2}, []int{5}},
	{"whole", []int{2, 3}, []int{0, 0}, []int{2, 3}},
	{"rows (one contiguous run)", []int{5, 3}, []int{1, 0}, []int{4, 3}},
	{"columns", []int{4, 5}, []int{0, 1}, []int{4, 3}},
	{"inner box", []int{3, 4, 5}, []int{1, 1, 2}, []int{3, 3, 4}},
	{"last dims full", []int{4, 3, 2, 2}, []int{1, 1, 0, 0}, []int{3, 3, 2, 2}},
	{"empty result", []int{3, 4}, []int{1, 2}, []int{1, 4}},
	{"zero-size input", []int{0, 4}, []int{0, 1}, []int{0, 3}},
	{"width one", []int{3, 4, 5}, []int{0, 2, 4}, []int{3, 3, 5}},
}

func TestSliceMatchesNaiveLoop(t *testing.T) {
	for _, tc := range sliceCases {
		for _, dt := range allDTypes {
			t.Run(fmt.Sprintf("%s/%v", tc.name, dt), func(t *testing.T) {
				x := sample(dt, 1, tc.shape...)
				got := tensor.Slice(x, tc.starts, tc.limits)
				shape, want := sliceRef(x, tc.starts, tc.limits)
				requireTensor(t, got, dt, shape, want)
			})
		}
	}
}

func TestSliceGrad(t *testing.T) {
	for _, tc := range sliceCases {
		t.Run(tc.name, func(t *testing.T) {
			f := func(xs []*tensor.Tensor) *tensor.Tensor { return tensor.Slice(xs[0], tc.starts, tc.limits) }
			checkGradOf(t, f, sample(tensor.Float32, 2, tc.shape...))
		})
	}
	t.Run("second order", func(t *testing.T) {
		f := gradOfSquares(func(x *tensor.Tensor) *tensor.Tensor { return tensor.Slice(x, []int{1, 0}, []int{3, 2}) })
		checkGradOf(t, f, sample(tensor.Float32, 3, 3, 3))
	})
}

func TestSliceAxisMatchesSlice(t *testing.T) {
	x := sample(tensor.Float32, 1, 3, 4, 5)
	for _, tc := range []struct{ axis, start, limit, a, s, l int }{
		{0, 1, 3, 0, 1, 3},
		{1, -3, -1, 1, 1, 3},
		{-1, 0, 5, 2, 0, 5},
		{2, 4, 4, 2, 4, 4},
		{-2, -4, 4, 1, 0, 4},
	} {
		starts, limits := []int{0, 0, 0}, []int{3, 4, 5}
		starts[tc.a], limits[tc.a] = tc.s, tc.l
		got := tensor.SliceAxis(x, tc.axis, tc.start, tc.limit)
		want := tensor.Slice(x, starts, limits)
		require.Equal(t, want.Shape(), got.Shape(), "%+v", tc)
		require.Equal(t, want.Float32s(), got.Float32s(), "%+v", tc)
	}
	f := func(xs []*tensor.Tensor) *tensor.Tensor { return tensor.SliceAxis(xs[0], -1, 1, -1) }
	checkGradOf(t, f, sample(tensor.Float32, 2, 2, 3, 4))
}

func TestSlicePanics(t *testing.T) {
	x := sample(tensor.Float32, 1, 2, 3)
	require.PanicsWithValue(t, "tensor.Slice: f32[2,3] from [0] to [2]: want 2 starts and 2 limits",
		func() { tensor.Slice(x, []int{0}, []int{2}) })
	require.PanicsWithValue(t, "tensor.Slice: f32[2,3] from [0 0] to [2 4]: axis 1: [0, 4) is not a range within [0, 3)",
		func() { tensor.Slice(x, []int{0, 0}, []int{2, 4}) })
	require.PanicsWithValue(t, "tensor.Slice: f32[2,3] from [-1 0] to [2 3]: axis 0: [-1, 2) is not a range within [0, 2)",
		func() { tensor.Slice(x, []int{-1, 0}, []int{2, 3}) })
	require.PanicsWithValue(t, "tensor.Slice: f32[2,3] from [0 2] to [2 1]: axis 1: [2, 1) is not a range within [0, 3)",
		func() { tensor.Slice(x, []int{0, 2}, []int{2, 1}) })
	require.PanicsWithValue(t, "tensor.SliceAxis: f32[2,3] axis 1 from 1 to 5: [1, 5) is not a range within [0, 3)",
		func() { tensor.SliceAxis(x, 1, 1, 5) })
	require.PanicsWithValue(t, "tensor.SliceAxis: f32[2,3] axis 0 from -3 to 1: [-1, 1) is not a range within [0, 2)",
		func() { tensor.SliceAxis(x, 0, -3, 1) })
	require.PanicsWithValue(t, "tensor.SliceAxis: f32[2,3] axis 2 from 0 to 1: axis out of range for rank 2",
		func() { tensor.SliceAxis(x, 2, 0, 1) })
}

// ---------------------------------------------------------------------------
// DynamicSlice

func TestDynamicSliceClamps(t *testing.T) {
	x := tensor.FromInts([]int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9})
	for _, tc := range []struct {
		start, size int
		want        []float64
	}{
		{2, 3, []float64{2, 3, 4}},
		{8, 3, []float64{7, 8, 9}},  // clamped to 10-3
		{100, 2, []float64{8, 9}},   // clamped
		{-1, 3, []float64{7, 8, 9}}, // -1 wraps to 9, then clamps to 7
		{-4, 2, []float64{6, 7}},    // wraps to 6
		{-30, 2, []float64{0, 1}},   // wraps to -20, clamps to 0
		{5, 0, []float64{}},         // empty
		{0, 10, x.Float64s()},       // whole
		{7, 10, x.Float64s()},       // whole, start clamped to 0
		{3, 1, []float64{3}},        // one
		{-10, 4, []float64{0, 1, 2, 3}},
	} {
		got := tensor.DynamicSlice(x, []int{tc.start}, []int{tc.size})
		requireTensor(t, got, tensor.Int32, []int{tc.size}, tc.want)
		got = tensor.DynamicSliceAxis(x, 0, tc.start, tc.size)
		requireTensor(t, got, tensor.Int32, []int{tc.size}, tc.want)
	}
}

func TestDynamicSliceMatchesNaiveLoop(t *testing.T) {
	clamp := func(s, size, n int) int {
		if s < 0 {
			s += n
		}
		return min(max(s, 0), n-size)
	}
	for _, tc := range []struct {
		name          string
		shape         []int
		starts, sizes []int
	}{
		{"rank 0", []int{}, []int{}, []int{}},
		{"inside", []int{4, 5, 6}, []int{1, 2, 3}, []int{2, 2, 2}},
		{"clamped high", []int{4, 5, 6}, []int{3, 9, 5}, []int{2, 5, 3}},
		{"negative", []int{4, 5, 6}, []int{-1, -5, -9}, []int{1, 3, 6}},
		{"zero-size", []int{0, 3}, []int{5, 1}, []int{0, 2}},
	} {
		for _, dt := range allDTypes {
			t.Run(fmt.Sprintf("%s/%v", tc.name, dt), func(t *testing.T) {
				x := sample(dt, 3, tc.shape...)
				starts, limits := make([]int, len(tc.shape)), make([]int, len(tc.shape))
				for i := range starts {
					starts[i] = clamp(tc.starts[i], tc.sizes[i], tc.shape[i])
					limits[i] = starts[i] + tc.sizes[i]
				}
				shape, want := sliceRef(x, starts, limits)
				requireTensor(t, tensor.DynamicSlice(x, tc.starts, tc.sizes), dt, shape, want)
			})
		}
	}
}

func TestDynamicSliceGrad(t *testing.T) {
	for _, tc := range []struct {
		name          string
		starts, sizes []int
	}{
		{"inside", []int{1, 1}, []int{2, 2}},
		{"clamped", []int{5, -1}, []int{2, 3}},
		{"negative start", []int{-2, -7}, []int{1, 2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := func(xs []*tensor.Tensor) *tensor.Tensor { return tensor.DynamicSlice(xs[0], tc.starts, tc.sizes) }
			checkGradOf(t, f, sample(tensor.Float32, 4, 3, 4))
		})
	}
	f := func(xs []*tensor.Tensor) *tensor.Tensor { return tensor.DynamicSliceAxis(xs[0], 1, 9, 2) }
	checkGradOf(t, f, sample(tensor.Float32, 4, 3, 4))
}

func TestDynamicSlicePanics(t *testing.T) {
	x := sample(tensor.Float32, 1, 4, 4)
	require.PanicsWithValue(t, "tensor.DynamicSlice: f32[4,4] at [0 0] size [5 1]: axis 0: size 5 is not within [0, 4]",
		func() { tensor.DynamicSlice(x, []int{0, 0}, []int{5, 1}) })
	require.PanicsWithValue(t, "tensor.DynamicSlice: f32[4,4] at [0 0] size [1 -1]: axis 1: size -1 is not within [0, 4]",
		func() { tensor.DynamicSlice(x, []int{0, 0}, []int{1, -1}) })
	require.PanicsWithValue(t, "tensor.DynamicSlice: f32[4,4] at [0] size [1 1]: want 2 starts and 2 sizes",
		func() { tensor.DynamicSlice(x, []int{0}, []int{1, 1}) })
	require.PanicsWithValue(t, "tensor.DynamicSliceAxis: f32[4,4] axis 1 at 0 size 6: size 6 is not within [0, 4]",
		func() { tensor.DynamicSliceAxis(x, 1, 0, 6) })
	require.PanicsWithValue(t, "tensor.DynamicSliceAxis: f32[4,4] axis -3 at 0 size 1: axis out of range for rank 2",
		func() { tensor.DynamicSliceAxis(x, -3, 0, 1) })
}

// ---------------------------------------------------------------------------
// DynamicUpdateSlice

func TestDynamicUpdateSliceHandWorked(t *testing.T) {
	x := tensor.FromInts([]int{
		1, 2, 3, 4,
		5, 6, 7, 8,
		9, 10, 11, 12,
	}, 3, 4)
	u := tensor.FromInts([]int{13, 14}, 1, 2)
	requireTensor(t, tensor.DynamicUpdateSlice(x, u, []int{1, 0}), tensor.Int32, []int{3, 4},
		[]float64{1, 2, 3, 4, 13, 14, 7, 8, 9, 10, 11, 12})
	// Clamped: column 3 would not fit a width-2 update, so it lands at 2.
	requireTensor(t, tensor.DynamicUpdateSlice(x, u, []int{5, 3}), tensor.Int32, []int{3, 4},
		[]float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 13, 14})
	// Negative starts count from the end.
	requireTensor(t, tensor.DynamicUpdateSlice(x, u, []int{-3, -3}), tensor.Int32, []int{3, 4},
		[]float64{1, 13, 14, 4, 5, 6, 7, 8, 9, 10, 11, 12})
	assert.Equal(t, []int32{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, x.Int32s(), "x must not change")
}

func TestDynamicUpdateSliceMatchesNaiveLoop(t *testing.T) {
	clamp := func(s, size, n int) int {
		if s < 0 {
			s += n
		}
		return min(max(s, 0), n-size)
	}
	for _, tc := range []struct {
		name          string
		shape, ushape []int
		starts        []int
	}{
		{"rank 0", []int{}, []int{}, []int{}},
		{"vector", []int{6}, []int{2}, []int{3}},
		{"box", []int{3, 4, 5}, []int{2, 2, 3}, []int{1, -2, 9}},
		{"full rows", []int{4, 3, 2}, []int{2, 3, 2}, []int{1, 0, 0}},
		{"whole", []int{2, 3}, []int{2, 3}, []int{1, 1}},
		{"empty update", []int{2, 3}, []int{0, 3}, []int{1, 0}},
		{"zero-size x", []int{0, 3}, []int{0, 2}, []int{0, 1}},
	} {
		for _, dt := range allDTypes {
			t.Run(fmt.Sprintf("%s/%v", tc.name, dt), func(t *testing.T) {
				x, u := sample(dt, 5, tc.shape...), sample(dt, 6, tc.ushape...)
				s := make([]int, len(tc.shape))
				for i := range s {
					s[i] = clamp(tc.starts[i], tc.ushape[i], tc.shape[i])
				}
				want := build(tc.shape, func(idx []int) float64 {
					in := make([]int, len(idx))
					for i, v := range idx {
						in[i] = v - s[i]
						if in[i] < 0 || in[i] >= tc.ushape[i] {
							return x.At(idx...)
						}
					}
					return u.At(in...)
				})
				requireTensor(t, tensor.DynamicUpdateSlice(x, u, tc.starts), dt, tc.shape, want)
			})
		}
	}
}

func TestDynamicUpdateSliceGrad(t *testing.T) {
	for _, starts := range [][]int{{1, 1}, {2, 7}, {-1, -2}} {
		t.Run(fmt.Sprint(starts), func(t *testing.T) {
			f := func(xs []*tensor.Tensor) *tensor.Tensor { return tensor.DynamicUpdateSlice(xs[0], xs[1], starts) }
			checkGradOf(t, f, sample(tensor.Float32, 7, 3, 4), sample(tensor.Float32, 8, 2, 2))
		})
	}
	t.Run("second order", func(t *testing.T) {
		// x's top-left 2×2 box written over its bottom-right one: both
		// operands of the update depend on x.
		g := gradOfSquares(func(x *tensor.Tensor) *tensor.Tensor {
			return tensor.DynamicUpdateSlice(x, tensor.Slice(x, []int{0, 0}, []int{2, 2}), []int{1, 1})
		})
		checkGradOf(t, g, sample(tensor.Float32, 7, 3, 3))
	})
}

func TestDynamicUpdateSlicePanics(t *testing.T) {
	x := sample(tensor.Float32, 1, 4, 4)
	require.PanicsWithValue(t, "tensor.DynamicUpdateSlice: f32[4,4], f32[5,1] at [0 0]: axis 0: update dim 5 > dim 4",
		func() { tensor.DynamicUpdateSlice(x, sample(tensor.Float32, 1, 5, 1), []int{0, 0}) })
	require.PanicsWithValue(t, "tensor.DynamicUpdateSlice: f32[4,4], i32[1,1] at [0 0]: dtypes differ",
		func() { tensor.DynamicUpdateSlice(x, sample(tensor.Int32, 1, 1, 1), []int{0, 0}) })
	require.PanicsWithValue(t, "tensor.DynamicUpdateSlice: f32[4,4], f32[2] at [0 0]: update must have rank 2",
		func() { tensor.DynamicUpdateSlice(x, sample(tensor.Float32, 1, 2), []int{0, 0}) })
	require.PanicsWithValue(t, "tensor.DynamicUpdateSlice: f32[4,4], f32[2,2] at [0]: want 2 starts",
		func() { tensor.DynamicUpdateSlice(x, sample(tensor.Float32, 1, 2, 2), []int{0}) })
}

// ---------------------------------------------------------------------------
// Flip

func TestFlipHandWorked(t *testing.T) {
	x := tensor.FromInts([]int{1, 2, 3, 4, 5, 6}, 2, 3)
	requireTensor(t, tensor.Flip(x, 1), tensor.Int32, []int{2, 3}, []float64{3, 2, 1, 6, 5, 4})
	requireTensor(t, tensor.Flip(x, 0), tensor.Int32, []int{2, 3}, []float64{4, 5, 6, 1, 2, 3})
	requireTensor(t, tensor.Flip(x), tensor.Int32, []int{2, 3}, []float64{6, 5, 4, 3, 2, 1})
	requireTensor(t, tensor.Flip(x, -1, 0), tensor.Int32, []int{2, 3}, []float64{6, 5, 4, 3, 2, 1})
}

var flipCases = []struct {
	name  string
	shape []int
	axes  []int
}{
	{"rank 0", []int{}, nil},
	{"vector", []int{5}, []int{0}},
	{"all of rank 3", []int{2, 3, 4}, nil},
	{"middle", []int{2, 3, 4}, []int{1}},
	{"first and last", []int{2, 3, 4}, []int{0, -1}},
	{"first of rank 4", []int{3, 2, 2, 2}, []int{0}},
	{"size-1 axis", []int{1, 4}, []int{0}},
	{"zero-size", []int{0, 4}, []int{1}},
}

func TestFlipMatchesNaiveLoop(t *testing.T) {
	for _, tc := range flipCases {
		for _, dt := range allDTypes {
			t.Run(fmt.Sprintf("%s/%v", tc.name, dt), func(t *testing.T) {
				x := sample(dt, 9, tc.shape...)
				flipped := make([]bool, len(tc.shape))
				if len(tc.axes) == 0 {
					for i := range flipped {
						flipped[i] = true
					}
				}
				for _, a := range tc.axes {
					flipped[(a+len(tc.shape))%len(tc.shape)] = true
				}
				want := build(tc.shape, func(idx []int) float64 {
					src := make([]int, len(idx))
					for i, v := range idx {
						src[i] = v
						if flipped[i] {
							src[i] = tc.shape[i] - 1 - v
						}
					}
					return x.At(src...)
				})
				requireTensor(t, tensor.Flip(x, tc.axes...), dt, tc.shape, want)
			})
		}
	}
}

func TestFlipGrad(t *testing.T) {
	for _, tc := range flipCases {
		t.Run(tc.name, func(t *testing.T) {
			f := func(xs []*tensor.Tensor) *tensor.Tensor { return tensor.Flip(xs[0], tc.axes...) }
			checkGradOf(t, f, sample(tensor.Float32, 10, tc.shape...))
		})
	}
}

func TestFlipPanics(t *testing.T) {
	x := sample(tensor.Float32, 1, 2, 3)
	require.PanicsWithValue(t, "tensor.Flip: axis 2 out of range for f32[2,3]", func() { tensor.Flip(x, 2) })
	require.PanicsWithValue(t, "tensor.Flip: axis 1 repeated in [1 -1] for f32[2,3]", func() { tensor.Flip(x, 1, -1) })
}

// ---------------------------------------------------------------------------
// Roll

func TestRollHandWorked(t *testing.T) {
	x := tensor.FromInts([]int{0, 1, 2, 3, 4})
	requireTensor(t, tensor.Roll(x, 2, 0), tensor.Int32, []int{5}, []float64{3, 4, 0, 1, 2})
	requireTensor(t, tensor.Roll(x, -1, 0), tensor.Int32, []int{5}, []float64{1, 2, 3, 4, 0})
	requireTensor(t, tensor.Roll(x, 12, -1), tensor.Int32, []int{5}, []float64{3, 4, 0, 1, 2})
	requireTensor(t, tensor.Roll(x, -5, 0), tensor.Int32, []int{5}, []float64{0, 1, 2, 3, 4})
}

var rollCases = []struct {
	name        string
	shape       []int
	shift, axis int
}{
	{"vector", []int{7}, 3, 0},
	{"rows", []int{4, 3}, 1, 0},
	{"columns negative", []int{3, 4}, -1, 1},
	{"middle large shift", []int{2, 5, 3}, 13, 1},
	{"last axis of rank 4", []int{2, 2, 2, 3}, 2, -1},
	{"zero shift", []int{2, 3}, 0, 1},
	{"full turn", []int{2, 3}, 6, 1},
	{"zero-size axis", []int{0, 3}, 4, 0},
	{"zero-size other axis", []int{0, 3}, 1, 1},
}

func TestRollMatchesNaiveLoop(t *testing.T) {
	for _, tc := range rollCases {
		for _, dt := range allDTypes {
			t.Run(fmt.Sprintf("%s/%v", tc.name, dt), func(t *testing.T) {
				x := sample(dt, 11, tc.shape...)
				a := (tc.axis + len(tc.shape)) % len(tc.shape)
				n := tc.shape[a]
				want := build(tc.shape, func(idx []int) float64 {
					src := append([]int{}, idx...)
					src[a] = ((idx[a]-tc.shift)%n + n) % n
					return x.At(src...)
				})
				requireTensor(t, tensor.Roll(x, tc.shift, tc.axis), dt, tc.shape, want)
			})
		}
	}
}

func TestRollGrad(t *testing.T) {
	for _, tc := range rollCases {
		t.Run(tc.name, func(t *testing.T) {
			f := func(xs []*tensor.Tensor) *tensor.Tensor { return tensor.Roll(xs[0], tc.shift, tc.axis) }
			checkGradOf(t, f, sample(tensor.Float32, 12, tc.shape...))
		})
	}
}

func TestRollPanics(t *testing.T) {
	require.PanicsWithValue(t, "tensor.Roll: axis 1 out of range for f32[3]",
		func() { tensor.Roll(sample(tensor.Float32, 1, 3), 1, 1) })
	require.PanicsWithValue(t, "tensor.Roll: axis 0 out of range for f32[]",
		func() { tensor.Roll(tensor.Scalar(1), 1, 0) })
}
