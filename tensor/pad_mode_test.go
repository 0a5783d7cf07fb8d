package tensor_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/autodiff"
	"github.com/gonox/gonox/shard"
	"github.com/gonox/gonox/tensor"
)

// TestPadWithHandWorked: PyTorch's F.pad on [1 2 3] (printed by
// torch 1.13 for reflect, replicate and circular).
func TestPadWithHandWorked(t *testing.T) {
	x := tensor.FromFloat64s([]float64{1, 2, 3}, 3)
	for _, c := range []struct {
		mode tensor.PadMode
		pads [2]int
		want []float64
	}{
		{tensor.PadReflect, [2]int{2, 2}, []float64{3, 2, 1, 2, 3, 2, 1}},
		{tensor.PadReflect, [2]int{0, 1}, []float64{1, 2, 3, 2}},
		{tensor.PadReplicate, [2]int{2, 2}, []float64{1, 1, 1, 2, 3, 3, 3}},
		{tensor.PadReplicate, [2]int{4, 0}, []float64{1, 1, 1, 1, 1, 2, 3}},
		{tensor.PadCircular, [2]int{2, 2}, []float64{2, 3, 1, 2, 3, 1, 2}},
		{tensor.PadCircular, [2]int{3, 0}, []float64{1, 2, 3, 1, 2, 3}},
		{tensor.PadZeros, [2]int{1, 2}, []float64{0, 1, 2, 3, 0, 0}},
	} {
		got := tensor.PadWith(x, [][2]int{c.pads}, c.mode)
		requireTensor(t, got, tensor.Float64, []int{len(c.want)}, c.want)
	}
	// Two dimensions: reflect rows, then columns.
	m := tensor.FromInts([]int{1, 2, 3, 4, 5, 6}, 2, 3)
	requireTensor(t, tensor.PadWith(m, [][2]int{{1, 0}, {1, 1}}, tensor.PadReflect), tensor.Int32, []int{3, 5}, []float64{
		5, 4, 5, 6, 5,
		2, 1, 2, 3, 2,
		5, 4, 5, 6, 5,
	})
	require.Same(t, m, tensor.PadWith(m, [][2]int{{0, 0}, {0, 0}}, tensor.PadCircular), "no padding returns x")
	require.Equal(t, "reflect", tensor.PadReflect.String())
	require.Equal(t, "PadMode(9)", tensor.PadMode(9).String())
}

// padSources returns the positions of x's elements along an axis of n
// elements padded by lh in mode, built as NumPy describes the modes: the
// border pieces put beside the axis.
func padSources(mode tensor.PadMode, lh [2]int, n int) []int {
	var lo, mid, hi []int
	for i := range n {
		mid = append(mid, i)
	}
	for k := 1; k <= lh[0]; k++ { // k-th element before the edge
		switch mode {
		case tensor.PadReflect:
			lo = append([]int{k}, lo...)
		case tensor.PadReplicate:
			lo = append(lo, 0)
		case tensor.PadCircular:
			lo = append([]int{n - k}, lo...)
		}
	}
	for k := 1; k <= lh[1]; k++ {
		switch mode {
		case tensor.PadReflect:
			hi = append(hi, n-1-k)
		case tensor.PadReplicate:
			hi = append(hi, n-1)
		case tensor.PadCircular:
			hi = append(hi, k-1)
		}
	}
	return append(append(lo, mid...), hi...)
}

var padModeCases = []struct {
	name  string
	shape []int
	pads  [][2]int
}{
	{"vector", []int{4}, [][2]int{{3, 2}}},
	{"rows only", []int{3, 2}, [][2]int{{2, 1}, {0, 0}}},
	{"columns only", []int{2, 3}, [][2]int{{0, 0}, {2, 1}}},
	{"image", []int{2, 2, 4, 3}, [][2]int{{0, 0}, {0, 0}, {1, 3}, {2, 1}}},
	{"rank 3 all", []int{3, 2, 4}, [][2]int{{1, 2}, {1, 0}, {0, 3}}},
	{"zero-size batch", []int{0, 3}, [][2]int{{0, 0}, {1, 1}}},
}

// reflectFits reports whether reflect padding accepts pads on shape: each
// padded axis pads less than its size on both sides.
func reflectFits(shape []int, pads [][2]int) bool {
	for i, d := range shape {
		if pads[i][0]+pads[i][1] > 0 && max(pads[i][0], pads[i][1]) >= d {
			return false
		}
	}
	return true
}

func TestPadWithMatchesNaiveLoop(t *testing.T) {
	for _, mode := range []tensor.PadMode{tensor.PadReflect, tensor.PadReplicate, tensor.PadCircular} {
		for _, tc := range padModeCases {
			if mode == tensor.PadReflect && !reflectFits(tc.shape, tc.pads) {
				continue // reflect refuses it: TestPadWithPanics
			}
			for _, dt := range []tensor.DType{tensor.Float32, tensor.Float64, tensor.Int32, tensor.Bool} {
				t.Run(fmt.Sprintf("%v/%s/%v", mode, tc.name, dt), func(t *testing.T) {
					x := sample(tensor.Float32, 1, tc.shape...)
					if dt != tensor.Float32 {
						x = tensor.AsType(tensor.MulScalar(x, 3), dt)
					}
					shape := make([]int, len(tc.shape))
					srcs := make([][]int, len(tc.shape))
					for i, d := range tc.shape {
						shape[i] = tc.pads[i][0] + d + tc.pads[i][1]
						srcs[i] = padSources(mode, tc.pads[i], d)
					}
					want := build(shape, func(idx []int) float64 {
						src := make([]int, len(idx))
						for i, v := range idx {
							src[i] = srcs[i][v]
						}
						return x.At(src...)
					})
					got := tensor.PadWith(x, tc.pads, mode)
					if len(want) == 0 { // Float64s of an empty float64 tensor is nil
						require.Equal(t, shape, got.Shape())
						require.Empty(t, got.Float64s())
						return
					}
					requireTensor(t, got, dt, shape, want)
				})
			}
		}
	}
}

// TestPadWithGrad: the gradients (first and second order) against finite
// differences, and the first gradient by hand: each element of x gets the
// cotangents of the positions that copy it.
func TestPadWithGrad(t *testing.T) {
	for _, mode := range []tensor.PadMode{tensor.PadReflect, tensor.PadReplicate, tensor.PadCircular} {
		for _, tc := range padModeCases[:5] {
			t.Run(fmt.Sprintf("%v/%s", mode, tc.name), func(t *testing.T) {
				x := tensor.AsType(sample(tensor.Float32, 2, tc.shape...), tensor.Float64)
				f := func(xs []*tensor.Tensor) *tensor.Tensor { return tensor.PadWith(xs[0], tc.pads, mode) }
				checkGradOf(t, f, x)
				checkGradOf(t, gradOfSquares(func(x *tensor.Tensor) *tensor.Tensor { return tensor.PadWith(x, tc.pads, mode) }), sample(tensor.Float32, 2, tc.shape...))

				y := tensor.PadWith(x, tc.pads, mode)
				u := tensor.AsType(sample(tensor.Float32, 3, y.Shape()...), tensor.Float64)
				g := grad(func(xs []*tensor.Tensor) *tensor.Tensor { return tensor.Sum(tensor.Mul(f(xs), u)) }, ts(x))[0]
				srcs := make([][]int, len(tc.shape))
				for i, d := range tc.shape {
					srcs[i] = padSources(mode, tc.pads[i], d)
				}
				want := make([]float64, x.Size())
				forEach(y.Shape(), func(idx []int) {
					src := make([]int, len(idx))
					for i, v := range idx {
						src[i] = srcs[i][v]
					}
					want[ravel(src, tc.shape)] += u.At(idx...)
				})
				requireClose(t, want, g, 1e-15, 1e-14)
			})
		}
	}
	t.Run("float32", func(t *testing.T) {
		f := func(xs []*tensor.Tensor) *tensor.Tensor {
			return tensor.PadWith(xs[0], [][2]int{{1, 2}, {2, 0}}, tensor.PadReflect)
		}
		checkGradOf(t, f, sample(tensor.Float32, 4, 3, 3))
	})
}

// TestPadWithForwardMode: the JVP is the padding of the tangent.
func TestPadWithForwardMode(t *testing.T) {
	x := sample(tensor.Float32, 5, 3, 4)
	tan := sample(tensor.Float32, 6, 3, 4)
	pads := [][2]int{{2, 1}, {1, 3}}
	f := func(xs []*tensor.Tensor) []*tensor.Tensor {
		return []*tensor.Tensor{tensor.PadWith(xs[0], pads, tensor.PadCircular)}
	}
	_, tout := autodiff.JVP(f, ts(x), ts(tan))
	require.Equal(t, tensor.PadWith(tan, pads, tensor.PadCircular).Float32s(), tout[0].Float32s())
}

// TestPadWithHalf: bfloat16 data is moved bit for bit.
func TestPadWithHalf(t *testing.T) {
	x := tensor.Convert(sample(tensor.Float32, 7, 2, 5), tensor.BFloat16)
	pads := [][2]int{{1, 1}, {3, 2}}
	y := tensor.PadWith(x, pads, tensor.PadReflect)
	require.Equal(t, tensor.BFloat16, y.DType())
	want := tensor.Convert(tensor.PadWith(tensor.Convert(x, tensor.Float32), pads, tensor.PadReflect), tensor.BFloat16)
	require.Equal(t, want.Bits16(), y.Bits16())
}

// TestPadWithPlaced: padding the spatial dimensions of a batch split over
// devices keeps the split, with nothing gathered, and matches the host.
func TestPadWithPlaced(t *testing.T) {
	s := shard.NewSharding(shard.NewMesh([]int{4}, []string{"dp"}), shard.P("dp"))
	pads := [][2]int{{0, 0}, {1, 1}, {2, 3}}
	for _, mode := range []tensor.PadMode{tensor.PadReflect, tensor.PadReplicate, tensor.PadCircular} {
		requirePlacedAsHost(t, s, sample(tensor.Float32, 8, 8, 2, 5),
			func(x *tensor.Tensor) *tensor.Tensor { return tensor.PadWith(x, pads, mode) },
			"float32[8@dp,4,10]", "float32[8@dp,2,5]")
	}
}

func TestPadWithPanics(t *testing.T) {
	x := sample(tensor.Float32, 1, 2, 3)
	requirePanic(t, "tensor.PadWith: operand x is nil", func() { tensor.PadWith(nil, nil, tensor.PadReflect) })
	require.PanicsWithValue(t, "tensor.PadWith: f32[2,3] by [[1 1]] reflect: want 2 (lo, hi) pairs",
		func() { tensor.PadWith(x, [][2]int{{1, 1}}, tensor.PadReflect) })
	require.PanicsWithValue(t, "tensor.PadWith: f32[2,3] by [[0 0] [-1 2]] circular: axis 1: negative padding",
		func() { tensor.PadWith(x, [][2]int{{0, 0}, {-1, 2}}, tensor.PadCircular) })
	require.PanicsWithValue(t, "tensor.PadWith: f32[2,3] by [[0 0] [0 3]] reflect: axis 1: padding 3 not below the size 3",
		func() { tensor.PadWith(x, [][2]int{{0, 0}, {0, 3}}, tensor.PadReflect) })
	require.PanicsWithValue(t, "tensor.PadWith: f32[2,3] by [[3 0] [0 0]] circular: axis 0: padding 3 wraps around more than once (size 2)",
		func() { tensor.PadWith(x, [][2]int{{3, 0}, {0, 0}}, tensor.PadCircular) })
	require.PanicsWithValue(t, "tensor.PadWith: f32[0,3] by [[1 0] [0 0]] replicate: axis 0: nothing to replicate",
		func() {
			tensor.PadWith(tensor.Zeros(tensor.Float32, 0, 3), [][2]int{{1, 0}, {0, 0}}, tensor.PadReplicate)
		})
	require.PanicsWithValue(t, "tensor.PadWith: f32[2,3] by [[0 0] [1 1]] PadMode(7): unknown mode",
		func() { tensor.PadWith(x, [][2]int{{0, 0}, {1, 1}}, tensor.PadMode(7)) })
}

// The nil-operand calls of PadWith and Interpolate (TestNilOperands).
func init() {
	nilOps["PadWith"] = func(t []*tensor.Tensor) { tensor.PadWith(t[0], [][2]int{{1, 1}}, tensor.PadReflect) }
	nilOps["Interpolate"] = func(t []*tensor.Tensor) { tensor.Interpolate(t[0], tensor.InterpSpec{Size: []int{2}}) }
}
