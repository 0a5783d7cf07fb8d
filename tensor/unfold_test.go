package tensor_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/shard"
	"github.com/gonox/gonox/tensor"
)

// TestUnfoldHandWorked: 2×2 blocks of a 3×3 image, stride 1: four
// blocks, each a column.
func TestUnfoldHandWorked(t *testing.T) {
	x := tensor.FromFloat64s([]float64{1, 2, 3, 4, 5, 6, 7, 8, 9}, 1, 1, 3, 3)
	y := tensor.Unfold(x, tensor.UnfoldSpec{Kernel: []int{2}})
	requireTensor(t, y, tensor.Float64, []int{1, 4, 4}, []float64{
		1, 2, 4, 5, // kernel position (0, 0) of blocks 0..3
		2, 3, 5, 6,
		4, 5, 7, 8,
		5, 6, 8, 9,
	})
	// Folding the columns back counts each element once per block that
	// covers it: the centre four times.
	requireTensor(t, tensor.Fold(tensor.OnesLike(y), []int{3, 3}, tensor.UnfoldSpec{Kernel: []int{2}}), tensor.Float64,
		[]int{1, 1, 3, 3}, []float64{1, 2, 1, 2, 4, 2, 1, 2, 1})
}

var unfoldCases = []struct {
	shape []int
	spec  tensor.UnfoldSpec
}{
	{[]int{2, 3, 7}, tensor.UnfoldSpec{Kernel: []int{3}, Stride: []int{2}, Padding: []int{1}}},
	{[]int{2, 2, 5, 6}, tensor.UnfoldSpec{Kernel: []int{2, 3}, Dilation: []int{2, 1}, Padding: []int{1, 2}, Stride: []int{1, 2}}},
	{[]int{1, 2, 4, 3, 5}, tensor.UnfoldSpec{Kernel: []int{2}, Stride: []int{2, 1, 3}, Padding: []int{0, 1, 1}}},
	{[]int{0, 2, 4, 4}, tensor.UnfoldSpec{Kernel: []int{3}}},
}

// refUnfold computes Unfold by its definition, position by position.
func refUnfold(x *tensor.Tensor, kernel, dil, pad, stride []int) ([]float64, []int) {
	sh := x.Shape()
	nd := len(sh) - 2
	out := make([]int, nd)
	k := 1
	for d := range nd {
		out[d] = (sh[d+2]+2*pad[d]-dil[d]*(kernel[d]-1)-1)/stride[d] + 1
		k *= kernel[d]
	}
	shape := []int{sh[0], sh[1] * k, numel(out)}
	want := build(shape, func(idx []int) float64 {
		c, kf := idx[1]/k, idx[1]%k
		kidx, bidx := unravel(kf, kernel), unravel(idx[2], out)
		src := []int{idx[0], c}
		for d := range nd {
			p := bidx[d]*stride[d] - pad[d] + kidx[d]*dil[d]
			if p < 0 || p >= sh[d+2] {
				return 0
			}
			src = append(src, p)
		}
		return x.At(src...)
	})
	return want, shape
}

// full returns v for nd dimensions (one value repeated, nil as def).
func full(v []int, nd, def int) []int {
	out := make([]int, nd)
	for i := range out {
		switch len(v) {
		case 0:
			out[i] = def
		case 1:
			out[i] = v[0]
		default:
			out[i] = v[i]
		}
	}
	return out
}

// TestUnfoldFold: Unfold against the definition, Fold as its transpose
// (<Unfold x, y> = <x, Fold y>), the gradients by finite differences.
func TestUnfoldFold(t *testing.T) {
	for i, c := range unfoldCases {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			nd := len(c.shape) - 2
			x := tensor.AsType(sample(tensor.Float32, uint64(i), c.shape...), tensor.Float64)
			want, shape := refUnfold(x, full(c.spec.Kernel, nd, 1), full(c.spec.Dilation, nd, 1), full(c.spec.Padding, nd, 0), full(c.spec.Stride, nd, 1))
			y := tensor.Unfold(x, c.spec)
			require.Equal(t, shape, y.Shape())
			if len(want) == 0 {
				return
			}
			requireTensor(t, y, tensor.Float64, shape, want)
			u := tensor.AsType(sample(tensor.Float32, uint64(i)+10, shape...), tensor.Float64)
			fu := tensor.Fold(u, c.shape[2:], c.spec)
			require.Equal(t, c.shape, fu.Shape())
			require.InDelta(t, tensor.Sum(tensor.Mul(y, u)).Item(), tensor.Sum(tensor.Mul(x, fu)).Item(), 1e-12)

			un := func(xs []*tensor.Tensor) *tensor.Tensor { return tensor.Unfold(xs[0], c.spec) }
			fo := func(xs []*tensor.Tensor) *tensor.Tensor { return tensor.Fold(xs[0], c.shape[2:], c.spec) }
			checkGradOf(t, un, tensor.AsType(x, tensor.Float32))
			checkGradOf(t, fo, tensor.AsType(u, tensor.Float32))
			checkGradOf(t, gradOfSquares(func(x *tensor.Tensor) *tensor.Tensor { return tensor.Unfold(x, c.spec) }), tensor.AsType(x, tensor.Float32))
		})
	}
}

// TestUnfoldPlaced: a batch split over devices stays split.
func TestUnfoldPlaced(t *testing.T) {
	s := shard.NewSharding(shard.NewMesh([]int{4}, []string{"dp"}), shard.P("dp"))
	spec := tensor.UnfoldSpec{Kernel: []int{3}, Padding: []int{1}}
	requirePlacedAsHost(t, s, sample(tensor.Float32, 8, 8, 2, 4, 5),
		func(x *tensor.Tensor) *tensor.Tensor { return tensor.Unfold(x, spec) },
		"float32[8@dp,18,20]", "float32[8@dp,2,4,5]")
}

func TestUnfoldPanics(t *testing.T) {
	x := sample(tensor.Float32, 1, 1, 2, 3, 4)
	k2 := tensor.UnfoldSpec{Kernel: []int{2}}
	require.PanicsWithValue(t, "tensor.Unfold: f32[2,3] by {Kernel:[2] Dilation:[] Padding:[] Stride:[]}: want [N, C, spatial...] with one or more spatial dimensions",
		func() { tensor.Unfold(sample(tensor.Float32, 1, 2, 3), k2) })
	require.PanicsWithValue(t, "tensor.Unfold: f32[1,2,3,4] by {Kernel:[] Dilation:[] Padding:[] Stride:[]}: want a kernel size",
		func() { tensor.Unfold(x, tensor.UnfoldSpec{}) })
	require.PanicsWithValue(t, "tensor.Unfold: f32[1,2,3,4] by {Kernel:[2 2 2] Dilation:[] Padding:[] Stride:[]}: kernel [2 2 2]: want 1 or 2 values",
		func() { tensor.Unfold(x, tensor.UnfoldSpec{Kernel: []int{2, 2, 2}}) })
	require.PanicsWithValue(t, "tensor.Unfold: f32[1,2,3,4] by {Kernel:[2] Dilation:[] Padding:[] Stride:[0]}: stride [0 0]: want values of at least 1",
		func() { tensor.Unfold(x, tensor.UnfoldSpec{Kernel: []int{2}, Stride: []int{0}}) })
	require.PanicsWithValue(t, "tensor.Unfold: f32[1,2,3,4] by {Kernel:[2] Dilation:[] Padding:[-1] Stride:[]}: padding [-1 -1]: want values of at least 0",
		func() { tensor.Unfold(x, tensor.UnfoldSpec{Kernel: []int{2}, Padding: []int{-1}}) })
	require.PanicsWithValue(t, "tensor.Unfold: f32[1,2,3,4] by {Kernel:[4] Dilation:[] Padding:[] Stride:[]}: spatial dimension 0: 3 elements padded by 0 hold no block of 4",
		func() { tensor.Unfold(x, tensor.UnfoldSpec{Kernel: []int{4}}) })
	require.PanicsWithValue(t, "tensor.Unfold: i32[1,1,2]: not defined for int32",
		func() { tensor.Unfold(tensor.FromInts([]int{1, 2}, 1, 1, 2), k2) })
	cols := sample(tensor.Float32, 1, 1, 8, 6)
	require.Equal(t, []int{1, 2, 3, 4}, tensor.Fold(cols, []int{3, 4}, k2).Shape())
	require.PanicsWithValue(t, "tensor.Fold: f32[1,8,6] to [3 5] by {Kernel:[2] Dilation:[] Padding:[] Stride:[]}: 6 columns, want the 8 blocks [2 4]",
		func() { tensor.Fold(cols, []int{3, 5}, k2) })
	require.PanicsWithValue(t, "tensor.Fold: f32[1,8,6] to [3 4] by {Kernel:[3] Dilation:[] Padding:[] Stride:[]}: 8 rows are not channels × 9 kernel positions",
		func() { tensor.Fold(cols, []int{3, 4}, tensor.UnfoldSpec{Kernel: []int{3}}) })
	require.PanicsWithValue(t, "tensor.Fold: f32[1,8,6] to [3 0] by {Kernel:[2] Dilation:[] Padding:[] Stride:[]}: sizes must be positive",
		func() { tensor.Fold(cols, []int{3, 0}, k2) })
	require.PanicsWithValue(t, "tensor.Fold: f32[8,6] to [3 4] by {Kernel:[2] Dilation:[] Padding:[] Stride:[]}: want columns [N, C·K, L] and one or more output sizes",
		func() { tensor.Fold(sample(tensor.Float32, 1, 8, 6), []int{3, 4}, k2) })
}

// The nil-operand calls of Unfold and Fold (TestNilOperands).
func init() {
	nilOps["Unfold"] = func(t []*tensor.Tensor) { tensor.Unfold(t[0], tensor.UnfoldSpec{Kernel: []int{1}}) }
	nilOps["Fold"] = func(t []*tensor.Tensor) { tensor.Fold(t[0], []int{1}, tensor.UnfoldSpec{Kernel: []int{1}}) }
}
