package tensor_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/shard"
	"github.com/gonox/gonox/tensor"
)

// TestInterpolateHandWorked: positions worked out by hand from PyTorch's
// formulas, on inputs whose values are their positions (so that a
// result is the position it is read at).
func TestInterpolateHandWorked(t *testing.T) {
	ramp := func(n int) *tensor.Tensor {
		v := make([]float64, n)
		for i := range v {
			v[i] = float64(i)
		}
		return tensor.FromFloat64s(v, 1, 1, n)
	}
	for _, c := range []struct {
		name string
		n    int
		spec tensor.InterpSpec
		want []float64
	}{
		// 5 to 8: position 0.625(i+½)-½, clamped at 0; the last reads
		// element 4 twice.
		{"linear", 5, tensor.InterpSpec{Mode: tensor.InterpLinear, Size: []int{8}},
			[]float64{0, 0.4375, 1.0625, 1.6875, 2.3125, 2.9375, 3.5625, 4}},
		// 5 to 9 with the corners aligned: positions i/2.
		{"linear aligned", 5, tensor.InterpSpec{Mode: tensor.InterpLinear, Size: []int{9}, AlignCorners: true},
			[]float64{0, 0.5, 1, 1.5, 2, 2.5, 3, 3.5, 4}},
		// By scale factor 1.5: 7 elements at (i+½)/1.5-½, not 5/7's.
		{"linear scale", 5, tensor.InterpSpec{Mode: tensor.InterpLinear, ScaleFactor: []float64{1.5}},
			[]float64{0, 0.5, 7.0 / 6, 11.0 / 6, 2.5, 19.0 / 6, 23.0 / 6}},
		// The same size from the scale, the scale recomputed as 5/7.
		{"linear recomputed", 5, tensor.InterpSpec{Mode: tensor.InterpLinear, ScaleFactor: []float64{1.5}, RecomputeScale: true},
			[]float64{0, 4.0 / 7, 9.0 / 7, 2, 19.0 / 7, 24.0 / 7, 4}},
		// 3 to 5: ⌊0.6i⌋ and ⌊0.6(i+½)⌋.
		{"nearest", 3, tensor.InterpSpec{Size: []int{5}}, []float64{0, 0, 1, 1, 2}},
		{"nearest-exact", 3, tensor.InterpSpec{Mode: tensor.InterpNearestExact, Size: []int{5}}, []float64{0, 0, 1, 2, 2}},
		// Downsampling 7 to 3: ⌊7i/3⌋ and ⌊7(i+½)/3⌋.
		{"nearest down", 7, tensor.InterpSpec{Size: []int{3}}, []float64{0, 2, 4}},
		{"nearest-exact down", 7, tensor.InterpSpec{Mode: tensor.InterpNearestExact, Size: []int{3}}, []float64{1, 3, 5}},
		// Cubic, 5 to 8: PyTorch 1.13's F.interpolate(mode="bicubic")
		// printed these (dyadic: the weights of positions k/16 are).
		{"cubic", 5, tensor.InterpSpec{Mode: tensor.InterpCubic, Size: []int{8}},
			[]float64{-0.09283447265625, 0.34906005859375, 1.088134765625, 1.647216796875, 2.352783203125, 2.911865234375, 3.65093994140625, 4.09283447265625}},
		// Area, 6 to 4: means of windows [0,2), [1,3), [3,5), [4,6).
		{"area", 6, tensor.InterpSpec{Mode: tensor.InterpArea, Size: []int{4}}, []float64{0.5, 1.5, 3.5, 4.5}},
		// One element, aligned: every result reads position 0.
		{"linear to one", 4, tensor.InterpSpec{Mode: tensor.InterpLinear, Size: []int{1}, AlignCorners: true}, []float64{0}},
	} {
		t.Run(c.name, func(t *testing.T) {
			y := tensor.Interpolate(ramp(c.n), c.spec)
			require.Equal(t, []int{1, 1, len(c.want)}, y.Shape())
			requireClose(t, c.want, y, 1e-15, 1e-15)
		})
	}
	// Two dimensions: nearest doubling repeats each element in a 2×2
	// block; bilinear is the product of the two ramps' interpolations.
	x := tensor.FromFloat64s([]float64{1, 2, 3, 4}, 1, 1, 2, 2)
	requireTensor(t, tensor.Interpolate(x, tensor.InterpSpec{ScaleFactor: []float64{2}}), tensor.Float64, []int{1, 1, 4, 4},
		[]float64{1, 1, 2, 2, 1, 1, 2, 2, 3, 3, 4, 4, 3, 3, 4, 4})
	requireTensor(t, tensor.Interpolate(x, tensor.InterpSpec{Mode: tensor.InterpLinear, Size: []int{3}, AlignCorners: true}),
		tensor.Float64, []int{1, 1, 3, 3}, []float64{1, 1.5, 2, 2, 2.5, 3, 3, 3.5, 4})
	// A result of the input's size is the input.
	require.Same(t, x, tensor.Interpolate(x, tensor.InterpSpec{Mode: tensor.InterpLinear, Size: []int{2, 2}}))
	require.Equal(t, "nearest-exact", tensor.InterpNearestExact.String())
	require.Equal(t, "bicubic", tensor.InterpCubic.String())
	require.Same(t, x, tensor.Interpolate(x, tensor.InterpSpec{Mode: tensor.InterpArea, ScaleFactor: []float64{1}}))
}

var interpGradCases = []struct {
	shape []int
	spec  tensor.InterpSpec
}{
	{[]int{2, 2, 5}, tensor.InterpSpec{Mode: tensor.InterpLinear, Size: []int{8}}},
	{[]int{1, 2, 4, 3}, tensor.InterpSpec{Mode: tensor.InterpLinear, Size: []int{7, 2}, AlignCorners: true}},
	{[]int{1, 2, 4, 3}, tensor.InterpSpec{Mode: tensor.InterpLinear, ScaleFactor: []float64{1.7, 2.2}}},
	{[]int{1, 1, 3, 2, 4}, tensor.InterpSpec{Mode: tensor.InterpLinear, Size: []int{5, 3, 2}}},
	{[]int{2, 1, 3, 5}, tensor.InterpSpec{Size: []int{7, 2}}},
	{[]int{2, 1, 3, 5}, tensor.InterpSpec{Mode: tensor.InterpNearestExact, ScaleFactor: []float64{2.5}}},
	{[]int{1, 2, 4, 3}, tensor.InterpSpec{Mode: tensor.InterpCubic, Size: []int{7, 2}}},
	{[]int{1, 2, 4, 3}, tensor.InterpSpec{Mode: tensor.InterpCubic, ScaleFactor: []float64{1.5}, AlignCorners: true}},
	{[]int{2, 1, 6, 5}, tensor.InterpSpec{Mode: tensor.InterpArea, Size: []int{4, 3}}},
}

// TestInterpolateGrad: the gradients against finite differences, first
// and second order, in float32 and float64.
func TestInterpolateGrad(t *testing.T) {
	for i, c := range interpGradCases {
		t.Run(fmt.Sprintf("%d/%v", i, c.spec.Mode), func(t *testing.T) {
			f := func(xs []*tensor.Tensor) *tensor.Tensor { return tensor.Interpolate(xs[0], c.spec) }
			x := sample(tensor.Float32, uint64(i), c.shape...)
			checkGradOf(t, f, x)
			checkGradOf(t, f, tensor.AsType(x, tensor.Float64))
			checkGradOf(t, gradOfSquares(func(x *tensor.Tensor) *tensor.Tensor { return tensor.Interpolate(x, c.spec) }), x)
		})
	}
}

// TestInterpolateHalf: bfloat16 operands are widened and the result
// rounded once.
func TestInterpolateHalf(t *testing.T) {
	x := tensor.Convert(sample(tensor.Float32, 7, 1, 2, 3, 5), tensor.BFloat16)
	spec := tensor.InterpSpec{Mode: tensor.InterpLinear, Size: []int{5, 9}}
	y := tensor.Interpolate(x, spec)
	require.Equal(t, tensor.BFloat16, y.DType())
	want := tensor.Convert(tensor.Interpolate(tensor.Convert(x, tensor.Float32), spec), tensor.BFloat16)
	require.Equal(t, want.Bits16(), y.Bits16())
}

// TestInterpolatePlaced: a batch split over devices stays split, the
// values and the gradient those of the host.
func TestInterpolatePlaced(t *testing.T) {
	s := shard.NewSharding(shard.NewMesh([]int{2, 2}, []string{"dp", "tp"}), shard.P("dp", "tp"))
	spec := tensor.InterpSpec{Mode: tensor.InterpLinear, ScaleFactor: []float64{2}}
	requirePlacedAsHost(t, s, sample(tensor.Float32, 8, 4, 2, 3, 5),
		func(x *tensor.Tensor) *tensor.Tensor { return tensor.Interpolate(x, spec) },
		"float32[4@dp,2@tp,6,10]", "float32[4@dp,2@tp,3,5]")
}

func TestInterpolatePanics(t *testing.T) {
	x := sample(tensor.Float32, 1, 1, 2, 3, 4)
	lin := tensor.InterpLinear
	for _, c := range []struct {
		x    *tensor.Tensor
		spec tensor.InterpSpec
		want string
	}{
		{sample(tensor.Float32, 1, 2, 3), tensor.InterpSpec{Size: []int{2}},
			"tensor.Interpolate: f32[2,3] by {Mode:nearest Size:[2] ScaleFactor:[] RecomputeScale:false AlignCorners:false}: want [N, C, spatial...] with one or more spatial dimensions"},
		{x, tensor.InterpSpec{},
			"tensor.Interpolate: f32[1,2,3,4] by {Mode:nearest Size:[] ScaleFactor:[] RecomputeScale:false AlignCorners:false}: give Size or ScaleFactor"},
		{x, tensor.InterpSpec{Size: []int{2}, ScaleFactor: []float64{2}},
			"tensor.Interpolate: f32[1,2,3,4] by {Mode:nearest Size:[2] ScaleFactor:[2] RecomputeScale:false AlignCorners:false}: give Size or ScaleFactor, not both"},
		{x, tensor.InterpSpec{Size: []int{2, 3, 4}},
			"tensor.Interpolate: f32[1,2,3,4] by {Mode:nearest Size:[2 3 4] ScaleFactor:[] RecomputeScale:false AlignCorners:false}: want 1 or 2 sizes"},
		{x, tensor.InterpSpec{Size: []int{2, 0}},
			"tensor.Interpolate: f32[1,2,3,4] by {Mode:nearest Size:[2 0] ScaleFactor:[] RecomputeScale:false AlignCorners:false}: sizes must be positive"},
		{x, tensor.InterpSpec{ScaleFactor: []float64{1, 2, 3}},
			"tensor.Interpolate: f32[1,2,3,4] by {Mode:nearest Size:[] ScaleFactor:[1 2 3] RecomputeScale:false AlignCorners:false}: want 1 or 2 scale factors"},
		{x, tensor.InterpSpec{ScaleFactor: []float64{0.2}},
			"tensor.Interpolate: f32[1,2,3,4] by {Mode:nearest Size:[] ScaleFactor:[0.2] RecomputeScale:false AlignCorners:false}: scale factor 0.2 gives no valid size along spatial dimension 0"},
		{x, tensor.InterpSpec{Size: []int{2}, AlignCorners: true},
			"tensor.Interpolate: f32[1,2,3,4] by {Mode:nearest Size:[2] ScaleFactor:[] RecomputeScale:false AlignCorners:true}: AlignCorners is for linear and cubic interpolation"},
		{x, tensor.InterpSpec{Mode: tensor.InterpArea + 1, Size: []int{2}},
			"tensor.Interpolate: f32[1,2,3,4] by {Mode:InterpMode(5) Size:[2] ScaleFactor:[] RecomputeScale:false AlignCorners:false}: unknown mode"},
		{x, tensor.InterpSpec{Mode: tensor.InterpArea, Size: []int{2}, AlignCorners: true},
			"tensor.Interpolate: f32[1,2,3,4] by {Mode:area Size:[2] ScaleFactor:[] RecomputeScale:false AlignCorners:true}: AlignCorners is for linear and cubic interpolation"},
		{tensor.Zeros(tensor.Float32, 1, 2, 0), tensor.InterpSpec{Mode: lin, Size: []int{2}},
			"tensor.Interpolate: f32[1,2,0] by {Mode:linear Size:[2] ScaleFactor:[] RecomputeScale:false AlignCorners:false}: spatial dimension 0 is empty"},
		{tensor.FromInts([]int{1, 2}, 1, 1, 2), tensor.InterpSpec{Size: []int{4}},
			"tensor.Interpolate: i32[1,1,2]: not defined for int32"},
	} {
		require.PanicsWithValue(t, c.want, func() { tensor.Interpolate(c.x, c.spec) })
	}
}
