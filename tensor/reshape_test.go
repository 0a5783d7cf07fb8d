package tensor_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/tensor"
)

func TestReshape(t *testing.T) {
	x := arangeF(24, 2, 3, 4)
	tests := []struct {
		in   *tensor.Tensor
		to   []int
		want []int
	}{
		{x, []int{6, 4}, []int{6, 4}},
		{x, []int{-1}, []int{24}},
		{x, []int{4, -1}, []int{4, 6}},
		{x, []int{-1, 2, 3}, []int{4, 2, 3}},
		{x, []int{2, 1, 12, 1}, []int{2, 1, 12, 1}},
		{x, []int{2, 3, 4}, []int{2, 3, 4}},
		{tensor.Scalar(5), []int{1, 1}, []int{1, 1}},
		{tensor.Scalar(5), []int{-1}, []int{1}},
		{tensor.FromFloat32([]float32{5}, 1, 1), []int{}, []int{}},
		{tensor.Zeros(tensor.Float32, 0, 3), []int{3, 0}, []int{3, 0}},
		{tensor.Zeros(tensor.Float32, 0, 3), []int{-1, 3}, []int{0, 3}},
		{tensor.Zeros(tensor.Int32, 2, 0), []int{0}, []int{0}},
		{tensor.Arange(6), []int{3, 2}, []int{3, 2}},
		{tensor.FromBool([]bool{true, false}), []int{2, 1}, []int{2, 1}},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%v to %v", tt.in, tt.to), func(t *testing.T) {
			before := snapshot(tt.in)
			got := tensor.Reshape(tt.in, tt.to...)
			requireExact(t, tt.in.DType(), tt.want, tt.in.Float64s(), got)
			requireUnchanged(t, before)
		})
	}
	// Reshape is a view: no data is copied; the same shape is x itself.
	y := tensor.Reshape(x, 4, 6)
	assert.True(t, sharesStorage(x, y))
	assert.Same(t, x, tensor.Reshape(x, 2, 3, 4))
	assert.Same(t, x, tensor.Reshape(x, 2, -1, 4))
	// The shape argument is copied.
	shape := []int{4, 6}
	z := tensor.Reshape(x, shape...)
	shape[0] = 1
	assert.Equal(t, []int{4, 6}, z.Shape())
	requireExact(t, tensor.Float32, []int{24}, x.Float64s(), tensor.Flatten(x))
	requireExact(t, tensor.Float32, []int{1}, []float64{3}, tensor.Flatten(tensor.Scalar(3)))
}

func TestExpandDimsSqueeze(t *testing.T) {
	x := arangeF(6, 2, 3)
	tests := []struct {
		name string
		got  *tensor.Tensor
		want []int
	}{
		{"ExpandDims 0", tensor.ExpandDims(x, 0), []int{1, 2, 3}},
		{"ExpandDims 1", tensor.ExpandDims(x, 1), []int{2, 1, 3}},
		{"ExpandDims 2", tensor.ExpandDims(x, 2), []int{2, 3, 1}},
		{"ExpandDims -1", tensor.ExpandDims(x, -1), []int{2, 3, 1}},
		{"ExpandDims -3", tensor.ExpandDims(x, -3), []int{1, 2, 3}},
		{"ExpandDims scalar", tensor.ExpandDims(tensor.Scalar(1), 0), []int{1}},
		{"Squeeze all", tensor.Squeeze(tensor.Zeros(tensor.Float32, 1, 2, 1, 3, 1)), []int{2, 3}},
		{"Squeeze all to scalar", tensor.Squeeze(tensor.Zeros(tensor.Float32, 1, 1)), []int{}},
		{"Squeeze axis", tensor.Squeeze(tensor.Zeros(tensor.Float32, 1, 2, 1), 2), []int{1, 2}},
		{"Squeeze negative", tensor.Squeeze(tensor.Zeros(tensor.Float32, 1, 2, 1), -3), []int{2, 1}},
		{"Squeeze two", tensor.Squeeze(tensor.Zeros(tensor.Float32, 1, 2, 1), 0, 2), []int{2}},
		{"Squeeze none to squeeze", tensor.Squeeze(x), []int{2, 3}},
		{"Squeeze empty", tensor.Squeeze(tensor.Zeros(tensor.Float32, 1, 0)), []int{0}},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, tt.got.Shape(), tt.name)
		assert.Equal(t, numel(tt.want), tt.got.Size(), tt.name)
	}
	requireExact(t, tensor.Float32, []int{2, 1, 3}, x.Float64s(), tensor.ExpandDims(x, 1))
}

func TestBroadcastTo(t *testing.T) {
	rng := newRNG(15)
	tests := [][2][]int{
		{{3}, {2, 3}},
		{{3, 1}, {3, 4}},
		{{3, 1}, {2, 3, 4}},
		{{}, {2, 2}},
		{{1}, {0}},
		{{1, 1}, {5, 1, 3}},
		{{2, 1, 3}, {4, 2, 5, 3}},
		{{2, 3}, {2, 3}},
		{{}, {}},
	}
	for _, tt := range tests {
		for _, dt := range []tensor.DType{tensor.Float32, tensor.Int32, tensor.Bool} {
			var x *tensor.Tensor
			switch dt {
			case tensor.Float32:
				x = randF32(rng, tt[0]...)
			case tensor.Int32:
				x = randI32(rng, -9, 9, tt[0]...)
			default:
				x = randBool(rng, tt[0]...)
			}
			before := snapshot(x)
			got := tensor.BroadcastTo(x, tt[1]...)
			want := make([]float64, numel(tt[1]))
			xv := x.Float64s()
			for o := range want {
				want[o] = xv[bcastIndex(unravel(o, tt[1]), tt[0])]
			}
			requireExact(t, dt, tt[1], want, got, "%v to %v", x, tt[1])
			requireUnchanged(t, before)
			if numel(tt[0]) != numel(tt[1]) {
				assert.False(t, sharesStorage(x, got))
			}
		}
	}
	x := randF32(rng, 2, 3)
	assert.Same(t, x, tensor.BroadcastTo(x, 2, 3))
}

// refTranspose permutes by index arithmetic.
func refTranspose(x *tensor.Tensor, perm []int) ([]float64, []int) {
	in := x.Shape()
	shape := make([]int, len(perm))
	for i, p := range perm {
		shape[i] = in[p]
	}
	vals := x.Float64s()
	out := make([]float64, len(vals))
	for o := range out {
		idx := unravel(o, shape)
		src := make([]int, len(in))
		for i, p := range perm {
			src[p] = idx[i]
		}
		out[o] = vals[ravel(src, in)]
	}
	return out, shape
}

func TestTransposeAllPermutations(t *testing.T) {
	rng := newRNG(16)
	inputs := []*tensor.Tensor{
		arangeF(120, 2, 3, 4, 5),
		randI32(rng, -100, 100, 3, 1, 2, 4),
		randBool(rng, 2, 2, 3, 1),
		tensor.Zeros(tensor.Float32, 2, 0, 3, 1),
	}
	for _, x := range inputs {
		for _, perm := range permutations(4) {
			before := snapshot(x)
			got := tensor.Transpose(x, perm...)
			want, shape := refTranspose(x, perm)
			requireExact(t, x.DType(), shape, want, got, "%v perm %v", x, perm)
			requireUnchanged(t, before)
			identity := perm[0] == 0 && perm[1] == 1 && perm[2] == 2 && perm[3] == 3
			if identity {
				assert.Same(t, x, got)
			} else if x.Size() > 0 {
				assert.False(t, sharesStorage(x, got))
			}
			// Negative entries count from the end.
			neg := make([]int, 4)
			for i, p := range perm {
				neg[i] = p - 4
			}
			requireExact(t, x.DType(), shape, want, tensor.Transpose(x, neg...), "%v perm %v", x, neg)
		}
	}
	// Default: reverse the dimensions.
	x := inputs[0]
	want, shape := refTranspose(x, []int{3, 2, 1, 0})
	requireExact(t, tensor.Float32, shape, want, tensor.Transpose(x))
	// Lower ranks.
	requireExact(t, tensor.Float32, []int{}, []float64{4}, tensor.Transpose(tensor.Scalar(4)))
	requireExact(t, tensor.Float32, []int{3, 2}, []float64{0, 3, 1, 4, 2, 5}, tensor.Transpose(arangeF(6, 2, 3)))
	// T swaps the last two dimensions.
	want, shape = refTranspose(x, []int{0, 1, 3, 2})
	requireExact(t, tensor.Float32, shape, want, tensor.T(x))
	requireExact(t, tensor.Float32, []int{3, 2}, []float64{0, 3, 1, 4, 2, 5}, tensor.T(arangeF(6, 2, 3)))
}

func TestReshapeVJP(t *testing.T) {
	rng := newRNG(17)
	x := randF32(rng, 2, 3, 4)
	fs := map[string]func(*tensor.Tensor) *tensor.Tensor{
		"Reshape":      func(x *tensor.Tensor) *tensor.Tensor { return tensor.Reshape(x, 4, -1) },
		"Flatten":      tensor.Flatten,
		"ExpandDims":   func(x *tensor.Tensor) *tensor.Tensor { return tensor.ExpandDims(x, 1) },
		"Squeeze":      func(x *tensor.Tensor) *tensor.Tensor { return tensor.Squeeze(tensor.Reshape(x, 2, 1, 12), 1) },
		"BroadcastTo":  func(x *tensor.Tensor) *tensor.Tensor { return tensor.BroadcastTo(x, 3, 2, 3, 4) },
		"BroadcastTo1": func(x *tensor.Tensor) *tensor.Tensor { return tensor.BroadcastTo(tensor.SumKeep(x, 1), 5, 2, 3, 4) },
		"Transpose":    func(x *tensor.Tensor) *tensor.Tensor { return tensor.Transpose(x, 2, 0, 1) },
		"TransposeRev": func(x *tensor.Tensor) *tensor.Tensor { return tensor.Transpose(x) },
		"T":            tensor.T,
	}
	for name, f := range fs {
		t.Run(name, func(t *testing.T) {
			checkGrad(t, func(xs []*tensor.Tensor) *tensor.Tensor { return f(xs[0]) }, ts(x))
			// Linear maps: the second derivative is zero, and checks out.
			checkGrad(t, gradOf(func(xs []*tensor.Tensor) *tensor.Tensor { return tensor.Square(f(xs[0])) }, 0), ts(x))
		})
	}
	for _, perm := range permutations(4) {
		x := randF32(rng, 2, 1, 3, 2)
		checkGrad(t, func(xs []*tensor.Tensor) *tensor.Tensor { return tensor.Transpose(xs[0], perm...) }, ts(x))
	}
	// Broadcasting a scalar: the gradient is the sum.
	g := grad(func(xs []*tensor.Tensor) *tensor.Tensor { return tensor.BroadcastTo(xs[0], 2, 3) }, ts(tensor.Scalar(1)))
	requireExact(t, tensor.Float32, []int{}, []float64{6}, g[0])
}

func TestReshapePanics(t *testing.T) {
	x := tensor.Zeros(tensor.Float32, 2, 3)
	tests := []struct {
		f   func()
		msg string
	}{
		{func() { tensor.Reshape(x, 4, -1) }, "tensor.Reshape: f32[2,3] to [4 -1]: cannot infer the -1 dimension"},
		{func() { tensor.Reshape(x, -1, -1) }, "tensor.Reshape: f32[2,3] to [-1 -1]: bad dimension -1"},
		{func() { tensor.Reshape(x, 3, -2) }, "tensor.Reshape: f32[2,3] to [3 -2]: bad dimension -2"},
		{func() { tensor.Reshape(x, 4, 2) }, "tensor.Reshape: f32[2,3] to [4 2]: 6 elements do not fit 8"},
		{func() { tensor.Reshape(x) }, "tensor.Reshape: f32[2,3] to []: 6 elements do not fit 1"},
		{func() { tensor.Reshape(tensor.Zeros(tensor.Float32, 0, 3), 0, -1) }, "tensor.Reshape: f32[0,3] to [0 -1]: cannot infer the -1 dimension"},
		{func() { tensor.ExpandDims(x, 3) }, "tensor.ExpandDims: axis 3 out of range for f32[2,3]"},
		{func() { tensor.ExpandDims(x, -4) }, "tensor.ExpandDims: axis -4 out of range for f32[2,3]"},
		{func() { tensor.Squeeze(tensor.Zeros(tensor.Float32, 2, 1), 0) }, "tensor.Squeeze: f32[2,1]: dimension 0 has size 2, not 1"},
		{func() { tensor.Squeeze(x, 2) }, "tensor.Squeeze: axis 2 out of range for f32[2,3]"},
		{func() { tensor.Squeeze(tensor.Zeros(tensor.Float32, 1, 1), 0, -2) }, "tensor.Squeeze: axis 0 repeated in [0 -2] for f32[1,1]"},
		{func() { tensor.BroadcastTo(tensor.Zeros(tensor.Float32, 3), 4) }, "tensor.BroadcastTo: f32[3] to f32[4]: shapes do not broadcast (dim -1: 3 vs 4)"},
		{func() { tensor.BroadcastTo(tensor.Zeros(tensor.Float32, 3, 1), 1, 4) }, "tensor.BroadcastTo: f32[3,1] cannot be broadcast to [1 4]"},
		{func() { tensor.BroadcastTo(x, 3) }, "tensor.BroadcastTo: f32[2,3] cannot be broadcast to [3]"},
		{func() { tensor.BroadcastTo(x, -1, 3) }, "tensor.BroadcastTo: negative dimension in shape [-1 3]"},
		{func() { tensor.Transpose(x, 0) }, "tensor.Transpose: f32[2,3]: permutation [0] has 1 entries, want 2"},
		{func() { tensor.Transpose(x, 0, 0) }, "tensor.Transpose: f32[2,3]: [0 0] is not a permutation"},
		{func() { tensor.Transpose(x, 0, 2) }, "tensor.Transpose: f32[2,3]: [0 2] is not a permutation"},
		{func() { tensor.Transpose(x, 1, -1) }, "tensor.Transpose: f32[2,3]: [1 -1] is not a permutation"},
		{func() { tensor.T(tensor.Zeros(tensor.Float32, 3)) }, "tensor.T: f32[3] has fewer than 2 dimensions"},
	}
	for _, tt := range tests {
		requirePanic(t, tt.msg, tt.f)
	}
}

// Reshape of a traced tensor keeps it traced; its Producer is the reshape.
func TestReshapeTraced(t *testing.T) {
	tr := tensor.NewTrace()
	x := tr.Leaf(arangeF(6, 2, 3))
	y := tensor.Reshape(x, 3, 2)
	require.True(t, y.TracedBy(tr))
	info, ok := y.Producer()
	require.True(t, ok)
	assert.Equal(t, "reshape", info.Label)
	assert.Equal(t, []int{3, 2}, y.Shape())
}
