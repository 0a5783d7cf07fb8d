package tensor_test

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/autodiff"
	"github.com/gonox/gonox/tensor"
)

// Helpers shared by the tests of the indexing ops (index, slice, pad,
// concat and scatter test files).

var allDTypes = []tensor.DType{tensor.Float32, tensor.Int32, tensor.Bool}

// sample returns a deterministic pseudo-random tensor of dtype dt and the
// given shape (rank 0 included).
func sample(dt tensor.DType, seed uint64, shape ...int) *tensor.Tensor {
	n := numel(shape)
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	var t *tensor.Tensor
	switch dt {
	case tensor.Float32:
		d := make([]float32, n)
		for i := range d {
			d[i] = float32(rng.NormFloat64())
		}
		t = tensor.FromFloat32(d)
	case tensor.Int32:
		d := make([]int32, n)
		for i := range d {
			d[i] = int32(rng.IntN(2000) - 1000)
		}
		t = tensor.FromInt32(d)
	case tensor.Bool:
		d := make([]bool, n)
		for i := range d {
			d[i] = rng.IntN(2) == 1
		}
		t = tensor.FromBool(d)
	}
	return tensor.Reshape(t, shape...)
}

// ints returns an int32 tensor of the given shape (rank 0 if shape is empty
// and there is one value).
func ints(vals []int, shape ...int) *tensor.Tensor {
	return tensor.Reshape(tensor.FromInts(vals), shape...)
}

// forEach calls fn with every multi-index of shape in row-major order.
func forEach(shape []int, fn func(idx []int)) {
	n := numel(shape)
	idx := make([]int, len(shape))
	for k := 0; k < n; k++ {
		r := k
		for d := len(shape) - 1; d >= 0; d-- {
			idx[d] = r % shape[d]
			r /= shape[d]
		}
		fn(idx)
	}
}

// build returns the row-major values fn gives at each index of shape.
func build(shape []int, fn func(idx []int) float64) []float64 {
	out := make([]float64, 0, numel(shape))
	forEach(shape, func(idx []int) { out = append(out, fn(idx)) })
	return out
}

func wrap(i, n int) int {
	if i < 0 {
		return i + n
	}
	return i
}

// requireTensor checks dtype, shape and values of got.
func requireTensor(t *testing.T, got *tensor.Tensor, dt tensor.DType, shape []int, want []float64) {
	t.Helper()
	require.Equal(t, dt, got.DType(), "dtype of %v", got)
	require.Equal(t, fmt.Sprint(shape), fmt.Sprint(got.Shape()), "shape of %v", got) // nil == []int{}
	require.Equal(t, want, got.Float64s(), "values of %v", got)
}

// checkGradOf checks the VJPs of f at xs with finite differences.
func checkGradOf(t *testing.T, f func(xs []*tensor.Tensor) *tensor.Tensor, xs ...*tensor.Tensor) {
	t.Helper()
	require.NoError(t, autodiff.CheckGrad(f, xs, autodiff.CheckOptions{}))
}

// gradOfSquares returns x ↦ ∇ₓ Σ f(x)², computed with an inner trace. Its
// own gradient (checked by CheckGrad with the outer trace) runs the VJPs of
// the ops f's VJP is made of: second-order differentiation.
func gradOfSquares(f func(x *tensor.Tensor) *tensor.Tensor) func(xs []*tensor.Tensor) *tensor.Tensor {
	return func(xs []*tensor.Tensor) *tensor.Tensor {
		tr := tensor.NewTrace()
		x := tr.Leaf(xs[0])
		loss := tensor.Sum(tensor.Square(f(x)))
		return tensor.Backward(tr, []*tensor.Tensor{loss}, []*tensor.Tensor{tensor.Scalar(1)}, []*tensor.Tensor{x}, false)[0]
	}
}

// ---------------------------------------------------------------------------
// Take

func TestTakeHandWorked(t *testing.T) {
	x := tensor.FromFloat32([]float32{1, 2, 3, 4, 5, 6}, 3, 2)
	got := tensor.Take(x, ints([]int{2, 0, -1}, 3), 0)
	requireTensor(t, got, tensor.Float32, []int{3, 2}, []float64{5, 6, 1, 2, 5, 6})

	got = tensor.Take(x, ints([]int{1, 1, 0, -2}, 2, 2), 1)
	requireTensor(t, got, tensor.Float32, []int{3, 2, 2}, []float64{2, 2, 1, 1, 4, 4, 3, 3, 6, 6, 5, 5})

	got = tensor.Take(x, ints([]int{-1}), 0) // scalar index drops the axis
	requireTensor(t, got, tensor.Float32, []int{2}, []float64{5, 6})
}

// takeRef is jnp.take written as a naive loop.
func takeRef(x, indices *tensor.Tensor, axis int) ([]int, []float64) {
	xs, is := x.Shape(), indices.Shape()
	if axis < 0 {
		axis += len(xs)
	}
	shape := append(append(append([]int{}, xs[:axis]...), is...), xs[axis+1:]...)
	ri := len(is)
	want := build(shape, func(idx []int) float64 {
		src := append([]int{}, idx[:axis]...)
		src = append(src, wrap(int(indices.At(idx[axis:axis+ri]...)), xs[axis]))
		src = append(src, idx[axis+ri:]...)
		return x.At(src...)
	})
	return shape, want
}

var takeCases = []struct {
	name    string
	xShape  []int
	idx     []int
	idxShp  []int
	axis    int
	wantShp []int
}{
	{"rows", []int{5, 3}, []int{0, 4, -1, 2}, []int{2, 2}, 0, []int{2, 2, 3}},
	{"middle axis with duplicates", []int{2, 3, 4}, []int{2, -3, 2}, []int{3}, 1, []int{2, 3, 4}},
	{"last axis scalar index", []int{2, 3, 4}, []int{3}, []int{}, -1, []int{2, 3}},
	{"vector", []int{6}, []int{5, 0, -6, 3, 3, 1}, []int{2, 3}, 0, []int{2, 3}},
	{"rank 4", []int{2, 3, 2, 2}, []int{1, 0}, []int{2, 1}, 2, []int{2, 3, 2, 1, 2}},
	{"zero-size inner", []int{3, 0, 2}, []int{1, 2}, []int{2}, 0, []int{2, 0, 2}},
	{"zero-size x along other axis", []int{0, 3}, []int{0, 2}, []int{2}, 1, []int{0, 2}},
	{"no indices", []int{4, 2}, []int{}, []int{0}, 0, []int{0, 2}},
	{"empty axis, no indices", []int{0, 2}, []int{}, []int{0}, 0, []int{0, 2}},
}

func TestTakeMatchesNaiveLoop(t *testing.T) {
	for _, tc := range takeCases {
		for _, dt := range allDTypes {
			t.Run(fmt.Sprintf("%s/%v", tc.name, dt), func(t *testing.T) {
				x := sample(dt, 1, tc.xShape...)
				idx := ints(tc.idx, tc.idxShp...)
				before := x.Float64s()
				got := tensor.Take(x, idx, tc.axis)
				shape, want := takeRef(x, idx, tc.axis)
				require.Equal(t, tc.wantShp, shape)
				requireTensor(t, got, dt, shape, want)
				require.Equal(t, before, x.Float64s(), "input changed")
			})
		}
	}
}

func TestTakeGrad(t *testing.T) {
	for _, tc := range takeCases {
		t.Run(tc.name, func(t *testing.T) {
			idx := ints(tc.idx, tc.idxShp...)
			f := func(xs []*tensor.Tensor) *tensor.Tensor { return tensor.Take(xs[0], idx, tc.axis) }
			checkGradOf(t, f, sample(tensor.Float32, 2, tc.xShape...))
		})
	}
}

func TestTakeGradAccumulatesDuplicates(t *testing.T) {
	// d/dx Σ take(x, [1, 1, -3, 0]) = counts of each index: [2, 2, 0].
	x := tensor.FromFloat32([]float32{10, 20, 30})
	tr := tensor.NewTrace()
	xt := tr.Leaf(x)
	y := tensor.Sum(tensor.Take(xt, ints([]int{1, 1, -3, 0}, 4), 0))
	g := tensor.Backward(tr, []*tensor.Tensor{y}, []*tensor.Tensor{tensor.Scalar(1)}, []*tensor.Tensor{xt}, false)[0]
	assert.Equal(t, []float32{2, 2, 0}, g.Float32s())
}

func TestTakeSecondOrder(t *testing.T) {
	idx := ints([]int{2, 0, 2, -1}, 2, 2)
	f := gradOfSquares(func(x *tensor.Tensor) *tensor.Tensor { return tensor.Take(x, idx, 1) })
	checkGradOf(t, f, sample(tensor.Float32, 3, 2, 3))
}

func TestTakePanics(t *testing.T) {
	x := sample(tensor.Float32, 1, 5, 3)
	require.PanicsWithValue(t, "tensor.Take: f32[5,3], f32[2] along axis 0: indices must be int32 or int64, got float32",
		func() { tensor.Take(x, tensor.FromFloat32([]float32{0, 1}), 0) })
	require.PanicsWithValue(t, "tensor.Take: f32[5,3], i32[2] along axis 2: axis out of range for rank 2",
		func() { tensor.Take(x, ints([]int{0, 1}, 2), 2) })
	require.PanicsWithValue(t, "tensor.Take: f32[5,3], i32[2] along axis -3: axis out of range for rank 2",
		func() { tensor.Take(x, ints([]int{0, 1}, 2), -3) })
	require.PanicsWithValue(t, "tensor.Take: f32[5,3], i32[2,2] along axis 0: index 7 at position [1 0] out of range [-5, 5)",
		func() { tensor.Take(x, ints([]int{0, 1, 7, 2}, 2, 2), 0) })
	require.PanicsWithValue(t, "tensor.Take: f32[5,3], i32[3] along axis 1: index -4 at position [2] out of range [-3, 3)",
		func() { tensor.Take(x, ints([]int{0, -3, -4}, 3), 1) })
	require.PanicsWithValue(t, "tensor.Take: f32[0,3], i32[] along axis 0: index 0 at position [] out of range [0, 0)",
		func() { tensor.Take(sample(tensor.Float32, 1, 0, 3), ints([]int{0}), 0) })
	require.PanicsWithValue(t, "tensor.Take: f32[], i32[1] along axis 0: axis out of range for rank 0",
		func() { tensor.Take(tensor.Scalar(1), ints([]int{0}, 1), 0) })
}

// ---------------------------------------------------------------------------
// TakeAlongAxis

func TestTakeAlongAxisHandWorked(t *testing.T) {
	// Pick the label logit of each row, as a cross-entropy does.
	logits := tensor.FromFloat32([]float32{
		0.1, 0.2, 0.7,
		0.5, 0.3, 0.2,
	}, 2, 3)
	got := tensor.TakeAlongAxis(logits, ints([]int{2, -3}, 2, 1), 1)
	requireTensor(t, got, tensor.Float32, []int{2, 1}, []float64{float64(float32(0.7)), 0.5})

	// Axis 0, with more indices than rows.
	x := tensor.FromInts([]int{1, 2, 3, 4}, 2, 2)
	got = tensor.TakeAlongAxis(x, ints([]int{1, 0, 0, 0, 1, 1}, 3, 2), 0)
	requireTensor(t, got, tensor.Int32, []int{3, 2}, []float64{3, 2, 1, 2, 3, 4})
}

// takeAlongRef is jnp.take_along_axis written as a naive loop.
func takeAlongRef(x, indices *tensor.Tensor, axis int) ([]int, []float64) {
	xs, is := x.Shape(), indices.Shape()
	if axis < 0 {
		axis += len(xs)
	}
	shape := make([]int, len(xs))
	for d := range shape {
		switch {
		case d == axis:
			shape[d] = is[d]
		case xs[d] == 1:
			shape[d] = is[d]
		default:
			shape[d] = xs[d]
		}
	}
	want := build(shape, func(idx []int) float64 {
		ii := make([]int, len(idx))
		xi := make([]int, len(idx))
		for d, v := range idx {
			if is[d] != 1 {
				ii[d] = v
			}
			if xs[d] != 1 {
				xi[d] = v
			}
		}
		xi[axis] = wrap(int(indices.At(ii...)), xs[axis])
		return x.At(xi...)
	})
	return shape, want
}

var takeAlongCases = []struct {
	name    string
	xShape  []int
	idx     []int
	idxShp  []int
	axis    int
	wantShp []int
}{
	{"same shape", []int{3, 4}, []int{3, 0, 1, 1, 2, 2, 0, -1, -4, 3, 1, 0}, []int{3, 4}, 1, []int{3, 4}},
	{"one per row", []int{3, 4}, []int{3, -1, 0}, []int{3, 1}, 1, []int{3, 1}},
	{"x broadcast", []int{1, 4}, []int{0, 1, 2, 3, 3, 3}, []int{3, 2}, 1, []int{3, 2}},
	{"indices broadcast", []int{3, 4}, []int{1, -1}, []int{1, 2}, 1, []int{3, 2}},
	{"axis 0", []int{4, 3}, []int{0, 1, 2, 3, -1, 1}, []int{2, 3}, 0, []int{2, 3}},
	{"rank 3 more indices than n", []int{2, 3, 4}, []int{0, 1, 2, 2, 1, 0, 0, 0, 1, 1}, []int{2, 5, 1}, -2, []int{2, 5, 4}},
	{"vector", []int{5}, []int{4, 0, -2}, []int{3}, 0, []int{3}},
	{"zero rows", []int{0, 4}, []int{}, []int{0, 2}, 1, []int{0, 2}},
	{"zero picks", []int{3, 4}, []int{}, []int{3, 0}, 1, []int{3, 0}},
}

func TestTakeAlongAxisMatchesNaiveLoop(t *testing.T) {
	for _, tc := range takeAlongCases {
		for _, dt := range allDTypes {
			t.Run(fmt.Sprintf("%s/%v", tc.name, dt), func(t *testing.T) {
				x := sample(dt, 4, tc.xShape...)
				idx := ints(tc.idx, tc.idxShp...)
				got := tensor.TakeAlongAxis(x, idx, tc.axis)
				shape, want := takeAlongRef(x, idx, tc.axis)
				require.Equal(t, tc.wantShp, shape)
				requireTensor(t, got, dt, shape, want)
			})
		}
	}
}

func TestTakeAlongAxisGrad(t *testing.T) {
	for _, tc := range takeAlongCases {
		t.Run(tc.name, func(t *testing.T) {
			idx := ints(tc.idx, tc.idxShp...)
			f := func(xs []*tensor.Tensor) *tensor.Tensor { return tensor.TakeAlongAxis(xs[0], idx, tc.axis) }
			checkGradOf(t, f, sample(tensor.Float32, 5, tc.xShape...))
		})
	}
}

func TestTakeAlongAxisSecondOrder(t *testing.T) {
	idx := ints([]int{0, 1, 2, 3, 3, 3}, 3, 2)
	f := gradOfSquares(func(x *tensor.Tensor) *tensor.Tensor { return tensor.TakeAlongAxis(x, idx, 1) })
	checkGradOf(t, f, sample(tensor.Float32, 6, 1, 4))
}

func TestTakeAlongAxisPanics(t *testing.T) {
	x := sample(tensor.Float32, 1, 3, 4)
	require.PanicsWithValue(t, "tensor.TakeAlongAxis: f32[3,4], i32[3] along axis 1: indices must have the rank of x (2), got 1",
		func() { tensor.TakeAlongAxis(x, ints([]int{0, 1, 2}, 3), 1) })
	require.PanicsWithValue(t, "tensor.TakeAlongAxis: f32[3,4], i32[3,1] along axis 2: axis out of range for rank 2",
		func() { tensor.TakeAlongAxis(x, ints([]int{0, 1, 2}, 3, 1), 2) })
	require.PanicsWithValue(t, "tensor.TakeAlongAxis: f32[3,4], i32[2,1] along axis 1: dims 3 and 2 at axis 0 do not broadcast",
		func() { tensor.TakeAlongAxis(x, ints([]int{0, 1}, 2, 1), 1) })
	require.PanicsWithValue(t, "tensor.TakeAlongAxis: f32[3,4], f32[3,1] along axis 1: indices must be int32 or int64, got float32",
		func() { tensor.TakeAlongAxis(x, sample(tensor.Float32, 1, 3, 1), 1) })
	require.PanicsWithValue(t, "tensor.TakeAlongAxis: f32[3,4], i32[3,1] along axis 1: index 4 at position [2 0] out of range [-4, 4)",
		func() { tensor.TakeAlongAxis(x, ints([]int{0, 1, 4}, 3, 1), 1) })
}

// ---------------------------------------------------------------------------
// OneHot

func TestOneHot(t *testing.T) {
	got := tensor.OneHot(ints([]int{0, 3, -1, 2, 4, 1}, 2, 3), 4)
	requireTensor(t, got, tensor.Float32, []int{2, 3, 4}, []float64{
		1, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, // 0, 3, -1 (dropped, not wrapped)
		0, 0, 1, 0, 0, 0, 0, 0, 0, 1, 0, 0, // 2, 4 (out of range), 1
	})
	requireTensor(t, tensor.OneHot(ints([]int{2}), 3), tensor.Float32, []int{3}, []float64{0, 0, 1})
	requireTensor(t, tensor.OneHot(ints([]int{0, 1}, 2), 0), tensor.Float32, []int{2, 0}, []float64{})
	requireTensor(t, tensor.OneHot(ints([]int{}, 0, 5), 2), tensor.Float32, []int{0, 5, 2}, []float64{})

	// Matches Equal against an iota, the way JAX computes it.
	idx := ints([]int{5, 0, 2, 7, -3, 1, 1, 6}, 8, 1)
	want := tensor.AsType(tensor.Equal(idx, tensor.Reshape(tensor.Arange(7), 1, 7)), tensor.Float32)
	assert.Equal(t, want.Float32s(), tensor.OneHot(tensor.Reshape(idx, 8), 7).Float32s())
}

func TestOneHotPanics(t *testing.T) {
	require.PanicsWithValue(t, "tensor.OneHot: f32[2] into 3 classes: indices must be int32",
		func() { tensor.OneHot(tensor.FromFloat32([]float32{0, 1}), 3) })
	require.PanicsWithValue(t, "tensor.OneHot: i32[2] into -1 classes: negative class count",
		func() { tensor.OneHot(ints([]int{0, 1}, 2), -1) })
}
