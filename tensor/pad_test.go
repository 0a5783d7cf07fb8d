package tensor_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/tensor"
)

func TestPadHandWorked(t *testing.T) {
	x := tensor.FromInts([]int{1, 2, 3, 4}, 2, 2)
	requireTensor(t, tensor.Pad(x, [][2]int{{1, 0}, {0, 2}}, 9), tensor.Int32, []int{3, 4}, []float64{
		9, 9, 9, 9,
		1, 2, 9, 9,
		3, 4, 9, 9,
	})
	requireTensor(t, tensor.Pad(tensor.FromBool([]bool{false}), [][2]int{{1, 1}}, 1), tensor.Bool, []int{3},
		[]float64{1, 0, 1})
	requireTensor(t, tensor.Pad(tensor.FromFloat32([]float32{5}), [][2]int{{2, 0}}, -0.5), tensor.Float32, []int{3},
		[]float64{-0.5, -0.5, 5})
}

var padCases = []struct {
	name  string
	shape []int
	pads  [][2]int
	value float64
}{
	{"rank 0", []int{}, [][2]int{}, 3},
	{"vector", []int{4}, [][2]int{{2, 3}}, 0},
	{"none", []int{2, 3}, [][2]int{{0, 0}, {0, 0}}, 1},
	{"rows only", []int{2, 3}, [][2]int{{1, 2}, {0, 0}}, 1},
	{"columns only", []int{2, 3}, [][2]int{{0, 0}, {2, 1}}, 0},
	{"rank 3", []int{2, 3, 2}, [][2]int{{1, 0}, {0, 2}, {1, 1}}, -2},
	{"zero-size input", []int{0, 2}, [][2]int{{1, 1}, {0, 1}}, 1},
	{"zero-size output axis", []int{2, 0}, [][2]int{{1, 0}, {0, 0}}, 4},
}

func TestPadMatchesNaiveLoop(t *testing.T) {
	for _, tc := range padCases {
		for _, dt := range allDTypes {
			t.Run(fmt.Sprintf("%s/%v", tc.name, dt), func(t *testing.T) {
				x := sample(dt, 1, tc.shape...)
				shape := make([]int, len(tc.shape))
				for i, d := range tc.shape {
					shape[i] = tc.pads[i][0] + d + tc.pads[i][1]
				}
				fill := tc.value
				if dt == tensor.Bool && fill != 0 {
					fill = 1
				}
				want := build(shape, func(idx []int) float64 {
					src := make([]int, len(idx))
					for i, v := range idx {
						src[i] = v - tc.pads[i][0]
						if src[i] < 0 || src[i] >= tc.shape[i] {
							return fill
						}
					}
					return x.At(src...)
				})
				requireTensor(t, tensor.Pad(x, tc.pads, tc.value), dt, shape, want)
			})
		}
	}
}

func TestPadGrad(t *testing.T) {
	for _, tc := range padCases {
		t.Run(tc.name, func(t *testing.T) {
			f := func(xs []*tensor.Tensor) *tensor.Tensor { return tensor.Pad(xs[0], tc.pads, tc.value) }
			checkGradOf(t, f, sample(tensor.Float32, 2, tc.shape...))
		})
	}
	t.Run("second order", func(t *testing.T) {
		f := gradOfSquares(func(x *tensor.Tensor) *tensor.Tensor { return tensor.Pad(x, [][2]int{{1, 2}, {0, 1}}, 3) })
		checkGradOf(t, f, sample(tensor.Float32, 3, 2, 2))
	})
}

func TestPadPanics(t *testing.T) {
	x := sample(tensor.Float32, 1, 2, 3)
	require.PanicsWithValue(t, "tensor.Pad: f32[2,3] by [[1 1]] with 0: want 2 (lo, hi) pairs",
		func() { tensor.Pad(x, [][2]int{{1, 1}}, 0) })
	require.PanicsWithValue(t, "tensor.Pad: f32[2,3] by [[0 0] [-1 2]] with 0: axis 1: negative padding",
		func() { tensor.Pad(x, [][2]int{{0, 0}, {-1, 2}}, 0) })
	require.PanicsWithValue(t, "tensor.Pad: i32[2] by [[1 1]] with 0.5: value is not an int32",
		func() { tensor.Pad(ints([]int{1, 2}, 2), [][2]int{{1, 1}}, 0.5) })
	require.PanicsWithValue(t, "tensor.Pad: i32[2] by [[1 1]] with 3e+09: value is not an int32",
		func() { tensor.Pad(ints([]int{1, 2}, 2), [][2]int{{1, 1}}, 3e9) })
}
