package tensor_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"sort"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/autodiff"
	"github.com/gonox/gonox/tensor"
)

// Helpers shared by the sort, count, cumsum, softmax and loss tests. They
// carry the srt prefix so they cannot collide with other files' helpers.

var srtNaN = float32(math.NaN())

// srtRandn returns a float32 tensor of standard normal values.
func srtRandn(seed uint64, shape ...int) *tensor.Tensor {
	rng := rand.New(rand.NewPCG(seed, 1))
	n := 1
	for _, d := range shape {
		n *= d
	}
	d := make([]float32, n)
	for i := range d {
		d[i] = float32(rng.NormFloat64())
	}
	if len(shape) == 0 {
		return tensor.Scalar(d[0]) // FromFloat32 without a shape makes a vector
	}
	return tensor.FromFloat32(d, shape...)
}

// srtDistinct returns a float32 tensor whose values are a random
// permutation of distinct values at least 0.05 apart, so finite
// differences never reorder them.
func srtDistinct(seed uint64, shape ...int) *tensor.Tensor {
	rng := rand.New(rand.NewPCG(seed, 2))
	n := 1
	for _, d := range shape {
		n *= d
	}
	d := make([]float32, n)
	for i, p := range rng.Perm(n) {
		d[i] = float32(p)*0.1 - float32(n)*0.05 + float32(rng.Float64()*0.05)
	}
	return tensor.FromFloat32(d, shape...)
}

// srtTies returns float32 values drawn from a small set (many ties) that
// includes -0, +0, ±Inf and NaN.
func srtTies(seed uint64, shape ...int) *tensor.Tensor {
	rng := rand.New(rand.NewPCG(seed, 3))
	pool := []float32{-1, 0, float32(math.Copysign(0, -1)), 1, 2, float32(math.Inf(1)), float32(math.Inf(-1)), srtNaN}
	n := 1
	for _, d := range shape {
		n *= d
	}
	d := make([]float32, n)
	for i := range d {
		d[i] = pool[rng.IntN(len(pool))]
	}
	return tensor.FromFloat32(d, shape...)
}

// srtLaneOffsets lists, for each lane along axis of shape, the flat offsets
// of its elements, walking every multi-index (independently of the
// implementation's outer/inner decomposition).
func srtLaneOffsets(shape []int, axis int) [][]int {
	strides := make([]int, len(shape))
	acc := 1
	for i := len(shape) - 1; i >= 0; i-- {
		strides[i] = acc
		acc *= shape[i]
	}
	lanes := map[int][]int{}
	var keys []int
	idx := make([]int, len(shape))
	for flat := 0; flat < acc; flat++ {
		rem := flat
		for i := range shape {
			idx[i] = rem / strides[i]
			rem %= strides[i]
		}
		start := flat - idx[axis]*strides[axis]
		if _, ok := lanes[start]; !ok {
			keys = append(keys, start)
		}
		lanes[start] = append(lanes[start], flat)
	}
	out := make([][]int, len(keys))
	for i, k := range keys {
		out[i] = lanes[k]
	}
	return out
}

// srtRefLess orders float64 values with NaN greatest and -0 == +0.
func srtRefLess(a, b float64) bool {
	if math.IsNaN(a) {
		return false
	}
	if math.IsNaN(b) {
		return true
	}
	return a < b
}

// srtRefArgSort sorts one lane with sort.SliceStable.
func srtRefArgSort(v []float64, descending bool) []int {
	idx := make([]int, len(v))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(i, j int) bool {
		a, b := v[idx[i]], v[idx[j]]
		if descending {
			return srtRefLess(b, a)
		}
		return srtRefLess(a, b)
	})
	return idx
}

// srtSameFloats compares float32 slices bit for bit except that any NaN
// matches any NaN.
func srtSameFloats(t *testing.T, want, got []float32, msg ...any) {
	t.Helper()
	require.Len(t, got, len(want), msg...)
	for i := range want {
		if want[i] != want[i] && got[i] != got[i] {
			continue
		}
		require.Equal(t, math.Float32bits(want[i]), math.Float32bits(got[i]),
			"element %d: want %v got %v %v", i, want[i], got[i], fmt.Sprint(msg...))
	}
}

// srtRequireShape checks x's shape (nil and empty are both rank 0).
func srtRequireShape(t *testing.T, want []int, x *tensor.Tensor) {
	t.Helper()
	require.True(t, slices.Equal(want, x.Shape()), "shape: want %v, got %v", want, x.Shape())
}

// srtReport reports a benchmark's time per op and the bandwidth it got
// moving the given number of bytes per op.
func srtReport(b *testing.B, bytes float64) {
	sec := b.Elapsed().Seconds() / float64(b.N)
	b.ReportMetric(sec*1e6, "µs/op")
	b.ReportMetric(bytes/sec/1e9, "GB/s")
	b.ReportMetric(0, "ns/op") // replaced by µs/op
}

// srtCheckGrad runs autodiff.CheckGrad and fails the test on a mismatch.
// A scalar result is checked as a vector of one element: the CheckGrad
// this branch started from built its cotangent with
// FromFloat32(c, y.Shape()...), a vector for a rank-0 y, which Backward
// rejects. (Fixed on main since; the reshape is then a no-op safeguard.)
func srtCheckGrad(t *testing.T, f func(xs []*tensor.Tensor) *tensor.Tensor, xs ...*tensor.Tensor) {
	t.Helper()
	g := func(xs []*tensor.Tensor) *tensor.Tensor {
		y := f(xs)
		if y.Rank() == 0 {
			y = tensor.Reshape(y, 1)
		}
		return y
	}
	require.NoError(t, autodiff.CheckGrad(g, xs, autodiff.CheckOptions{Seed: 7}))
}

// srtGradFn turns f into the function x ↦ ∂(c·f)/∂xs[wrt] for a fixed
// random cotangent c, computed by an inner trace. CheckGrad on it checks
// the VJP of the VJP (a Hessian-vector product).
func srtGradFn(f func(xs []*tensor.Tensor) *tensor.Tensor, wrt int) func(xs []*tensor.Tensor) *tensor.Tensor {
	return func(xs []*tensor.Tensor) *tensor.Tensor {
		tr := tensor.NewTrace()
		in := slices.Clone(xs)
		in[wrt] = tr.Leaf(xs[wrt])
		y := f(in)
		c := srtRandn(99, y.Shape()...)
		return tensor.Backward(tr, []*tensor.Tensor{y}, []*tensor.Tensor{c}, []*tensor.Tensor{in[wrt]}, false)[0]
	}
}

// srtGrad returns the gradient of sum(c·f(x)) with respect to x.
func srtGrad(f func(x *tensor.Tensor) *tensor.Tensor, x, c *tensor.Tensor) *tensor.Tensor {
	tr := tensor.NewTrace()
	xl := tr.Leaf(x)
	y := f(xl)
	return tensor.Backward(tr, []*tensor.Tensor{y}, []*tensor.Tensor{c}, []*tensor.Tensor{xl}, false)[0]
}

func TestArgSortHandWorked(t *testing.T) {
	nan := srtNaN
	negz := float32(math.Copysign(0, -1))
	inf := float32(math.Inf(1))
	tests := []struct {
		name       string
		x          *tensor.Tensor
		descending bool
		want       []int
	}{
		{"ascending ties", tensor.FromFloat32([]float32{3, 1, 2, 1}), false, []int{1, 3, 2, 0}},
		{"descending ties keep order", tensor.FromFloat32([]float32{3, 1, 2, 1}), true, []int{0, 2, 1, 3}},
		{"NaN last ascending", tensor.FromFloat32([]float32{nan, 1, -inf, nan, 0}), false, []int{2, 4, 1, 0, 3}},
		{"NaN first descending", tensor.FromFloat32([]float32{nan, 1, -inf, nan, 0}), true, []int{0, 3, 1, 4, 2}},
		{"-0 equals +0", tensor.FromFloat32([]float32{0, negz, 0, negz}), false, []int{0, 1, 2, 3}},
		{"-0 equals +0 descending", tensor.FromFloat32([]float32{0, negz, 0, negz}), true, []int{0, 1, 2, 3}},
		{"Inf before NaN", tensor.FromFloat32([]float32{nan, inf, -1}), false, []int{2, 1, 0}},
		{"int32", tensor.FromInt32([]int32{5, -7, 5, math.MinInt32, math.MaxInt32}), false, []int{3, 1, 0, 2, 4}},
		{"int32 descending", tensor.FromInt32([]int32{5, -7, 5, math.MinInt32, math.MaxInt32}), true, []int{4, 0, 2, 1, 3}},
		{"bool", tensor.FromBool([]bool{true, false, true, false}), false, []int{1, 3, 0, 2}},
		{"bool descending", tensor.FromBool([]bool{true, false, true, false}), true, []int{0, 2, 1, 3}},
		{"empty", tensor.FromFloat32(nil), false, []int{}},
		{"one", tensor.FromFloat32([]float32{4}), true, []int{0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tensor.ArgSort(tt.x, 0, tt.descending)
			assert.Equal(t, tensor.Int32, got.DType())
			assert.Equal(t, tt.x.Shape(), got.Shape())
			assert.Equal(t, tt.want, got.Ints())
		})
	}
}

func TestArgSortAndSortMatchReference(t *testing.T) {
	tests := []struct {
		shape []int
		axis  int
	}{
		{[]int{17}, 0},
		{[]int{17}, -1},
		{[]int{4, 9}, 0},
		{[]int{4, 9}, 1},
		{[]int{3, 5, 6}, 0},
		{[]int{3, 5, 6}, 1},
		{[]int{3, 5, 6}, -1},
		{[]int{2, 0, 3}, 2},
		{[]int{2, 0, 3}, 1},
		{[]int{1, 300}, 1}, // long lane
		{[]int{300, 2}, 0},
	}
	for i, tt := range tests {
		for _, desc := range []bool{false, true} {
			for _, kind := range []string{"ties", "randn", "int32"} {
				t.Run(fmt.Sprintf("%v/axis=%d/desc=%v/%s", tt.shape, tt.axis, desc, kind), func(t *testing.T) {
					var x *tensor.Tensor
					switch kind {
					case "ties":
						x = srtTies(uint64(i), tt.shape...)
					case "randn":
						x = srtRandn(uint64(i), tt.shape...)
					case "int32":
						x = tensor.AsType(tensor.MulScalar(srtRandn(uint64(i), tt.shape...), 3), tensor.Int32)
					}
					idx := tensor.ArgSort(x, tt.axis, desc)
					vals := tensor.Sort(x, tt.axis, desc)
					require.Equal(t, x.Shape(), idx.Shape())
					require.Equal(t, x.Shape(), vals.Shape())
					xv := x.Float64s()
					gotIdx := idx.Ints()
					gotVals := vals.Float64s()
					axis := tt.axis
					if axis < 0 {
						axis += len(tt.shape)
					}
					for _, lane := range srtLaneOffsets(tt.shape, axis) {
						v := make([]float64, len(lane))
						for j, off := range lane {
							v[j] = xv[off]
						}
						want := srtRefArgSort(v, desc)
						for j, off := range lane {
							require.Equal(t, want[j], gotIdx[off], "lane %v position %d", lane, j)
							w, g := v[want[j]], gotVals[off]
							if !(math.IsNaN(w) && math.IsNaN(g)) {
								require.Equal(t, math.Float64bits(w), math.Float64bits(g), "value at lane position %d", j)
							}
						}
					}
				})
			}
		}
	}
}

func TestSortKeepsNegativeZeroAndNaN(t *testing.T) {
	negz := float32(math.Copysign(0, -1))
	x := tensor.FromFloat32([]float32{1, negz, srtNaN, 0, -2})
	got := tensor.Sort(x, 0, false).Float32s()
	srtSameFloats(t, []float32{-2, negz, 0, 1, srtNaN}, got)
	got = tensor.Sort(x, -1, true).Float32s()
	srtSameFloats(t, []float32{srtNaN, 1, negz, 0, -2}, got)
}

func TestSortBool(t *testing.T) {
	x := tensor.FromBool([]bool{true, false, true, false, false}, 5)
	assert.Equal(t, []bool{false, false, false, true, true}, tensor.Sort(x, 0, false).Bools())
	assert.Equal(t, []bool{true, true, false, false, false}, tensor.Sort(x, 0, true).Bools())
}

func TestSortIsNotTracedForInts(t *testing.T) {
	tr := tensor.NewTrace()
	x := tr.Leaf(tensor.FromInt32([]int32{3, 1, 2}))
	y := tensor.Sort(x, 0, false)
	assert.False(t, y.IsTraced())
	assert.Equal(t, []int32{1, 2, 3}, y.Int32s())
	assert.False(t, tensor.ArgSort(tr.Leaf(srtRandn(1, 3)), 0, false).IsTraced())
}

func TestSortVJP(t *testing.T) {
	tests := []struct {
		shape []int
		axis  int
		desc  bool
	}{
		{[]int{7}, 0, false},
		{[]int{7}, 0, true},
		{[]int{3, 5}, 0, false},
		{[]int{3, 5}, 1, true},
		{[]int{2, 3, 4}, 1, false},
		{[]int{2, 3, 4}, -1, true},
	}
	for i, tt := range tests {
		t.Run(fmt.Sprintf("%v/%d/%v", tt.shape, tt.axis, tt.desc), func(t *testing.T) {
			f := func(xs []*tensor.Tensor) *tensor.Tensor { return tensor.Sort(xs[0], tt.axis, tt.desc) }
			x := srtDistinct(uint64(i), tt.shape...)
			srtCheckGrad(t, f, x)
			// Sorting is piecewise linear: its second derivative is 0, and
			// the VJP of the VJP is again a permutation.
			srtCheckGrad(t, srtGradFn(func(xs []*tensor.Tensor) *tensor.Tensor {
				s := tensor.Sort(xs[0], tt.axis, tt.desc)
				return tensor.Mul(s, s)
			}, 0), x)
		})
	}
}

func TestSortGradientFollowsPermutationWithTies(t *testing.T) {
	// With ties the permutation is the stable one: the cotangent of sorted
	// position j goes to x[perm[j]].
	x := tensor.FromFloat32([]float32{2, 1, 2, 1, 0})
	c := tensor.FromFloat32([]float32{10, 20, 30, 40, 50})
	g := srtGrad(func(x *tensor.Tensor) *tensor.Tensor { return tensor.Sort(x, 0, false) }, x, c)
	// ascending perm: [4, 1, 3, 0, 2]
	assert.Equal(t, []float32{40, 20, 50, 30, 10}, g.Float32s())
	g = srtGrad(func(x *tensor.Tensor) *tensor.Tensor { return tensor.Sort(x, 0, true) }, x, c)
	// descending perm: [0, 2, 1, 3, 4]
	assert.Equal(t, []float32{10, 30, 20, 40, 50}, g.Float32s())
}

func TestSortPanics(t *testing.T) {
	x := tensor.Zeros(tensor.Float32, 2, 3)
	require.PanicsWithValue(t, "tensor.ArgSort: axis 2 out of range for f32[2,3]", func() { tensor.ArgSort(x, 2, false) })
	require.PanicsWithValue(t, "tensor.Sort: axis -3 out of range for f32[2,3]", func() { tensor.Sort(x, -3, true) })
	require.PanicsWithValue(t, "tensor.ArgSort: axis -1 out of range for f32[]", func() { tensor.ArgSort(tensor.Scalar(1), -1, false) })
	require.PanicsWithValue(t, "tensor.Sort: axis 0 out of range for i32[]", func() { tensor.Sort(tensor.ScalarInt(1), 0, false) })
}

func TestTopKHandWorked(t *testing.T) {
	nan := srtNaN
	tests := []struct {
		name    string
		x       *tensor.Tensor
		k       int
		vals    []float32
		indices []int32
		shape   []int
	}{
		{"ties lower index first", tensor.FromFloat32([]float32{1, 3, 3, 2}), 2, []float32{3, 3}, []int32{1, 2}, []int{2}},
		{"k=n is a descending stable sort", tensor.FromFloat32([]float32{1, 3, 3, 2}), 4, []float32{3, 3, 2, 1}, []int32{1, 2, 3, 0}, []int{4}},
		{"k=0", tensor.FromFloat32([]float32{1, 3, 3, 2}), 0, []float32{}, []int32{}, []int{0}},
		{"NaN is largest", tensor.FromFloat32([]float32{1, nan, 3}), 2, []float32{nan, 3}, []int32{1, 2}, []int{2}},
		{"rows", tensor.FromFloat32([]float32{5, 1, 4, 2, 8, 8}, 2, 3), 2, []float32{5, 4, 8, 8}, []int32{0, 2, 1, 2}, []int{2, 2}},
		{"rank 3", tensor.FromFloat32([]float32{0, 1, 3, 2, 5, 4, 7, 6}, 2, 2, 2), 1, []float32{1, 3, 5, 7}, []int32{1, 0, 0, 0}, []int{2, 2, 1}},
		{"empty rows", tensor.Zeros(tensor.Float32, 0, 5), 3, []float32{}, []int32{}, []int{0, 3}},
		{"empty lanes k=0", tensor.Zeros(tensor.Float32, 3, 0), 0, []float32{}, []int32{}, []int{3, 0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v, idx := tensor.TopK(tt.x, tt.k)
			assert.Equal(t, tt.shape, v.Shape())
			assert.Equal(t, tt.shape, idx.Shape())
			assert.Equal(t, tensor.Int32, idx.DType())
			srtSameFloats(t, tt.vals, v.Float32s())
			assert.Equal(t, tt.indices, append([]int32{}, idx.Int32s()...))
		})
	}
}

func TestTopKInt32AndBool(t *testing.T) {
	v, idx := tensor.TopK(tensor.FromInt32([]int32{-5, 9, 9, math.MinInt32, 0}), 3)
	assert.Equal(t, []int32{9, 9, 0}, v.Int32s())
	assert.Equal(t, []int32{1, 2, 4}, idx.Int32s())
	b, idx := tensor.TopK(tensor.FromBool([]bool{false, true, false, true}), 3)
	assert.Equal(t, []bool{true, true, false}, b.Bools())
	assert.Equal(t, []int32{1, 3, 0}, idx.Int32s())
}

func TestTopKMatchesReference(t *testing.T) {
	// Lanes long enough to go through the selection path, with inputs that
	// defeat naive pivots (sorted, reversed, constant) as well as random
	// ones with ties and NaNs.
	gens := map[string]func(n int) []float32{
		"ties": func(n int) []float32 { return srtTies(uint64(n), n).Float32s() },
		"randn": func(n int) []float32 {
			return srtRandn(uint64(n), n).Float32s()
		},
		"ascending": func(n int) []float32 {
			d := make([]float32, n)
			for i := range d {
				d[i] = float32(i)
			}
			return d
		},
		"descending": func(n int) []float32 {
			d := make([]float32, n)
			for i := range d {
				d[i] = float32(n - i)
			}
			return d
		},
		"constant": func(n int) []float32 { return make([]float32, n) },
		"organ pipe": func(n int) []float32 {
			d := make([]float32, n)
			for i := range d {
				d[i] = float32(min(i, n-1-i))
			}
			return d
		},
	}
	for name, gen := range gens {
		for _, n := range []int{1, 5, 17, 40, 64, 1000, 4099} {
			for _, k := range []int{0, 1, 2, 7, n / 3, n / 2, n - 1, n} {
				if k < 0 || k > n {
					continue
				}
				t.Run(fmt.Sprintf("%s/n=%d/k=%d", name, n, k), func(t *testing.T) {
					d := gen(n)
					v, idx := tensor.TopK(tensor.FromFloat32(d), k)
					f := make([]float64, n)
					for i, e := range d {
						f[i] = float64(e)
					}
					want := srtRefArgSort(f, true)[:k]
					got := idx.Ints()
					require.Equal(t, want, got)
					wantV := make([]float32, k)
					for j, i := range want {
						wantV[j] = d[i]
					}
					srtSameFloats(t, wantV, v.Float32s())
				})
			}
		}
	}
}

func TestTopKManyRowsMatchesArgSort(t *testing.T) {
	// Enough rows to run on several goroutines.
	x := srtTies(5, 600, 64)
	v, idx := tensor.TopK(x, 9)
	all := tensor.ArgSort(x, -1, true).Ints()
	xs := x.Float32s()
	gotIdx, gotV := idx.Ints(), v.Float32s()
	for r := 0; r < 600; r++ {
		for j := 0; j < 9; j++ {
			require.Equal(t, all[r*64+j], gotIdx[r*9+j], "row %d", r)
			srtSameFloats(t, []float32{xs[r*64+all[r*64+j]]}, []float32{gotV[r*9+j]})
		}
	}
}

func TestTopKVJP(t *testing.T) {
	tests := []struct {
		shape []int
		k     int
	}{
		{[]int{6}, 3},
		{[]int{6}, 6},
		{[]int{6}, 0},
		{[]int{3, 5}, 2},
		{[]int{2, 3, 4}, 1},
	}
	for i, tt := range tests {
		t.Run(fmt.Sprintf("%v/k=%d", tt.shape, tt.k), func(t *testing.T) {
			x := srtDistinct(uint64(i+10), tt.shape...)
			f := func(xs []*tensor.Tensor) *tensor.Tensor {
				v, _ := tensor.TopK(xs[0], tt.k)
				return v
			}
			srtCheckGrad(t, f, x)
			srtCheckGrad(t, srtGradFn(func(xs []*tensor.Tensor) *tensor.Tensor {
				v, _ := tensor.TopK(xs[0], tt.k)
				return tensor.Mul(v, v)
			}, 0), x)
		})
	}
}

func TestTopKGradientScattersToChosenPositions(t *testing.T) {
	x := tensor.FromFloat32([]float32{1, 3, 3, 2, 0, 3}, 2, 3)
	c := tensor.FromFloat32([]float32{10, 20, 30, 40}, 2, 2)
	tr := tensor.NewTrace()
	xl := tr.Leaf(x)
	v, idx := tensor.TopK(xl, 2)
	assert.True(t, v.IsTraced())
	assert.False(t, idx.IsTraced(), "indices carry no gradient")
	g := tensor.Backward(tr, []*tensor.Tensor{v}, []*tensor.Tensor{c}, []*tensor.Tensor{xl}, false)[0]
	// row 0 [1 3 3] picks 1, 2; row 1 [2 0 3] picks 2, 0.
	assert.Equal(t, []float32{0, 10, 20, 40, 0, 30}, g.Float32s())
}

// TopK's gradient along the MoE router's rows (4096 tokens, top 2 of 8
// experts), which splits its rows over the cores at two threads: each
// row's cotangents land on its chosen positions, every other element is
// +0, whatever goroutine computed the row.
func TestTopKGradientRouterRows(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(2))
	const rows, n, k = 4096, 8, 2
	x := srtDistinct(7, rows, n)
	c := srtRandn(8, rows, k)
	tr := tensor.NewTrace()
	xl := tr.Leaf(x)
	_, idx := tensor.TopK(xl, k)
	v, _ := tensor.TopK(xl, k)
	g := tensor.Backward(tr, []*tensor.Tensor{v}, []*tensor.Tensor{c}, []*tensor.Tensor{xl}, false)[0]
	want := make([]float32, rows*n)
	ids, cs := idx.Int32s(), c.Float32s()
	for r := range rows {
		for j := range k {
			want[r*n+int(ids[r*k+j])] = cs[r*k+j]
		}
	}
	require.Equal(t, want, g.Float32s())
}

func TestTopKPanics(t *testing.T) {
	x := tensor.Zeros(tensor.Float32, 4, 3)
	require.PanicsWithValue(t, "tensor.TopK: f32[4,3]: k=5 > 3", func() { tensor.TopK(x, 5) })
	require.PanicsWithValue(t, "tensor.TopK: f32[4,3]: k=-1 < 0", func() { tensor.TopK(x, -1) })
	require.PanicsWithValue(t, "tensor.TopK: f32[]: needs at least 1 dimension", func() { tensor.TopK(tensor.Scalar(1), 1) })
	require.PanicsWithValue(t, "tensor.TopK: i32[2,0]: k=1 > 0", func() { tensor.TopK(tensor.Zeros(tensor.Int32, 2, 0), 1) })
}

func TestLexSortHandWorked(t *testing.T) {
	// NumPy's documentation: sort by a, then by b.
	a := tensor.FromInt32([]int32{1, 5, 1, 4, 3, 4, 4})
	b := tensor.FromInt32([]int32{9, 4, 0, 4, 0, 2, 1})
	assert.Equal(t, []int{2, 0, 4, 6, 5, 3, 1}, tensor.LexSort(b, a).Ints())
	// The last key is the primary one: swapping them changes the order.
	assert.Equal(t, []int{2, 4, 6, 5, 3, 1, 0}, tensor.LexSort(a, b).Ints())

	// Mixed dtypes, NaN last, full ties keep their order.
	f := tensor.FromFloat32([]float32{srtNaN, 1, 1, 0, 1})
	g := tensor.FromBool([]bool{false, true, false, false, false})
	assert.Equal(t, []int{3, 2, 4, 0, 1}, tensor.LexSort(f, g).Ints())
	assert.Equal(t, []int{3, 2, 4, 1, 0}, tensor.LexSort(g, f).Ints())

	assert.Equal(t, []int{}, tensor.LexSort(tensor.FromInt32(nil), tensor.FromFloat32(nil)).Ints())
	assert.Equal(t, []int{0}, tensor.LexSort(tensor.FromInt32([]int32{3})).Ints())
}

func TestLexSortMatchesReference(t *testing.T) {
	for seed := uint64(0); seed < 20; seed++ {
		rng := rand.New(rand.NewPCG(seed, 4))
		n := rng.IntN(200)
		if seed >= 16 {
			// Runs of equal primary keys long enough to be radix sorted,
			// over the workers.
			n = 2048 + rng.IntN(4000)
		}
		nk := 1 + rng.IntN(4)
		if seed >= 16 {
			nk = 2 // a float secondary key with ties, an int32 primary
		}
		keys := make([]*tensor.Tensor, nk)
		vals := make([][]float64, nk)
		for k := range keys {
			kind := rng.IntN(3)
			if seed >= 16 {
				kind = k
			}
			switch kind {
			case 0:
				keys[k] = srtTies(seed*10+uint64(k), n)
			case 1:
				d := make([]int32, n)
				for i := range d {
					d[i] = int32(rng.IntN(4) - 2)
				}
				keys[k] = tensor.FromInt32(d)
			default:
				d := make([]bool, n)
				for i := range d {
					d[i] = rng.IntN(2) == 0
				}
				keys[k] = tensor.FromBool(d)
			}
			vals[k] = keys[k].Float64s()
		}
		want := make([]int, n)
		for i := range want {
			want[i] = i
		}
		sort.SliceStable(want, func(i, j int) bool {
			for k := nk - 1; k >= 0; k-- {
				a, b := vals[k][want[i]], vals[k][want[j]]
				if srtRefLess(a, b) {
					return true
				}
				if srtRefLess(b, a) {
					return false
				}
			}
			return false
		})
		got := tensor.LexSort(keys...)
		require.Equal(t, []int{n}, got.Shape())
		require.Equal(t, want, got.Ints(), "seed %d", seed)
		if nk == 1 {
			require.Equal(t, tensor.ArgSort(keys[0], 0, false).Ints(), got.Ints())
		}
	}
}

func TestLexSortPanics(t *testing.T) {
	a := tensor.Zeros(tensor.Int32, 3)
	require.PanicsWithValue(t, "tensor.LexSort: no keys", func() { tensor.LexSort() })
	require.PanicsWithValue(t, "tensor.LexSort: operand keys[1] is nil", func() { tensor.LexSort(a, nil) })
	require.PanicsWithValue(t, "tensor.LexSort: i32[3], f32[2,2]: key 1 is f32[2,2], want 1-D",
		func() { tensor.LexSort(a, tensor.Zeros(tensor.Float32, 2, 2)) })
	require.PanicsWithValue(t, "tensor.LexSort: i32[]: key 0 is i32[], want 1-D",
		func() { tensor.LexSort(tensor.ScalarInt(1)) })
	require.PanicsWithValue(t, "tensor.LexSort: i32[3], f32[4]: keys have different lengths (3 and 4)",
		func() { tensor.LexSort(a, tensor.Zeros(tensor.Float32, 4)) })
}

func BenchmarkTopK(b *testing.B) {
	x := srtRandn(1, 4096, 64)
	for _, k := range []int{1, 8, 64} {
		b.Run(fmt.Sprintf("4096x64/k=%d", k), func(b *testing.B) {
			bytes := float64(x.Bytes())
			for b.Loop() {
				tensor.TopK(x, k)
			}
			srtReport(b, bytes)
		})
	}
	// The MoE router's: 2048 tokens, 8 experts, top 2.
	r := srtRandn(2, 2048, 8)
	b.Run("2048x8/k=2", func(b *testing.B) {
		bytes := float64(r.Bytes())
		for b.Loop() {
			tensor.TopK(r, 2)
		}
		srtReport(b, bytes)
	})
}

// The MoE routing sort: 2048 tokens × top 2, by expert (8) then by
// descending probability.
func BenchmarkLexSort(b *testing.B) {
	probs := tensor.Neg(srtRandn(3, 4096))
	ids := make([]int32, 4096)
	for i := range ids {
		ids[i] = int32(i*7919) % 8
	}
	experts := tensor.FromInt32(ids, 4096)
	b.Run("4096/2keys", func(b *testing.B) {
		bytes := float64(probs.Bytes() + experts.Bytes())
		for b.Loop() {
			tensor.LexSort(probs, experts)
		}
		srtReport(b, bytes)
	})
}

func BenchmarkArgSort(b *testing.B) {
	x := srtRandn(1, 1024, 1000)
	bytes := float64(x.Bytes())
	for b.Loop() {
		tensor.ArgSort(x, -1, false)
	}
	srtReport(b, bytes)
}
