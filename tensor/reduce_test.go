package tensor_test

import (
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/tensor"
)

// refReduce reduces x over axes (all if empty) with a function of the
// reduced elements, naively: for every output element it collects the
// input elements that map to it.
func refReduce(x *tensor.Tensor, axes []int, keep bool, f func([]float64) float64) ([]float64, []int) {
	shape := x.Shape()
	if len(axes) == 0 {
		for i := range shape {
			axes = append(axes, i)
		}
	}
	red := make([]bool, len(shape))
	for _, a := range axes {
		if a < 0 {
			a += len(shape)
		}
		red[a] = true
	}
	var outShape, keepShape []int
	for i, d := range shape {
		if red[i] {
			keepShape = append(keepShape, 1)
			if keep {
				outShape = append(outShape, 1)
			}
		} else {
			keepShape = append(keepShape, d)
			outShape = append(outShape, d)
		}
	}
	groups := make([][]float64, numel(keepShape))
	for i := range groups {
		groups[i] = []float64{}
	}
	vals := x.Float64s()
	for off, v := range vals {
		idx := unravel(off, shape)
		for i := range idx {
			if red[i] {
				idx[i] = 0
			}
		}
		k := ravel(idx, keepShape)
		groups[k] = append(groups[k], v)
	}
	out := make([]float64, len(groups))
	for i, g := range groups {
		out[i] = f(g)
	}
	return out, normShape(outShape)
}

func sum64(v []float64) float64 {
	s := 0.0
	for _, e := range v {
		s += e
	}
	return s
}

func max64(v []float64) float64 {
	m := math.Inf(-1)
	for _, e := range v {
		if math.IsNaN(e) {
			return e
		}
		m = math.Max(m, e)
	}
	return m
}

func min64(v []float64) float64 {
	m := math.Inf(1)
	for _, e := range v {
		if math.IsNaN(e) {
			return e
		}
		m = math.Min(m, e)
	}
	return m
}

func lse64(v []float64) float64 {
	m := max64(v)
	if math.IsInf(m, 0) {
		return m
	}
	s := 0.0
	for _, e := range v {
		s += math.Exp(e - m)
	}
	return m + math.Log(s)
}

type reduceCase struct {
	name string
	f    func(x *tensor.Tensor, axes ...int) *tensor.Tensor
	keep bool
	ref  func([]float64) float64
	rtol float64
	// intOK: also defined for int32
	intOK bool
	// nonEmpty: needs non-empty reduced axes
	nonEmpty bool
}

var reduceCases = []reduceCase{
	{"Sum", tensor.Sum, false, sum64, 1e-6, true, false},
	{"SumKeep", tensor.SumKeep, true, sum64, 1e-6, true, false},
	{"Mean", tensor.Mean, false, func(v []float64) float64 { return sum64(v) / float64(len(v)) }, 1e-6, false, false},
	{"MeanKeep", tensor.MeanKeep, true, func(v []float64) float64 { return sum64(v) / float64(len(v)) }, 1e-6, false, false},
	{"Max", tensor.Max, false, max64, 0, true, true},
	{"MaxKeep", tensor.MaxKeep, true, max64, 0, true, true},
	{"Min", tensor.Min, false, min64, 0, true, true},
	{"MinKeep", tensor.MinKeep, true, min64, 0, true, true},
	{"LogSumExp", tensor.LogSumExp, false, lse64, 1e-6, false, true},
	{"LogSumExpKeep", tensor.LogSumExpKeep, true, lse64, 1e-6, false, true},
}

// negAxes returns axes with every entry counted from the end.
func negAxes(axes []int, rank int) []int {
	out := make([]int, len(axes))
	for i, a := range axes {
		out[i] = a - rank
	}
	return out
}

func TestReduceFloat(t *testing.T) {
	rng := newRNG(9)
	inputs := map[string]*tensor.Tensor{
		"[2,3,4]": randF32(rng, 2, 3, 4),
		"[1,5,1]": randF32(rng, 1, 5, 1),
		"[2,0,3]": tensor.Zeros(tensor.Float32, 2, 0, 3),
	}
	for _, c := range reduceCases {
		for xname, x := range inputs {
			for _, axes := range allSubsets(3) {
				for _, neg := range []bool{false, true} {
					ax := axes
					if neg {
						ax = negAxes(axes, 3)
					}
					empty := false
					for _, a := range axes {
						if x.Dim(a) == 0 {
							empty = true
						}
					}
					if len(axes) == 0 && x.Size() == 0 {
						empty = true
					}
					if empty && c.nonEmpty {
						continue
					}
					t.Run(fmt.Sprintf("%s%s%v", c.name, xname, ax), func(t *testing.T) {
						before := snapshot(x)
						got := c.f(x, ax...)
						want, shape := refReduce(x, ax, c.keep, c.ref)
						for i := range want {
							want[i] = f32(want[i])
						}
						require.Equal(t, tensor.Float32, got.DType())
						require.Equal(t, shape, got.Shape())
						requireClose(t, want, got, 1e-6, c.rtol)
						requireUnchanged(t, before)
					})
				}
			}
		}
	}
}

func TestReduceInt(t *testing.T) {
	x := randI32(newRNG(10), -100, 100, 2, 3, 4)
	for _, c := range reduceCases {
		if !c.intOK {
			continue
		}
		for _, axes := range allSubsets(3) {
			got := c.f(x, axes...)
			want, shape := refReduce(x, axes, c.keep, c.ref)
			requireExact(t, tensor.Int32, shape, want, got, "%s %v", c.name, axes)
		}
	}
	// Int32 sums wrap around like Go's int32 arithmetic.
	requireExact(t, tensor.Int32, []int{}, []float64{math.MinInt32}, tensor.Sum(tensor.FromInts([]int{math.MaxInt32, 1})))
	requireExact(t, tensor.Int32, []int{}, []float64{math.MinInt32}, tensor.Min(tensor.FromInts([]int{math.MinInt32, 0})))
	requireExact(t, tensor.Int32, []int{}, []float64{math.MaxInt32}, tensor.Max(tensor.FromInts([]int{math.MaxInt32, 0})))
	requireExact(t, tensor.Int32, []int{3}, []float64{0, 0, 0}, tensor.Sum(tensor.Zeros(tensor.Int32, 0, 3), 0))
}

func TestReduceScalar(t *testing.T) {
	s := tensor.Scalar(2.5)
	for _, c := range reduceCases {
		requireClose(t, []float64{2.5}, c.f(s), 1e-6, 1e-6, c.name)
		assert.Equal(t, []int{}, c.f(s).Shape(), c.name)
	}
}

func TestReduceSpecialValues(t *testing.T) {
	nan, inf := math.NaN(), math.Inf(1)
	x := tensor.FromFloat64([]float64{
		1, nan, 3,
		-inf, -inf, -inf,
		inf, 1, 2,
		1000, 1000, -1000,
	}, 4, 3)
	requireExact(t, tensor.Float32, []int{4}, []float64{nan, -inf, inf, 1000}, tensor.Max(x, 1))
	requireExact(t, tensor.Float32, []int{4}, []float64{nan, -inf, 1, -1000}, tensor.Min(x, 1))
	requireExact(t, tensor.Float32, []int{4}, []float64{nan, -inf, inf, 1000}, tensor.Sum(x, 1))
	requireClose(t, []float64{nan, -inf, inf, f32(1000 + math.Log(2))}, tensor.LogSumExp(x, 1), 1e-6, 1e-6)
	// NaN is the maximum wherever it appears, including first.
	requireExact(t, tensor.Float32, []int{}, []float64{nan}, tensor.Max(tensor.FromFloat64([]float64{nan, 1, 2})))
	requireExact(t, tensor.Float32, []int{}, []float64{nan}, tensor.Min(tensor.FromFloat64([]float64{2, 1, nan})))
	// Float sums accumulate in float64: 1 + 1e8 ones - 1e8 is not lost.
	big := tensor.FromFloat64([]float64{1e8, 1, 1, 1, 1, -1e8})
	requireExact(t, tensor.Float32, []int{}, []float64{4}, tensor.Sum(big))
	// Mean of an empty axis is NaN, as in NumPy.
	requireExact(t, tensor.Float32, []int{2}, []float64{nan, nan}, tensor.Mean(tensor.Zeros(tensor.Float32, 2, 0), 1))
}

func TestArgMaxArgMin(t *testing.T) {
	rng := newRNG(11)
	x := tensor.AsType(randI32(rng, 0, 4, 3, 4, 5), tensor.Float32) // many ties
	xi := randI32(rng, -3, 3, 3, 4, 5)
	ref := func(x *tensor.Tensor, axis int, isMax bool) ([]float64, []int) {
		shape := x.Shape()
		outShape := slices.Delete(slices.Clone(shape), axis, axis+1)
		vals := x.Float64s()
		out := make([]float64, numel(outShape))
		for o := range out {
			oi := unravel(o, outShape)
			best, bv := 0, math.NaN()
			for k := 0; k < shape[axis]; k++ {
				idx := slices.Insert(slices.Clone(oi), axis, k)
				v := vals[ravel(idx, shape)]
				if k == 0 || (!math.IsNaN(bv) && (math.IsNaN(v) || (isMax && v > bv) || (!isMax && v < bv))) {
					best, bv = k, v
				}
			}
			out[o] = float64(best)
		}
		return out, normShape(outShape)
	}
	for _, in := range []*tensor.Tensor{x, xi} {
		for axis := -3; axis < 3; axis++ {
			a := (axis + 3) % 3
			want, shape := ref(in, a, true)
			requireExact(t, tensor.Int32, shape, want, tensor.ArgMax(in, axis), "ArgMax %v axis %d", in, axis)
			keepShape := slices.Clone(in.Shape())
			keepShape[a] = 1
			requireExact(t, tensor.Int32, keepShape, want, tensor.ArgMaxKeep(in, axis), "ArgMaxKeep axis %d", axis)
			want, shape = ref(in, a, false)
			requireExact(t, tensor.Int32, shape, want, tensor.ArgMin(in, axis), "ArgMin axis %d", axis)
		}
	}
	nan := float32(math.NaN())
	v := tensor.FromFloat32([]float32{1, 5, nan, 5, nan})
	assert.Equal(t, []int32{2}, tensor.ArgMax(tensor.Reshape(v, 1, 5), 1).Int32s())
	assert.Equal(t, []int32{2}, tensor.ArgMin(tensor.Reshape(v, 1, 5), 1).Int32s())
	assert.Equal(t, []int32{1}, tensor.ArgMax(tensor.FromFloat32([]float32{1, 5, 2, 5}), 0).Int32s(), "first of ties")
	assert.Equal(t, []int32{0}, tensor.ArgMin(tensor.FromFloat32([]float32{nan, -1}), 0).Int32s())
	assert.Equal(t, []int{0}, tensor.ArgMax(tensor.Zeros(tensor.Float32, 0, 3), 1).Shape())
	assert.Equal(t, []int{2, 0}, tensor.ArgMax(tensor.Zeros(tensor.Float32, 2, 3, 0), 1).Shape())
	assert.Equal(t, []int32{0}, tensor.ArgMax(tensor.FromFloat32([]float32{float32(math.Inf(-1))}), 0).Int32s())
	// Not differentiable: results are untraced.
	tr := tensor.NewTrace()
	assert.False(t, tensor.ArgMax(tr.Leaf(x), 0).IsTraced())
}

func TestAnyAll(t *testing.T) {
	rng := newRNG(12)
	x := randBool(rng, 2, 3, 4)
	for _, axes := range allSubsets(3) {
		for _, neg := range []bool{false, true} {
			ax := axes
			if neg {
				ax = negAxes(axes, 3)
			}
			want, shape := refReduce(x, ax, false, func(v []float64) float64 { return b2f(slices.Contains(v, 1)) })
			requireExact(t, tensor.Bool, shape, want, tensor.Any(x, ax...), "Any %v", ax)
			want, shape = refReduce(x, ax, false, func(v []float64) float64 { return b2f(!slices.Contains(v, 0)) })
			requireExact(t, tensor.Bool, shape, want, tensor.All(x, ax...), "All %v", ax)
		}
	}
	e := tensor.Zeros(tensor.Bool, 2, 0)
	requireExact(t, tensor.Bool, []int{}, []float64{0}, tensor.Any(e))
	requireExact(t, tensor.Bool, []int{}, []float64{1}, tensor.All(e))
	requireExact(t, tensor.Bool, []int{2}, []float64{0, 0}, tensor.Any(e, 1))
	requireExact(t, tensor.Bool, []int{2}, []float64{1, 1}, tensor.All(e, 1))
	requireExact(t, tensor.Bool, []int{}, []float64{1}, tensor.Any(tensor.ScalarBool(true)))
}

func TestReduceVJP(t *testing.T) {
	rng := newRNG(13)
	for _, c := range reduceCases {
		for _, axes := range allSubsets(3) {
			t.Run(fmt.Sprintf("%s%v", c.name, axes), func(t *testing.T) {
				x := distinct(rng, 2, 3, 4) // no ties for Max/Min
				checkGrad(t, func(xs []*tensor.Tensor) *tensor.Tensor { return c.f(xs[0], axes...) }, ts(x))
			})
		}
	}
	// Through a broadcast with keepdims, as in softmax.
	checkGrad(t, func(xs []*tensor.Tensor) *tensor.Tensor {
		return tensor.Exp(tensor.Sub(xs[0], tensor.LogSumExpKeep(xs[0], -1)))
	}, ts(randF32(rng, 3, 5)))
	checkGrad(t, func(xs []*tensor.Tensor) *tensor.Tensor {
		return tensor.Div(xs[0], tensor.SumKeep(tensor.Square(xs[0]), 0, 2))
	}, ts(randF32(rng, 2, 3, 2)))
	// Sum over a size-0 axis: the gradient has the input's (empty) shape.
	g := grad(func(xs []*tensor.Tensor) *tensor.Tensor { return tensor.Sum(xs[0], 1) }, ts(tensor.Zeros(tensor.Float32, 2, 0)))
	assert.Equal(t, []int{2, 0}, g[0].Shape())
}

// Ties in Max/Min split the gradient evenly among the tied elements.
func TestReduceMaxTies(t *testing.T) {
	x := tensor.FromFloat32([]float32{1, 3, 3, 2, 2, 2, 0, 5, -1}, 3, 3)
	g := grad(func(xs []*tensor.Tensor) *tensor.Tensor { return tensor.Max(xs[0], 1) }, ts(x))
	requireClose(t, []float64{0, 0.5, 0.5, 1.0 / 3, 1.0 / 3, 1.0 / 3, 0, 1, 0}, g[0], 1e-7, 0)
	g = grad(func(xs []*tensor.Tensor) *tensor.Tensor { return tensor.MinKeep(xs[0], 1) }, ts(x))
	requireClose(t, []float64{1, 0, 0, 1.0 / 3, 1.0 / 3, 1.0 / 3, 0, 0, 1}, g[0], 1e-7, 0)
	g = grad(func(xs []*tensor.Tensor) *tensor.Tensor { return tensor.Max(xs[0]) }, ts(tensor.FromFloat32([]float32{4, 4, 4, 4})))
	requireClose(t, []float64{0.25, 0.25, 0.25, 0.25}, g[0], 1e-7, 0)
	// LogSumExp's gradient is the softmax.
	g = grad(func(xs []*tensor.Tensor) *tensor.Tensor { return tensor.LogSumExp(xs[0]) }, ts(tensor.FromFloat32([]float32{0, 0, float32(math.Log(2))})))
	requireClose(t, []float64{0.25, 0.25, 0.5}, g[0], 1e-7, 1e-6)
	// ... and is finite for large inputs.
	g = grad(func(xs []*tensor.Tensor) *tensor.Tensor { return tensor.LogSumExp(xs[0]) }, ts(tensor.FromFloat32([]float32{1000, 1000})))
	requireClose(t, []float64{0.5, 0.5}, g[0], 1e-7, 1e-6)
}

func TestReducePanics(t *testing.T) {
	x := tensor.Zeros(tensor.Float32, 2, 3, 4)
	tests := []struct {
		f   func()
		msg string
	}{
		{func() { tensor.Sum(x, 3) }, "tensor.Sum: axis 3 out of range for f32[2,3,4]"},
		{func() { tensor.SumKeep(x, -4) }, "tensor.SumKeep: axis -4 out of range for f32[2,3,4]"},
		{func() { tensor.Sum(x, 2, -1) }, "tensor.Sum: axis 2 repeated in [2 -1] for f32[2,3,4]"},
		{func() { tensor.Sum(tensor.Zeros(tensor.Bool, 2)) }, "tensor.Sum: bool[2]: not defined for bool"},
		{func() { tensor.Mean(x, 1, 1) }, "tensor.Mean: axis 1 repeated in [1 1] for f32[2,3,4]"},
		{func() { tensor.MeanKeep(x, 5) }, "tensor.MeanKeep: axis 5 out of range for f32[2,3,4]"},
		{func() { tensor.Mean(tensor.Zeros(tensor.Int32, 2)) }, "tensor.Mean: i32[2] is int32, want a float dtype (float32, float64, bfloat16, float16)"},
		{func() { tensor.MeanKeep(tensor.Zeros(tensor.Int32, 2)) }, "tensor.MeanKeep: i32[2] is int32, want a float dtype (float32, float64, bfloat16, float16)"},
		{func() { tensor.Max(tensor.Zeros(tensor.Float32, 2, 0), 1) }, "tensor.Max: f32[2,0]: reduction over empty axis 1 has no identity"},
		{func() { tensor.Min(tensor.Zeros(tensor.Float32, 0)) }, "tensor.Min: f32[0]: reduction over empty axis 0 has no identity"},
		{func() { tensor.MaxKeep(tensor.Zeros(tensor.Bool, 2)) }, "tensor.MaxKeep: bool[2]: not defined for bool"},
		{func() { tensor.MinKeep(x, 0, 0) }, "tensor.MinKeep: axis 0 repeated in [0 0] for f32[2,3,4]"},
		{func() { tensor.LogSumExp(tensor.Zeros(tensor.Int32, 2)) }, "tensor.LogSumExp: i32[2] is int32, want a float dtype (float32, float64, bfloat16, float16)"},
		{func() { tensor.LogSumExpKeep(tensor.Zeros(tensor.Float32, 3, 0), -1) }, "tensor.LogSumExpKeep: f32[3,0]: reduction over empty axis 1 has no identity"},
		{func() { tensor.ArgMax(tensor.Zeros(tensor.Bool, 2), 0) }, "tensor.ArgMax: bool[2]: not defined for bool"},
		{func() { tensor.ArgMin(x, 3) }, "tensor.ArgMin: axis 3 out of range for f32[2,3,4]"},
		{func() { tensor.ArgMaxKeep(tensor.Zeros(tensor.Float32, 2, 0), -1) }, "tensor.ArgMaxKeep: f32[2,0]: axis -1 is empty"},
		{func() { tensor.ArgMax(tensor.Scalar(1), 0) }, "tensor.ArgMax: axis 0 out of range for f32[]"},
		{func() { tensor.Any(x) }, "tensor.Any: f32[2,3,4] is float32, want bool"},
		{func() { tensor.All(tensor.Zeros(tensor.Bool, 2), 1) }, "tensor.All: axis 1 out of range for bool[2]"},
	}
	for _, tt := range tests {
		requirePanic(t, tt.msg, tt.f)
	}
}

// Rank 4 with size-1 dimensions exercises the merging of dimensions in the
// reduction loops.
func TestReduceRank4(t *testing.T) {
	rng := newRNG(14)
	for _, shape := range [][]int{{3, 1, 4, 2}, {1, 2, 1, 3}, {2, 2, 2, 2}} {
		x := randF32(rng, shape...)
		xi := randI32(rng, -5, 5, shape...)
		for _, axes := range allSubsets(4) {
			for _, c := range reduceCases {
				want, oshape := refReduce(x, axes, c.keep, c.ref)
				got := c.f(x, axes...)
				require.Equal(t, oshape, got.Shape(), "%s %v %v", c.name, shape, axes)
				requireClose(t, want, got, 1e-6, max(c.rtol, 1e-6), "%s %v %v", c.name, shape, axes)
				if c.intOK {
					want, oshape = refReduce(xi, axes, c.keep, c.ref)
					requireExact(t, tensor.Int32, oshape, want, c.f(xi, axes...), "%s %v %v", c.name, shape, axes)
				}
			}
		}
	}
}

// Random shapes of rank 0 to 5 (dimensions 0 to 4) and random axes:
// reductions and transposes against the naive references.
func TestRandomReduceShapes(t *testing.T) {
	rng := newRNG(98)
	for iter := 0; iter < 300; iter++ {
		rank := rng.IntN(6)
		shape := make([]int, rank)
		for i := range shape {
			shape[i] = rng.IntN(5)
		}
		x := randF32(rng, shape...)
		var axes []int
		for i := 0; i < rank; i++ {
			if rng.IntN(2) == 0 {
				a := i
				if rng.IntN(2) == 0 {
					a -= rank
				}
				axes = append(axes, a)
			}
		}
		keep := rng.IntN(2) == 0
		sum := tensor.Sum
		if keep {
			sum = tensor.SumKeep
		}
		want, oshape := refReduce(x, axes, keep, sum64)
		got := sum(x, axes...)
		require.Equal(t, oshape, got.Shape(), "%v %v", shape, axes)
		requireClose(t, want, got, 1e-6, 1e-6, "Sum %v %v", shape, axes)
		if x.Size() > 0 {
			want, oshape = refReduce(x, axes, keep, max64)
			mx := tensor.Max
			if keep {
				mx = tensor.MaxKeep
			}
			requireExact(t, tensor.Float32, oshape, want, mx(x, axes...), "Max %v %v", shape, axes)
		}
		perm := rng.Perm(rank)
		wantT, tshape := refTranspose(x, perm)
		requireExact(t, tensor.Float32, tshape, wantT, tensor.Transpose(x, perm...), "Transpose %v %v", shape, perm)
	}
}
