package autodiff_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/autodiff"
	"github.com/gonox/gonox/tensor"
)

// A tangent that does not match its primal panics naming autodiff.JVP,
// the function called, rather than the tensor-level trace inside it.
func TestJVPTangentMismatchNamesJVP(t *testing.T) {
	sin := func(x *tensor.Tensor) *tensor.Tensor { return tensor.Sin(x) }
	x := tensor.Ones(tensor.Float32, 3)
	require.PanicsWithValue(t, "autodiff.JVP: tangent f32[4] for primal f32[3]: want the primal's shape and dtype",
		func() { autodiff.JVP(sin, x, tensor.Ones(tensor.Float32, 4)) })
	require.PanicsWithValue(t, "autodiff.JVP: tangent f64[3] for primal f32[3]: want the primal's shape and dtype",
		func() { autodiff.JVP(sin, x, tensor.Ones(tensor.Float64, 3)) })
	type pair struct{ A, B *tensor.Tensor }
	f := func(p pair) *tensor.Tensor { return tensor.Add(p.A, p.B) }
	require.PanicsWithValue(t, "autodiff.JVP: tangent f32[2] for primal f32[3]: want the primal's shape and dtype",
		func() { autodiff.JVP(f, pair{x, x}, pair{nil, tensor.Ones(tensor.Float32, 2)}) })
	// A nil tangent is a zero one.
	_, dy := autodiff.JVP(f, pair{x, x}, pair{nil, tensor.Ones(tensor.Float32, 3)})
	require.Equal(t, []float32{1, 1, 1}, dy.Float32s())
}
